"""A real headless Chromium (Debian package ``chromium``) driven over the DevTools protocol, to load a report page
the way a person's browser does: console errors, the charts in the rendered DOM, and a screenshot.

The DevTools websocket is spoken with the stdlib (RFC 6455 client frames, loopback only): the venv has no
websocket client, and this needs only text frames. Chromium is started with its background networking off
(this machine's network is closed; the page itself loads nothing: report.html has a CSP of default-src 'none').
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-port=0", "--remote-allow-origins=*"]
# what the page's charts look like once rendered: id, marks drawn, rendered width (px)
CHARTS_JS = ("JSON.stringify(Array.from(document.querySelectorAll('svg.chart')).map(s => ({id: s.id, "
             "marks: s.querySelectorAll('rect,line').length, width: s.getBoundingClientRect().width})))")


class WebSocket:
    """The client side of one websocket connection (text frames, masked as RFC 6455 requires)."""

    def __init__(self, url: str, timeout: float) -> None:
        host_port, path = url.split("://", 1)[1].split("/", 1)
        host, port = host_port.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(f"GET /{path} HTTP/1.1\r\nHost: {host_port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("DevTools closed the connection during the handshake")
            reply += chunk
        head, self.buffer = reply.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"DevTools refused the websocket: {head.decode(errors='replace')}")

    def send(self, text: str) -> None:
        payload, mask = text.encode(), os.urandom(4)
        n = len(payload)
        header = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                                  bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536 else
                                  bytes([0x80 | 127]) + struct.pack(">Q", n))
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("DevTools closed the connection")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def receive(self) -> str:
        """The next text message (fragments joined; pings answered)."""
        parts: List[bytes] = []
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            n = struct.unpack(">H", self._read(2))[0] if n == 126 else (
                struct.unpack(">Q", self._read(8))[0] if n == 127 else n)
            mask = self._read(4) if b1 & 0x80 else b""
            data = self._read(n)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            opcode = b0 & 0x0F
            if opcode == 0x8:
                raise ConnectionError("DevTools closed the websocket")
            if opcode == 0x9:  # ping -> pong (masked, as every client frame)
                pong_mask = os.urandom(4)
                self.sock.sendall(bytes([0x8A, 0x80 | len(data)]) + pong_mask +
                                  bytes(b ^ pong_mask[i % 4] for i, b in enumerate(data)))
                continue
            if opcode in (0x0, 0x1, 0x2):
                parts.append(data)
                if b0 & 0x80:
                    return b"".join(parts).decode()

    def close(self) -> None:
        self.sock.close()


@dataclass
class PageCheck:
    """What loading one page gave: console errors (with their text), the charts rendered, the screenshot."""

    errors: List[str] = field(default_factory=list)
    charts: List[Dict[str, Any]] = field(default_factory=list)
    screenshot: Optional[Path] = None

    def chart(self, chart_id: str) -> Dict[str, Any]:
        found = [c for c in self.charts if c["id"] == chart_id]
        assert found, f"no chart {chart_id!r} on the page (charts: {[c['id'] for c in self.charts]})"
        return found[0]


class Chromium:
    """One headless Chromium with a fresh profile; ``check(page)`` loads a file and reports on it."""

    def __init__(self, timeout: float = 60.0) -> None:
        if CHROMIUM is None:
            raise RuntimeError("chromium is not installed (Debian: apt-get install chromium)")
        self.timeout = timeout
        self.profile = Path(tempfile.mkdtemp(prefix="edgekit-chromium-"))
        self.proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not (port_file.is_file() and port_file.read_text().count("\n") >= 1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"chromium did not open its DevTools port (exit code {self.proc.returncode})")
            time.sleep(0.05)
        self.port = int(port_file.read_text().splitlines()[0])
        self._id = 0

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def _page_socket(self) -> WebSocket:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=self.timeout) as reply:
            targets = json.loads(reply.read())
        page = next(t for t in targets if t["type"] == "page")
        return WebSocket(page["webSocketDebuggerUrl"], self.timeout)

    def _call(self, ws: WebSocket, events: List[dict], method: str, **params: Any) -> dict:
        """Send one command; events that arrive meanwhile are kept in ``events``."""
        self._id += 1
        ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            message = json.loads(ws.receive())
            if message.get("id") == self._id:
                if "error" in message:
                    raise RuntimeError(f"DevTools {method}: {message['error']}")
                return message.get("result", {})
            events.append(message)

    def check(self, page: Path, screenshot: Optional[Path] = None, width: int = 1100) -> PageCheck:
        """Load ``page`` (a file), collect every console error and uncaught exception, read the charts from the
        rendered DOM, and write a full-page PNG to ``screenshot`` when given."""
        ws = self._page_socket()
        events: List[dict] = []
        try:
            for domain in ("Runtime.enable", "Log.enable", "Page.enable"):
                self._call(ws, events, domain)
            self._call(ws, events, "Emulation.setDeviceMetricsOverride", width=width, height=900,
                       deviceScaleFactor=1, mobile=False)
            self._call(ws, events, "Page.navigate", url=Path(page).resolve().as_uri())
            deadline = time.monotonic() + self.timeout
            while not any(e.get("method") == "Page.loadEventFired" for e in events):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{page} did not finish loading in {self.timeout:g} s")
                events.append(json.loads(ws.receive()))
            charts = json.loads(self._call(ws, events, "Runtime.evaluate", expression=CHARTS_JS,
                                           returnByValue=True)["result"]["value"])
            result = PageCheck(charts=charts)
            if screenshot is not None:
                size = self._call(ws, events, "Page.getLayoutMetrics")["cssContentSize"]
                shot = self._call(ws, events, "Page.captureScreenshot", format="png", captureBeyondViewport=True,
                                  clip={"x": 0, "y": 0, "width": width, "height": size["height"], "scale": 1})
                Path(screenshot).write_bytes(base64.b64decode(shot["data"]))
                result.screenshot = Path(screenshot)
            result.errors = console_errors(events)
            return result
        finally:
            ws.close()


def console_errors(events: List[dict]) -> List[str]:
    """The errors among DevTools events: console.error/assert, uncaught exceptions, browser log errors (a blocked
    or failed load, a CSP violation)."""
    errors = []
    for e in events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            errors.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            errors.append("exception: " + (details.get("exception", {}).get("description") or details.get("text", "")))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            errors.append(f"log ({params['entry']['source']}): {params['entry']['text']}")
    return errors


DEPLOY_CHARTS = ("chart-parity-agreement", "chart-parity-sqnr", "chart-flash-split", "chart-ram-split",
                 "chart-memory-timeline", "chart-per-op", "chart-cycles")
LAB_CHARTS = ("chart-lab-heatmap",)
PNG = b"\x89PNG\r\n\x1a\n"


def check_report_page(page: Path, charts: Sequence[str], screenshot: Optional[Path] = None,
                      browser: Optional[Chromium] = None) -> Optional[PageCheck]:
    """report.html as written holds ``charts``; in Chromium (when installed) it loads without a console error,
    every one of them is rendered with marks, and the screenshot is a real PNG. None when Chromium is absent."""
    html = Path(page).read_text()
    for chart in charts:
        assert f'id="{chart}"' in html, chart
    if CHROMIUM is None:
        return None
    own = browser is None
    browser = browser or Chromium()
    try:
        result = browser.check(page, screenshot)
    finally:
        if own:
            browser.close()
    assert result.errors == [], result.errors
    for chart in charts:
        rendered = result.chart(chart)
        assert rendered["marks"] > 0 and rendered["width"] > 100, rendered
    if screenshot is not None:
        data = Path(screenshot).read_bytes()
        assert data.startswith(PNG) and len(data) > 20000, len(data)
    return result
