"""Child processes with a time limit and capped output, killed with everything they started."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

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
    """How a process ended: its exit code (None when it timed out) and its capped output."""

    returncode: int | None
    output: CappedOutput


async def run_process(
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    cap: int,
    graceful: bool = False,
) -> Finished:
    """Run `args` in its own process group, stdout and stderr merged; kill the group at the end.

    The whole group is killed when the command exits or times out, so nothing it started in
    the background outlives the call. `graceful`: on a timeout the group first gets SIGTERM
    and a moment to act on it (a launcher that reaps what escaped the group needs it).
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
        raise
    pipe.close_write_end()
    returncode: int | None = None
    try:
        async with asyncio.timeout(timeout_s):
            returncode = await proc.wait()
    except TimeoutError:
        if graceful:
            _kill_group(proc.pid, signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_GRACE_S):
                    await proc.wait()
    finally:
        _kill_group(proc.pid)
        await proc.wait()
        await pipe.drained(_DRAIN_S)
        pipe.close()
    return Finished(returncode, output)


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
