"""A real browser for tests: Debian's chromium, headless, driven over the DevTools protocol
(a websocket; `websockets` comes with uvicorn[standard]). No WebDriver and no download: the
browser is the system's (`.ci/run` installs it), and a test that needs it fails when it is
missing, never skips.

One `Browser` is one chromium process with its own profile in a temporary folder; `page`
is its one tab, attached in flattened mode so that each command names its session.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
DESKTOP = (1280, 900)
PHONE = (390, 844)


def chromium() -> str:
    """The browser's executable; AssertionError naming what to install when there is none."""
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError("no chromium here: `apt-get install chromium` (.ci/run does)")


class Browser:
    """A headless chromium with one tab; `close` ends it."""

    def __init__(self) -> None:
        self.profile = Path(tempfile.mkdtemp(prefix="teaparty-chromium-"))
        self.process = subprocess.Popen(
            [
                chromium(),
                "--headless=new",
                "--no-sandbox",  # CI runs as root, where chromium's own sandbox will not start
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its helper processes go with it (`close`)
        )
        self._ids = itertools.count(1)
        self._events: list[dict[str, Any]] = []
        self._stack = contextlib.ExitStack()
        self.socket = self._stack.enter_context(
            connect(self._browser_url(), max_size=None, open_timeout=30)
        )
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        for domain in ("Page", "Runtime"):
            self.call(f"{domain}.enable", session=True)

    def _browser_url(self) -> str:
        """The browser's websocket, from the port file chromium writes once it listens."""
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"chromium ended at start (exit {self.process.returncode})")
            if port_file.is_file():
                lines = port_file.read_text().split()
                if len(lines) == 2:
                    return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
            time.sleep(0.05)
        raise AssertionError("chromium never opened its debugging port")

    def call(self, method: str, *, session: bool = False, **params: Any) -> dict[str, Any]:
        """Send one command and wait for its answer (events meanwhile are kept)."""
        ident = next(self._ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        self.socket.send(json.dumps(message))
        while True:
            answer = json.loads(self.socket.recv(timeout=60))
            if answer.get("id") == ident:
                if "error" in answer:
                    raise AssertionError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result
            self._events.append(answer)

    def wait_event(self, method: str, limit: float = 60.0) -> dict[str, Any]:
        """The next event `method` of the tab (one that came already counts)."""
        for index, event in enumerate(self._events):
            if event.get("method") == method:
                return self._events.pop(index)
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            event = json.loads(self.socket.recv(timeout=deadline - time.monotonic()))
            if event.get("method") == method:
                return event
            self._events.append(event)
        raise AssertionError(f"no {method} within {limit:g} s")

    def open(self, url: str) -> None:
        """Go to `url` and wait until the page has loaded."""
        self._events.clear()
        self.call("Page.navigate", session=True, url=url)
        self.wait_event("Page.loadEventFired")

    def open_transcript(self, agent: str) -> None:
        """From a job page, follow its tree's link to the transcript of the agent whose name
        ends with `agent` (such as `project-lead`)."""
        self.open(
            self.evaluate(
                "[...document.querySelectorAll('.tree a')]"
                f".find(a => a.innerText.endsWith({json.dumps(agent)})).href"
            )
        )

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.call(
            "Runtime.evaluate", session=True, expression=expression, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def text(self, selector: str = "body") -> str:
        found = self.evaluate(
            f"(document.querySelector({json.dumps(selector)}) || {{innerText: ''}}).innerText"
        )
        return str(found)

    def until(self, expression: str, limit: float = 60.0) -> Any:
        """Wait until a JavaScript expression is truthy in the page; its value."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"{expression} never held; the page shows:\n{self.text()}")

    def screenshot(self, path: Path, size: tuple[int, int]) -> None:
        """A PNG of the page at `size` (width, height), as a phone or a desktop shows it."""
        width, height = size
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=width < 600,
        )
        shot = self.call("Page.captureScreenshot", session=True, format="png")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))

    def cookies(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.call("Network.getAllCookies", session=True)["cookies"]
        return found

    def close(self) -> None:
        try:
            self._stack.close()
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
