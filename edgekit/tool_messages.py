"""Third-party tool output that reaches the user: colour codes stripped, long lines wrapped, known advice that
names the tool's own flags translated into edgekit's fix."""
from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[@-Z\\-_]")
WIDTH = 100


def strip_ansi(text: str) -> str:
    """``text`` without terminal colour and cursor codes."""
    return ANSI.sub("", text)


def clean_lines(lines: Iterable[str]) -> List[str]:
    """Non-empty lines, colour codes stripped, whitespace collapsed."""
    out = []
    for line in lines:
        line = " ".join(strip_ansi(line).split())
        if line:
            out.append(line)
    return out


def wrap(text: str, width: int = WIDTH, indent: str = "  ") -> str:
    """One message wrapped to ``width`` columns, continuation lines indented."""
    return "\n".join(textwrap.wrap(text, width=width, subsequent_indent=indent, break_long_words=True,
                                   break_on_hyphens=False)) or text


@dataclass(frozen=True)
class Translation:
    """A tool message pattern and what it means for an edgekit user."""

    pattern: re.Pattern
    problem: str
    fix: str


# onnx2tf's advice names its own command-line flags (-b, -ois, -kat, ...), which edgekit does not have.
ONNX2TF = (
    Translation(re.compile(r"dynamic|undefined dimension|-ois|overwrite_input_shape|batch_size|\s-b\s", re.I),
                "the model has an input dimension that is not fixed (for example a dynamic batch)",
                "pass --input-shape with every dimension, e.g. --input-shape 1,3,224,224"),
    Translation(re.compile(r"-kat|keep_shape_absolutely_input_names|NHWC|channel", re.I),
                "onnx2tf could not work out the input layout",
                "export the model with NCHW inputs and a fixed shape (--input-shape), or quantize it with --format onnx"),
)


# onnx2tf prints this advice after EVERY failure, whatever the cause: matching it said "input dimension not fixed"
# for static models too. Only the lines before it (the real error) are read.
ONNX2TF_BOILERPLATE = re.compile(
    r"The trace log is below|Read this and deal with it|Alternatively, if the input OP has a dynamic dimension|"
    r"If the input OP of ONNX before conversion is NHWC|for models that include NonMaxSuppression|"
    r"input_onnx_file_path:|onnx_op_name:|^Traceback|^File \"|^\^+$", re.I)


def onnx2tf_causes(lines: Sequence[str], *, keep: int = 3) -> List[str]:
    """onnx2tf's own error lines (its generic advice and tracebacks left out), the last ``keep`` of them;
    else the last exception line of a Python traceback it printed."""
    cleaned = clean_lines(lines)
    errors = [re.sub(r"^ERROR:\s*", "", line) for line in cleaned
              if line.startswith("ERROR:") and not ONNX2TF_BOILERPLATE.search(line[6:].strip())]
    if not errors:
        errors = [line for line in cleaned if re.match(r"^[A-Za-z_.]*(Error|Exception): ", line)]
    if not errors:  # neither: its plain last lines, advice left out
        errors = [line for line in cleaned if not ONNX2TF_BOILERPLATE.search(re.sub(r"^ERROR:\s*", "", line))]
    unique: List[str] = []
    for line in errors:
        line = re.sub(r"^[A-Za-z_.]*(Error|Exception): (ERROR: )?", "", line)
        if line not in unique:
            unique.append(line)
    return unique[-keep:]


def translate(lines: Sequence[str], table: Sequence[Translation]) -> Optional[Translation]:
    """The first translation whose pattern occurs in the tool's output."""
    text = "\n".join(clean_lines(lines))
    return next((t for t in table if t.pattern.search(text)), None)


def summarize(lines: Sequence[str], *, keep: int = 3, width: int = WIDTH) -> str:
    """The last ``keep`` meaningful lines of a tool's output, cleaned and each cut to ``width`` characters."""
    cleaned = clean_lines(lines)[-keep:]
    return "\n".join("  | " + (line if len(line) <= width else line[: width - 3] + "...") for line in cleaned)
