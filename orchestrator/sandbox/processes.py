"""Child processes with a time limit and capped output, killed with everything they started."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_CHUNK = 65_536
# After the command ends, how long its output may take to drain once the group is killed.
_DRAIN_S = 2.0
# How long a launcher told to stop (SIGTERM) may take to kill what it started.
_GRACE_S = 2.0


class CappedOutput:
    """Keeps the first and last bytes of a stream within `limit` and counts what it drops."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._head = bytearray()
        self._tail = bytearray()
        self._tail_limit = limit // 2

    def feed(self, chunk: bytes) -> None:
        """Take one chunk of the stream."""
        self.total += len(chunk)
        room = self.limit - self._tail_limit - len(self._head)
        self._head += chunk[:room]
        self._tail += chunk[max(room, 0) :]
        if len(self._tail) > self._tail_limit:
            del self._tail[: len(self._tail) - self._tail_limit]

    @property
    def cut(self) -> int:
        """How many bytes were dropped from the middle."""
        return self.total - len(self._head) - len(self._tail)

    def text(self) -> str:
        """The kept output, with a note saying how much was cut from the middle."""
        head = self._head.decode(errors="replace")
        tail = self._tail.decode(errors="replace")
        if not self.cut:
            return head + tail
        note = f"\n[... {self.cut} of {self.total} bytes cut from the middle ...]\n"
        return head + note + tail


@dataclass(frozen=True)
class Finished:
    """How a process ended: its exit code (None when it timed out or was stopped), its capped
    output, and why the engine stopped it before its time was up (None: it was not)."""

    returncode: int | None
    output: CappedOutput
    stopped: str | None = None


async def run_process(
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    cap: int,
    graceful: bool = False,
    watch: Coroutine[Any, Any, str] | None = None,
) -> Finished:
    """Run `args` in its own process group, stdout and stderr merged; kill the group at the end.

    The whole group is killed when the command exits or times out, so nothing it started in
    the background outlives the call. `graceful`: on a timeout the group first gets SIGTERM
    and a moment to act on it (a launcher that reaps what escaped the group needs it).
    `watch` runs beside the command: when it returns first, the command is stopped as on a
    timeout, and what it returned is the Finished's `stopped`.
    """
    output = CappedOutput(cap)
    pipe = _Pipe(output)
    try:
        proc = await asyncio.create_subprocess_exec(
            *args,
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=pipe.write_fd,
            stderr=pipe.write_fd,
            start_new_session=True,
        )
    except BaseException:
        pipe.close()
        if watch is not None:
            watch.close()
        raise
    pipe.close_write_end()
    returncode: int | None = None
    stopped: str | None = None
    watcher = None if watch is None else asyncio.ensure_future(watch)
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                returncode, stopped = await _wait(proc, watcher)
        if returncode is None and graceful:
            _kill_group(proc.pid, signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_GRACE_S):
                    await proc.wait()
    finally:
        if watcher is not None and not watcher.done():
            watcher.cancel()
        elif watcher is not None and not watcher.cancelled():
            watcher.exception()  # seen: what it raised went up through _wait, or lost the race
        _kill_group(proc.pid)
        await proc.wait()
        await pipe.drained(_DRAIN_S)
        pipe.close()
    return Finished(returncode, output, stopped)


async def _wait(
    proc: asyncio.subprocess.Process, watcher: asyncio.Future[str] | None
) -> tuple[int | None, str | None]:
    """The exit code once `proc` ends, or why `watcher` says to stop it, whichever is first."""
    if watcher is None:
        return await proc.wait(), None
    ended = asyncio.ensure_future(proc.wait())
    try:
        await asyncio.wait((ended, watcher), return_when=asyncio.FIRST_COMPLETED)
    finally:
        ended.cancel()
    if ended.done() and not ended.cancelled():
        return ended.result(), None
    return None, watcher.result()


class _Pipe:
    """Our own pipe for the child's output, read with the loop's reader callbacks.

    Not PIPE: asyncio's Process.wait() also waits for its pipes to close, which a background
    child holding stdout would delay until it exits. Not connect_read_pipe with a file
    object either: uvloop closes the descriptor itself and the file object closes the same
    number again later, by then perhaps the store's (SQLite: "disk I/O error"). Here one
    owner opens and closes each end exactly once.
    """

    def __init__(self, output: CappedOutput) -> None:
        self.output = output
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self.loop = asyncio.get_running_loop()
        self.eof = self.loop.create_future()
        self.loop.add_reader(self.read_fd, self._readable)

    def _readable(self) -> None:
        try:
            chunk = os.read(self.read_fd, _CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            self.output.feed(chunk)
            return
        self.loop.remove_reader(self.read_fd)
        if not self.eof.done():
            self.eof.set_result(None)

    def close_write_end(self) -> None:
        """The child holds the write end now; ours would keep the pipe from ending."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    async def drained(self, limit_s: float) -> None:
        """Wait for end of output; a process that left the group (setsid) may hold it open."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(limit_s):
                await asyncio.shield(self.eof)

    def close(self) -> None:
        """Stop reading and close both ends (each once)."""
        self.close_write_end()
        if self.read_fd >= 0:
            self.loop.remove_reader(self.read_fd)
            os.close(self.read_fd)
            self.read_fd = -1


def _kill_group(pgid: int, signum: int = signal.SIGKILL) -> None:
    # The group may already be empty; start_new_session made the child its leader.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
