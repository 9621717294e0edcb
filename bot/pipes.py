"""Standard output that a reader may close while a job runs (`teaparty run … | head -3`).

Python ignores SIGPIPE, so the first write after the reader left raises BrokenPipeError,
and a traceback ended the run with its job half done. Here the first such write turns
standard output into /dev/null (on the descriptor too, so the interpreter's last flush is
quiet), says so once on standard error, and the run goes on: its outcome is its exit code.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TextIO


class ClosableOutput:
    """A text stream in front of `stream` that outlives its reader; `broken` once it left."""

    def __init__(self, stream: TextIO, *, note: Callable[[], str]) -> None:
        self.stream = stream
        self.note = note
        self.broken = False

    def write(self, text: str) -> int:
        """Write to the stream while someone reads it; afterwards, nowhere."""
        if not self.broken:
            try:
                return self.stream.write(text)
            except BrokenPipeError:
                self._left()
        return len(text)

    def flush(self) -> None:
        """Flush while someone reads."""
        if not self.broken:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._left()

    def isatty(self) -> bool:
        """Whether the stream is a terminal (a closed one is not)."""
        return not self.broken and self.stream.isatty()

    def fileno(self) -> int:
        """The stream's descriptor."""
        return self.stream.fileno()

    def _left(self) -> None:
        self.broken = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self.stream.fileno())
        finally:
            os.close(devnull)
        sys.stderr.write(f"{self.note()}\n")
        sys.stderr.flush()

    def __getattr__(self, name: str) -> object:
        return getattr(self.stream, name)
