"""The agent's tools on its git worktree: read, list, search, write, edit and shell, confined.

The file tools run in the engine, so everything the agent's own processes could have
left in the worktree is hostile input to them: paths are resolved strictly inside the
worktree, `.git` is off limits, and a file with more than one hard link is refused (it
could be a link to a file outside, such as the store). Only regular files are opened, and
never in a way that can block: a FIFO would hold the opening thread until someone writes to
it, a device could do anything. A symlink swapped in between the check and the open could
still escape; no agent process runs then (the sandbox kills everything a shell call started
before the call returns). The blocking file tools run on a pool of their own, each call
bounded in time, so nothing they meet can hold the threads the rest of the engine uses.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from orchestrator.core.errors import LimitError, ToolError
from orchestrator.core.messages import ToolCall, ToolResult
from orchestrator.core.tools import ToolInput, ToolSpec, no_nul, parser, spec
from orchestrator.sandbox.confine import NO_NETWORK, Network, Place, Prepared, Sandbox
from orchestrator.workspace.git import Checkout
from orchestrator.workspace.shell import (
    SHELL_SPEC,
    Caller,
    EgressWatch,
    ShellInput,
    WorktreeShell,
)

_MAX_READ_BYTES = 20_000_000
_SNIFF = 8192
FILE_TOOL_TIMEOUT_S = 60.0  # one read, list or write: far more than a 20 MB file takes
# The file tools' own threads: however many calls are stuck, the default pool (store, git,
# the server's other work) keeps its threads.
_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="teaparty-file-tools")
_OPEN_FLAGS = os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
_WRITES = frozenset(("write_file", "edit_file", "shell"))  # what can fill a writable worktree


Path_ = Annotated[str, no_nul, Field(description="relative to the worktree root, e.g. src/app.py")]


class ReadFile(ToolInput):
    path: Path_
    offset: int | None = Field(None, ge=1, description="first line, from 1")
    limit: int | None = Field(None, ge=1, description="lines (default 2000)")


class ListFiles(ToolInput):
    path: Annotated[str, no_nul] | None = Field(
        None, description="directory to list (default: the root)"
    )
    recursive: bool | None = Field(None, description="include subdirectories")


class Search(ToolInput):
    pattern: Annotated[str, no_nul] = Field(description="extended regex, e.g. def \\w+\\(")
    path: Annotated[str, no_nul] | None = Field(
        None, description="file or directory to search (default: all)"
    )
    glob: Annotated[str, no_nul] | None = Field(None, description="only files matching, e.g. *.py")


class WriteFile(ToolInput):
    path: Path_
    content: str = Field(description="the whole new file")


class EditFile(ToolInput):
    path: Path_
    old: str = Field(description="exact current text, whitespace included")
    new: str = Field(description="replacement text")
    replace_all: bool | None = Field(None, description="replace every occurrence")


INPUTS: Mapping[str, type[ToolInput]] = {
    "read_file": ReadFile,
    "list_files": ListFiles,
    "search": Search,
    "write_file": WriteFile,
    "edit_file": EditFile,
    "shell": ShellInput,
}
DESCRIPTIONS = {
    "read_file": "Read a UTF-8 text file of the worktree, one numbered line per line. Long "
    "files come back in parts: the result says how to read on with offset.",
    "list_files": "List a directory of the worktree (paths relative to the root; directories "
    "end in /, symlinks in @). The .git directory is never listed.",
    "search": "Search text files of the worktree for an extended regular expression; returns "
    "path:line:text for each matching line. Ignored files (.gitignore) are skipped.",
    "write_file": "Create or overwrite a file of the worktree with `content`, creating missing "
    "parent directories. Prefer edit_file for changing part of a file.",
    "edit_file": "Replace an exact piece of a file's text. `old` must appear exactly once (add "
    "surrounding lines to make it unique) unless replace_all is true.",
}
SPECS: Mapping[str, ToolSpec] = {
    name: spec(name, DESCRIPTIONS[name], model)
    for name, model in INPUTS.items()
    if name in DESCRIPTIONS
} | {SHELL_SPEC.name: SHELL_SPEC}
PARSERS = {name: parser(model) for name, model in INPUTS.items()}


class WorktreeTools:
    """A ToolRunner for one agent's worktree; every path stays inside `root`."""

    def __init__(
        self,
        root: Path,
        *,
        parent_env: Mapping[str, str],
        sandbox: Sandbox,
        writable: bool = True,
        readable: tuple[Path, ...] = (),
        checkout: Checkout | None = None,
        network: Network = NO_NETWORK,
        run_as: tuple[int, int] | None = None,
        prepared: Prepared | None = None,
        egress: EgressWatch | None = None,
        shell_timeout_s: float = 300,
        output_cap: int = 30_000,
    ) -> None:
        self.root = root.resolve(strict=True)
        self.writable = writable
        self.owner = run_as if writable else None  # whose files the file tools write
        self.disk = sandbox.disk
        self.shell = WorktreeShell(
            Place(
                self.root, writable=writable, readable=readable, run_as=run_as, prepared=prepared
            ),
            sandbox=sandbox,
            parent_env=parent_env,
            timeout_s=shell_timeout_s,
            cap=output_cap,
            checkout=checkout,
            network=network,
            egress=egress,
        )
        self._cap = output_cap
        self._tools: Mapping[str, Callable[[dict[str, Any]], Awaitable[str]]] = {
            "read_file": _in_thread(self._read_file),
            "list_files": _in_thread(self._list_files),
            "search": self._search,
            "write_file": _in_thread(self._write_file),
            "edit_file": _in_thread(self._edit_file),
        }

    async def run(self, agent: str, conversation_id: str, call: ToolCall) -> ToolResult:
        """Run one call; refusals and failures the model can fix come back as error results.

        A call that leaves a writable worktree at its disk bound (or was stopped reaching it)
        ends the agent's turn: its result says so and `stop` names the bound.
        """
        result = await self._run(call, (agent, conversation_id))
        if result.stop is not None or not self.writable or call.name not in _WRITES:
            return result
        try:
            await self.disk.room([self.root])
        except LimitError as exc:
            return _stopped(call.call_id, result.output, exc)
        return result

    async def _run(self, call: ToolCall, caller: Caller) -> ToolResult:
        spec = SPECS.get(call.name)
        if spec is None:
            return ToolResult(call.call_id, f"unknown tool {call.name!r}", is_error=True)
        try:
            args = PARSERS[call.name](call.name, dict(call.args))
            if call.name == SHELL_SPEC.name:  # the one tool that says who called it
                output = await self._shell(args, caller)
            else:
                output = await self._tools[call.name](args)
        except LimitError as exc:
            return _stopped(call.call_id, exc.output, exc)
        except ToolError as exc:
            return ToolResult(call.call_id, str(exc), is_error=True)
        except OSError as exc:  # permission denied, is a directory, ...: the model can adapt
            return ToolResult(call.call_id, f"{call.name}: {exc}", is_error=True)
        return ToolResult(call.call_id, output)

    def resolve(self, raw: str, *, write: bool = False) -> Path:
        """The real path of `raw` inside the worktree, or ToolError if it would leave it."""
        if not raw or Path(raw).is_absolute():
            raise ToolError(f"{raw!r}: use a path relative to the worktree root")
        joined = self.root / raw
        existing, missing = joined, list[str]()
        while write and not os.path.lexists(existing):
            existing, missing = existing.parent, [existing.name, *missing]
        if ".." in missing:
            raise ToolError(f"{raw!r}: '..' through a directory that does not exist")
        try:
            resolved = existing.resolve(strict=True).joinpath(*missing)
        except FileNotFoundError as exc:
            raise ToolError(f"{raw!r}: no such file or directory") from exc
        except (OSError, RuntimeError) as exc:
            raise ToolError(f"{raw!r}: cannot be resolved (symlink loop?)") from exc
        if not resolved.is_relative_to(self.root):
            raise ToolError(f"{raw!r} leads outside the worktree")
        if any(part.casefold() == ".git" for part in resolved.relative_to(self.root).parts):
            raise ToolError(f"{raw!r}: .git is off limits; use git through the shell tool")
        if os.path.lexists(resolved) and os.lstat(resolved).st_nlink > 1 and resolved.is_file():
            raise ToolError(f"{raw!r} has more than one hard link; the file tools refuse it")
        if write and not self.writable:
            raise ToolError(f"{raw!r}: this worktree is read-only for you")
        return resolved

    def _relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def _text(self, path: Path) -> str:
        if path.is_dir():
            raise ToolError(f"{self._relative(path)!r} is a directory; use list_files")
        self._regular(path)
        fd = os.open(path, os.O_RDONLY | _OPEN_FLAGS)
        try:
            self._regular(path, os.fstat(fd))
            if os.fstat(fd).st_size > _MAX_READ_BYTES:
                raise ToolError(f"{self._relative(path)!r} is too large; use the shell tool")
            with os.fdopen(fd, "rb", closefd=False) as opened:
                data = opened.read(_MAX_READ_BYTES + 1)
        finally:
            os.close(fd)
        try:
            if b"\0" in data[:_SNIFF]:
                raise UnicodeError
            return data.decode()
        except UnicodeError:
            raise ToolError(f"{self._relative(path)!r} is a binary file, not UTF-8 text") from None

    def _read_file(self, args: dict[str, Any]) -> str:
        path = self.resolve(args["path"])
        lines = self._text(path).splitlines()
        first = args.get("offset", 1)
        if not lines:
            return "(empty file)"
        if first > len(lines):
            raise ToolError(f"read_file: offset {first} is past the end ({len(lines)} lines)")
        shown = lines[first - 1 : first - 1 + args.get("limit", 2000)]
        rows = [self._clip(f"{number:6}\t{line}") for number, line in enumerate(shown, first)]
        kept = _fit(rows, self._cap)
        last = first + kept - 1
        if last == len(lines):
            return "\n".join(rows[:kept])
        note = f"[lines {first}-{last} of {len(lines)}; read on with offset={last + 1}]"
        return "\n".join([*rows[:kept], note])

    def _clip(self, row: str) -> str:
        if len(row) <= self._cap:
            return row
        return f"{row[: self._cap]}[... line cut, {len(row) - self._cap} more characters]"

    def _list_files(self, args: dict[str, Any]) -> str:
        top = self.resolve(args.get("path", "."))
        if not top.is_dir():
            raise ToolError(f"list_files: {self._relative(top)!r} is not a directory")
        entries: list[str] = []
        for folder, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d.casefold() != ".git")
            for name in sorted([*dirs, *files]):
                path = Path(folder, name)
                mark = "@" if path.is_symlink() else "/" if path.is_dir() else ""
                entries.append(self._relative(path) + mark)
            if not args.get("recursive", False):
                break
        return self._join_capped(entries, "entries; list a subdirectory") or "(empty directory)"

    def _join_capped(self, rows: list[str], hint: str) -> str:
        kept = _fit(rows, self._cap)
        if kept == len(rows):
            return "\n".join(rows)
        return "\n".join([*rows[:kept], f"[output capped: {len(rows) - kept} more {hint}]"])

    def _write_file(self, args: dict[str, Any]) -> str:
        path = self.resolve(args["path"], write=True)
        if path.is_dir():
            raise ToolError(f"{self._relative(path)!r} is a directory")
        if os.path.lexists(path):
            self._regular(path)
        created = self._make_parents(path)
        data = args["content"].encode()
        self._write(path, data)
        self._hand_over([*created, path])
        return f"wrote {len(data)} bytes to {self._relative(path)}"

    def _regular(self, path: Path, status: os.stat_result | None = None) -> None:
        """ToolError unless `path` (or what `status` describes) is a regular file."""
        mode = (status or os.lstat(path)).st_mode
        if not stat.S_ISREG(mode):
            what = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
            raise ToolError(
                f"{self._relative(path)!r} is {what}; the file tools read and write regular "
                "files only"
            )

    def _write(self, path: Path, data: bytes) -> None:
        """Replace the regular file's content (made when missing), never blocking on a FIFO
        or writing to a device swapped in since it was checked."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | _OPEN_FLAGS, 0o644)
        try:
            self._regular(path, os.fstat(fd))
            os.ftruncate(fd, 0)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)

    def _make_parents(self, path: Path) -> list[Path]:
        missing = [p for p in path.parents if p.is_relative_to(self.root) and not p.exists()]
        path.parent.mkdir(parents=True, exist_ok=True)
        return missing

    def _hand_over(self, paths: list[Path]) -> None:
        """Files the engine wrote belong to the agents' user, as if their shell had."""
        if self.owner is not None:
            for path in paths:
                os.lchown(path, *self.owner)

    def _edit_file(self, args: dict[str, Any]) -> str:
        path = self.resolve(args["path"], write=True)
        old, new, text = args["old"], args["new"], self._text(path)
        where = self._relative(path)
        if not old:
            raise ToolError("edit_file: 'old' must not be empty; use write_file for new files")
        count = text.count(old)
        if count == 0:
            raise ToolError(f"edit_file: 'old' not found in {where}; read the file and copy it")
        if count > 1 and not args.get("replace_all", False):
            raise ToolError(
                f"edit_file: 'old' appears {count} times in {where}; include more surrounding "
                "lines to make it unique, or set replace_all"
            )
        self._write(path, text.replace(old, new).encode())
        return f"replaced {count} occurrence{'s' if count > 1 else ''} in {where}"

    async def _search(self, args: dict[str, Any]) -> str:
        top = self.resolve(args.get("path", "."))
        if not top.is_dir():
            self._regular(top)
        return await self.shell.grep(args["pattern"], top=top, glob=args.get("glob"))

    async def _shell(self, args: dict[str, Any], caller: Caller) -> str:
        timeout_s = args.get("timeout_s")
        return await self.shell.command(args["command"], timeout_s=timeout_s, caller=caller)


def _stopped(call_id: str, output: str, exc: LimitError) -> ToolResult:
    """The result of a call that ran into a limit: what it printed, the note, and the stop."""
    text = "\n".join(part for part in (output, f"[sandbox: {exc}]") if part)
    return ToolResult(call_id, text, is_error=True, stop=str(exc))


def _in_thread(tool: Callable[[dict[str, Any]], str]) -> Callable[[dict[str, Any]], Awaitable[str]]:
    """Run a blocking file tool off the event loop, on the file tools' own threads, for at most
    FILE_TOOL_TIMEOUT_S (the thread cannot be stopped: what keeps it from blocking is that the
    tools only open regular files, without waiting)."""

    async def bounded(args: dict[str, Any]) -> str:
        call = asyncio.get_running_loop().run_in_executor(_POOL, tool, args)
        try:
            async with asyncio.timeout(FILE_TOOL_TIMEOUT_S):
                return await call
        except TimeoutError:
            raise ToolError(f"took over {FILE_TOOL_TIMEOUT_S:g} s and was given up") from None

    return bounded


_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFLNK: "a symlink",
    stat.S_IFDIR: "a directory",
}


def _fit(rows: list[str], cap: int) -> int:
    """How many leading rows fit in `cap` characters; always at least one."""
    size = 0
    for kept, row in enumerate(rows):
        size += len(row) + 1
        if size > cap + 1 and kept:
            return kept
    return len(rows)
