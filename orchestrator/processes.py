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
    proc, stream, transport = await _spawn(args, cwd=cwd, env=env)
    reader = asyncio.create_task(_collect(stream, output))
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
        await _settle(reader)
        transport.close()
    return Finished(returncode, output)


async def _spawn(
    args: Sequence[str], *, cwd: Path, env: Mapping[str, str]
) -> tuple[asyncio.subprocess.Process, asyncio.StreamReader, asyncio.ReadTransport]:
    # Our own pipe, not PIPE: asyncio's Process.wait() also waits for its pipes to close,
    # which a background child holding stdout would delay until it exits.
    read_fd, write_fd = os.pipe()
    stream = asyncio.StreamReader()
    transport, _ = await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(stream), os.fdopen(read_fd, "rb", buffering=0)
    )
    try:
        proc = await asyncio.create_subprocess_exec(
            *args,
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            start_new_session=True,
        )
    except BaseException:
        transport.close()
        raise
    finally:
        os.close(write_fd)
    return proc, stream, transport


async def _collect(stream: asyncio.StreamReader, output: CappedOutput) -> None:
    while chunk := await stream.read(_CHUNK):
        output.feed(chunk)


async def _settle(reader: asyncio.Task[None]) -> None:
    # A process that left the group (setsid) may hold the pipe open: stop waiting for it.
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_DRAIN_S):
            await asyncio.shield(reader)
    if not reader.done():
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader


def _kill_group(pgid: int, signum: int = signal.SIGKILL) -> None:
    # The group may already be empty; start_new_session made the child its leader.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
