"""captured_output redirects file descriptors, which are process-wide: captures from several threads must take
turns and always restore the real stdout (the lab's parallel cells once lost every later line of output)."""
from __future__ import annotations

import os
import threading

from edgekit.quiet import captured_output


def _fd_identity(fd: int):
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def test_concurrent_captures_each_get_their_own_text_and_restore_stdout():
    before = _fd_identity(1), _fd_identity(2)
    inside = threading.Barrier(2, timeout=10)
    texts = {}

    def capture(name: str) -> None:
        try:
            inside.wait()  # both threads enter at the same moment
        except threading.BrokenBarrierError:
            pass
        with captured_output() as lines:
            os.write(1, f"native {name} out\n".encode())
            os.write(2, f"native {name} err\n".encode())
            threading.Event().wait(0.05)  # hold the redirection while the other thread wants it
        texts[name] = lines

    threads = [threading.Thread(target=capture, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert (_fd_identity(1), _fd_identity(2)) == before
    assert texts == {"a": ["native a out", "native a err"], "b": ["native b out", "native b err"]}


def test_a_nested_capture_in_the_same_thread_works_and_restores():
    before = _fd_identity(1)
    with captured_output() as outer:
        os.write(1, b"outer\n")
        with captured_output() as inner:
            os.write(1, b"inner\n")
        os.write(1, b"outer again\n")
    assert _fd_identity(1) == before
    assert inner == ["inner"] and outer == ["outer", "outer again"]
