"""A command on a real pseudo-terminal, as a person runs it: what it prints, keys, Ctrl-C."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path


class Terminal:
    """A command on a real pseudo-terminal: what it prints, keys typed, Ctrl-C."""

    def __init__(self, argv: list[str], cwd: Path, env: Mapping[str, str] | None = None) -> None:
        self.argv = argv
        self.cwd = cwd
        self.env = dict(env if env is not None else os.environ)
        self.output = ""

    def __enter__(self) -> Terminal:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the command, with the terminal as its stdio
            os.chdir(self.cwd)
            # As a shell starts a foreground command: Ctrl-C and Ctrl-\ at their defaults. A
            # suite started in the background by a script inherits them ignored (POSIX shells
            # ignore SIGINT for asynchronous commands), and Ctrl-C would then do nothing.
            for number in (signal.SIGINT, signal.SIGQUIT):
                signal.signal(number, signal.SIG_DFL)
            os.execvpe(self.argv[0], self.argv, self.env)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(self.fd)

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:
            return False
        self.output += chunk.decode(errors="replace").replace("\r\n", "\n")
        return bool(chunk)

    def expect(self, text: str, limit: float = 60.0) -> None:
        deadline = time.monotonic() + limit
        while text not in self.output:
            if time.monotonic() > deadline or not self._read(deadline - time.monotonic()):
                if text in self.output:
                    return
                raise AssertionError(f"{text!r} never came; the terminal shows:\n{self.output}")

    def until(self, condition: Callable[[], bool], limit: float = 60.0) -> None:
        """Read what the command prints until `condition()` holds."""
        deadline = time.monotonic() + limit
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the condition never held; the terminal shows:\n{self.output}"
                )
            self._read(0.05)

    def send(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def wait(self, limit: float = 60.0) -> int:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                while self._read(0.1):
                    pass
                return os.waitstatus_to_exitcode(status)
            self._read(0.1)
        raise AssertionError(f"still running after {limit}s; the terminal shows:\n{self.output}")


_CONTROL = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|\x1b[()][0-9A-B]|[\r\n\x08]|[^\x1b\r\n\x08]+")


class _Screen:
    """A terminal's lines and cursor, as far as `screen` needs them."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.lines, self.row, self.col = [""], 0, 0

    def put(self, text: str) -> None:
        for char in text:
            if self.col >= self.width:  # the terminal wraps to the next line
                self.row, self.col = self.row + 1, 0
            self.reach()
            line = self.lines[self.row].ljust(self.col)
            self.lines[self.row] = line[: self.col] + char + line[self.col + 1 :]
            self.col += 1

    def reach(self) -> None:
        while len(self.lines) <= self.row:
            self.lines.append("")


def screen(output: str, width: int = 120) -> list[str]:
    """The lines a terminal `width` columns wide shows (its scrollback too) after `output`:
    text, new lines, carriage returns, cursor up (`ESC[nA`) and erase line (`ESC[2K`) as
    rich's live display writes them; colours and other sequences change no text."""
    term = _Screen(width)
    for match in _CONTROL.finditer(output):
        token, command = match.group(0), match.group(2)
        if token == "\n":
            term.row, term.col = term.row + 1, 0
        elif token == "\r":
            term.col = 0
        elif token == "\x08":
            term.col = max(term.col - 1, 0)
        elif command == "A":
            term.row = max(term.row - int(match.group(1) or 1), 0)
        elif command == "K":
            term.lines[term.row] = ""
        elif not token.startswith("\x1b"):
            term.put(token)
        term.reach()
    return [line.rstrip() for line in term.lines]
