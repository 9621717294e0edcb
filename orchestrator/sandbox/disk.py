"""The disk a task may fill: what a worktree holds, and the bound TEAPARTY_SANDBOX_DISK_MB sets.

RLIMIT_FSIZE bounds one file, not the sum, so the bound on a writable worktree is kept by
the engine: before a call (nothing starts in a worktree already over it), while a shell call
runs (its worktree and private temporary directory are measured again and again, and the
call is killed once they reach the bound; meanwhile no single file may grow past what was
left when it started), and after every call that can write. The count is each inode once, the
larger of its length and the blocks it holds (a sparse file counts its length: the engine's
git reads all of it) and never less than INODE_BYTES (an empty file holds no block but takes
an inode: free, millions of them would exhaust the host's inodes under a bound never
reached), symlinks not followed, the repository's checkout included.
"""

from __future__ import annotations

import asyncio
import os
import stat
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from orchestrator.core.errors import LimitError

MB = 1024 * 1024
INODE_BYTES = 4096  # one block of most file systems: the least a file or folder counts
WATCH_INTERVAL_S = 0.2
# A walk may take a while on a large tree: the watcher spends at most 1/_WATCH_SHARE of its
# time walking (a call can write past the bound by what it writes between two walks).
_WATCH_SHARE = 20
# Walks run on threads of their own: a tree made to be slow to walk holds none of the
# threads the rest of the engine uses.
_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="teaparty-disk")


@dataclass(frozen=True)
class DiskBound:
    """The most a writable worktree, with one call's temporary files, may take on disk."""

    limit_mb: int

    @property
    def limit(self) -> int:
        """The bound in bytes."""
        return self.limit_mb * MB

    def note(self, used: int) -> str:
        """What the agent, its lead and the task's record read when the bound is passed."""
        return (
            f"disk: the task's files reached {used / MB:.1f} MB of the {self.limit_mb} MB "
            "the operator allows (TEAPARTY_SANDBOX_DISK_MB); the task stops here"
        )

    async def room(self, roots: Sequence[Path]) -> int:
        """Bytes left under the bound; LimitError when none are."""
        used = await measure(roots)
        if used >= self.limit:
            raise LimitError(self.note(used))
        return self.limit - used

    async def watch(self, roots: Sequence[Path], *, interval_s: float = WATCH_INTERVAL_S) -> str:
        """Measure `roots` again and again; return the note once they reach the bound (a
        running call is stopped with it). Runs until then, or until cancelled."""
        spent = 0.0  # the call was measured just before it started
        while True:
            await asyncio.sleep(max(interval_s, spent * _WATCH_SHARE))
            started = time.monotonic()
            used = await measure(roots)
            if used >= self.limit:
                return self.note(used)
            spent = time.monotonic() - started


async def measure(roots: Sequence[Path]) -> int:
    """`usage` off the event loop."""
    return await asyncio.get_running_loop().run_in_executor(_POOL, usage, roots)


def usage(roots: Sequence[Path]) -> int:
    """Bytes the files under `roots` take (see the module's docstring for how they count);
    LimitError when they cannot be measured (a tree nested past PATH_MAX, say): that stops
    the task as the bound does, where an OSError would fail its job."""
    try:
        return _usage(roots)
    except OSError as exc:
        where = os.fsdecode(exc.filename or "")
        where = where if len(where) <= 200 else f"...{where[-200:]}"
        note = f"disk: the task's files cannot be measured ({exc.strerror}: {where!r})"
        raise LimitError(note) from exc


def _usage(roots: Sequence[Path]) -> int:
    seen: set[tuple[int, int]] = set()
    total = 0
    folders = [os.fspath(root) for root in roots]
    while folders:
        folder = folders.pop()
        for entry in _entries(folder):
            try:
                status = _status(entry, folder)
            except FileNotFoundError:  # removed while we looked
                continue
            if stat.S_ISDIR(status.st_mode):
                folders.append(entry.path)
            elif status.st_nlink > 1:
                if (status.st_dev, status.st_ino) in seen:
                    continue
                seen.add((status.st_dev, status.st_ino))
            total += max(status.st_size, status.st_blocks * 512, INODE_BYTES)
    return total


def _entries(folder: str) -> Iterator[os.DirEntry[str]]:
    """The entries of `folder`, one at a time; one the engine cannot list is opened up first."""
    try:
        listing = os.scandir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return
    except PermissionError:
        _open_up(folder)
        listing = os.scandir(folder)
    with listing:
        yield from listing


def _status(entry: os.DirEntry[str], folder: str) -> os.stat_result:
    """`entry`'s own status; a folder the engine may list but not search (`chmod u-x`) is
    opened up first, as one it cannot list is."""
    try:
        return entry.stat(follow_symlinks=False)
    except PermissionError:
        _open_up(folder)
        return os.lstat(entry.path)


def _open_up(folder: str) -> None:
    """Give a folder's owner every right on it, when that owner is the engine (a non-root
    engine's agents run as its uid and may `chmod 000` a directory); else LimitError. A
    folder an agent swapped for a symlink while it was measured is not followed."""
    status = os.lstat(folder)
    if status.st_uid != os.geteuid() or not stat.S_ISDIR(status.st_mode):
        raise LimitError(f"disk: {folder!r} cannot be measured")
    try:
        os.chmod(folder, stat.S_IMODE(status.st_mode) | stat.S_IRWXU, follow_symlinks=False)
    except NotImplementedError:  # it is a symlink now
        raise LimitError(f"disk: {folder!r} cannot be measured") from None
