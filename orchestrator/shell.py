"""The agent's shell and search in its worktree: an allowlisted env, a process group, a cap."""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import os
import re
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import ToolError
from orchestrator.tools import ToolSpec

_KEPT = (
    "PATH",
    "LANG",
    "LC_ALL",
    "TERM",
    "TZ",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
)
# PASS covers PASSWORD; AUTH(?!OR) so that GIT_AUTHOR_NAME is not taken for a secret.
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASS|CREDENTIAL|AUTH(?!OR)|PRIVATE", re.IGNORECASE)
_CHUNK = 65_536
# After the command ends, how long its output may take to drain once the group is killed.
_DRAIN_S = 2.0
_GIT_GREP = (
    *("git", "-c", "core.fsmonitor=false", "-c", "core.quotePath=false", "grep"),
    *("-n", "-I", "-E", "--untracked", "--no-color"),
)

SHELL_SPEC = ToolSpec(
    "shell",
    "Run a bash command in the worktree root with no input and no secrets in its environment. "
    "Returns combined stdout and stderr (long output keeps its head and tail) and the exit "
    "code. The command and everything it started are killed when it ends or times out, so "
    "background servers do not survive the call.",
    {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "bash command line"},
            "timeout_s": {"type": "number", "exclusiveMinimum": 0, "description": "seconds"},
        },
        "required": ["command"],
        "additionalProperties": False,
    },
)


class WorktreeShell:
    """Runs the agent's commands, and git grep, in its worktree with the agent's environment."""

    def __init__(
        self, root: Path, *, parent_env: Mapping[str, str], home: Path, timeout_s: float, cap: int
    ) -> None:
        self.root = root
        self.home = home
        self.env = agent_env(parent_env, home=home)
        self.timeout_s = timeout_s
        self.cap = cap

    async def command(self, command: str, *, timeout_s: float | None = None) -> str:
        """Run a bash command line; the result ends with its exit code."""
        limit = min(timeout_s or self.timeout_s, self.timeout_s)
        done = await self._run(["/bin/bash", "-c", command], limit)
        text = done.output.text().rstrip("\n")
        if done.returncode is None:
            raise ToolError(
                f"shell: timed out after {limit} s; the command and its children were killed. "
                f"Output so far:\n{text}"
            )
        return f"{text}\n[exit code {done.returncode}]".lstrip("\n")

    async def grep(self, pattern: str, *, top: Path, glob: str | None) -> str:
        """Search text files under `top` for an extended regex; git grep skips ignored files."""
        where = top.relative_to(self.root).as_posix()
        if glob and where != ".":
            glob = f"{where}/{glob}"
        if not (self.root / ".git").exists():
            return await asyncio.to_thread(self._walk_grep, pattern, top=top, glob=glob)
        spec = glob or where
        done = await self._run([*_GIT_GREP, "-e", pattern, "--", spec], self.timeout_s)
        if done.returncode == 1:
            return "no matches"
        if done.returncode is None:
            raise ToolError(f"search: timed out after {self.timeout_s} s; narrow the path")
        if done.returncode != 0:
            raise ToolError(f"search: {done.output.text().strip()}")
        return done.output.text()

    def _walk_grep(self, pattern: str, *, top: Path, glob: str | None) -> str:
        # Python's re stands in for POSIX ERE here; the two agree on everyday patterns.
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ToolError(f"search: bad pattern {pattern!r}: {exc}") from exc
        output = CappedOutput(self.cap)
        for path in _files(top):
            name = path.relative_to(self.root).as_posix()
            data = path.read_bytes()
            if (glob and path != top and not fnmatch.fnmatchcase(name, glob)) or b"\0" in data:
                continue
            for number, line in enumerate(data.decode(errors="replace").splitlines(), 1):
                if regex.search(line):
                    output.feed(f"{name}:{number}:{line}\n".encode())
        return output.text() or "no matches"

    async def _run(self, args: list[str], timeout_s: float) -> Finished:
        self.home.mkdir(mode=0o700, exist_ok=True)
        return await run_process(
            args, cwd=self.root, env=self.env, timeout_s=timeout_s, cap=self.cap
        )


def agent_env(parent_env: Mapping[str, str], *, home: Path) -> dict[str, str]:
    """The environment of the agent's processes: an allowlist, minus anything holding a secret."""
    secrets = [value for name, value in parent_env.items() if SECRET_NAME.search(name) and value]
    env = {
        name: parent_env[name]
        for name in _KEPT
        if name in parent_env and not any(secret in parent_env[name] for secret in secrets)
    }
    env |= {"HOME": str(home), "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}
    return env


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
    args: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout_s: float, cap: int
) -> Finished:
    """Run `args` in its own process group, stdout and stderr merged; kill the group at the end.

    The whole group is killed when the command exits or times out, so nothing it started in
    the background outlives the call.
    """
    output = CappedOutput(cap)
    proc, stream, transport = await _spawn(args, cwd=cwd, env=env)
    reader = asyncio.create_task(_collect(stream, output))
    returncode: int | None = None
    try:
        async with asyncio.timeout(timeout_s):
            returncode = await proc.wait()
    except TimeoutError:
        pass
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


def _files(top: Path) -> list[Path]:
    """Regular files at or under `top`, never inside .git nor through a symlink."""
    if not top.is_dir():
        return [top]
    found = []
    for folder, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d.casefold() != ".git")
        found += [Path(folder, name) for name in sorted(files)]
    return [path for path in found if path.is_file() and not path.is_symlink()]


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


def _kill_group(pgid: int) -> None:
    # The group may already be empty; start_new_session made the child its leader.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
