"""A headless Chromium driven over the DevTools protocol, for the report's browser test.

The protocol runs over `--remote-debugging-pipe` (commands on the browser's fd 3, replies
and events on its fd 4, each message a JSON text ended by NUL): no port, no websocket
library, nothing but the standard library and the Debian `chromium` package.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# As root in a container Chromium needs --no-sandbox; with no network, the background
# services would flood the log with refused connections, so they are switched off.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--hide-scrollbars",
         "--mute-audio", "--remote-debugging-pipe"]


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One Chromium process; `call` sends a command and waits for its reply, collecting
    the events that arrive meanwhile in `events`."""

    def __init__(self, binary: str) -> None:
        self.profile = tempfile.mkdtemp(prefix="storlab-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire() -> None:  # runs in the child before exec: put the pipe ends on fds 3, 4
            # (via fds >= 10 first, so that neither end is overwritten by the other's dup2)
            a = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=wire, pass_fds=(3, 4, to_child_r, from_child_w))
        os.close(to_child_r)
        os.close(from_child_w)
        self._next = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.events: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buf = b""
        while True:
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                self._inbox.put(None)
                return
            buf += chunk
            *msgs, buf = buf.split(b"\0")
            for m in msgs:
                self._inbox.put(json.loads(m))

    def call(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None, timeout: float = 60.0) -> dict[str, Any]:
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while self._next not in self._replies:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no reply to {method} in {timeout} s")
            try:
                m = self._inbox.get(timeout=left)
            except queue.Empty:
                continue
            if m is None:
                raise RuntimeError(f"chromium exited during {method}")
            if "id" in m:
                self._replies[m["id"]] = m
            else:
                self.events.append(m)
        reply = self._replies.pop(self._next)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method: str, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for e in self.events:
                if e.get("method") == method:
                    return e
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {method} event in {timeout} s")
            try:
                m = self._inbox.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            if m is None:
                raise RuntimeError("chromium exited")
            if "id" in m:
                self._replies[m["id"]] = m
            else:
                self.events.append(m)

    def open(self, url: str, width: int = 1280, height: int = 800) -> Page:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget",
                            {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        for domain in ("Page", "Runtime", "Log"):
            page.call(f"{domain}.enable")
        page.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        self.events.clear()
        page.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")
        return page

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_child)
        shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    def __init__(self, browser: Browser, session: str) -> None:
        self.browser = browser
        self.session = session

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.browser.call(method, params, self.session)

    def eval(self, expression: str) -> Any:
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError(f"page script failed: {r['exceptionDetails']}")
        return r["result"].get("value")

    def errors(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions, failed loads (Log domain)."""
        out = []
        for e in self.browser.events:
            if e.get("sessionId") != self.session:
                continue
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning",
                                                                      "assert"):
                out.append(f"console.{p['type']}: "
                           + " ".join(str(a.get("value", a.get("description")))
                                      for a in p.get("args", [])))
            elif m == "Runtime.exceptionThrown":
                out.append(f"exception: {p['exceptionDetails']}")
            elif m == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
                out.append(f"log {p['entry']['level']}: {p['entry']['text']} "
                           f"{p['entry'].get('url', '')}")
        return out

    def screenshot(self, path: Path) -> tuple[int, int]:
        """A PNG of the whole page (beyond the viewport); returns its CSS width and height."""
        m = self.call("Page.getLayoutMetrics")
        size = m.get("cssContentSize") or m["contentSize"]
        w, h = int(size["width"]), int(size["height"])
        shot = self.call("Page.captureScreenshot",
                         {"format": "png", "captureBeyondViewport": True,
                          "clip": {"x": 0, "y": 0, "width": w, "height": h, "scale": 1}})
        path.write_bytes(base64.b64decode(shot["data"]))
        return w, h


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    binary = chromium_binary()
    if binary is None:
        pytest.fail("chromium is not installed: `make test` installs it "
                    "(scripts/sysdeps.d/browser.txt); or apt-get install chromium")
    b = Browser(binary)
    try:
        yield b
    finally:
        b.close()
