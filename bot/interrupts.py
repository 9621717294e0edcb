"""Ctrl-C handled once: the first stops the work and lets it save, later ones wait for that.

Under `asyncio.run` a second Ctrl-C raises KeyboardInterrupt wherever the first one's
clean-up happens to be (closing the store, say): the line that says how to resume is lost,
a store thread is left waiting and the process hangs at exit, or dies of the signal (not
exit 130). Here the first Ctrl-C cancels the main task; any later one, until the process
ends, is ignored: the clean-up is short, and the person sees its outcome.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")


def run_once_interruptible(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to its end; KeyboardInterrupt once a Ctrl-C cancelled it (see the module)."""
    with asyncio.Runner() as runner:
        loop = runner.get_loop()
        task = loop.create_task(main)
        interrupted: list[bool] = []

        def on_sigint(signum: int, frame: FrameType | None) -> None:
            if not interrupted:
                interrupted.append(True)
                loop.call_soon_threadsafe(task.cancel)

        previous = signal.signal(signal.SIGINT, on_sigint)
        try:
            return loop.run_until_complete(task)
        except asyncio.CancelledError:
            if interrupted:
                raise KeyboardInterrupt from None
            raise
        finally:
            if not interrupted:
                signal.signal(signal.SIGINT, previous)
