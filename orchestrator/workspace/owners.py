"""Handing a worktree's files to the user its agents run as, after the engine's git wrote there.

The whole tree when nothing is known of it (a new slot, an engine started afresh, a merge the
engine made there); else only what the engine's git wrote, which git names: the tracked paths
that differed from the commit before a switch (`git status`, which a forced checkout restores)
and those that differ between the two commits (`git diff-tree`). Files an agent made are its
user's already; what `git clean` removes needs no owner.

Either way `lchown`, never through a symlink. A path git names can lead through a directory an
agent replaced with a symlink to anywhere (`a -> /etc` in its worktree, `a/passwd` among the
paths), so each path is reached one directory at a time, each opened O_NOFOLLOW, and nothing
past a component that is not a real directory is touched.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from orchestrator.workspace.git import Checkout, git_bytes

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def chown_tree(root: Path, owner: tuple[int, int]) -> None:
    """lchown everything under `root` that is not yet `owner`'s; never follows a symlink."""
    uid, gid = owner
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files, ""]:
            path = os.path.join(folder, name) if name else folder
            status = os.lstat(path)
            if (status.st_uid, status.st_gid) != owner:
                os.lchown(path, uid, gid)


def chown_paths(root: Path, paths: Iterable[str], owner: tuple[int, int]) -> None:
    """lchown each of `paths` (relative to `root`, `/`-separated, as git names them) and every
    directory on the way to it that is not yet `owner`'s; a path that is gone, or leads
    through anything but a real directory, is left where it stops."""
    seen: set[str] = set()
    top = os.open(root, _DIR_FLAGS)
    try:
        for path in paths:
            parts = path.split("/")
            if not any(part in ("", ".", "..") for part in parts):
                _chown_path(top, parts, owner, seen)
    finally:
        os.close(top)


def _chown_path(top: int, parts: list[str], owner: tuple[int, int], seen: set[str]) -> None:
    folder = top
    try:
        for depth, part in enumerate(parts):
            name = "/".join(parts[: depth + 1])
            if name not in seen:
                seen.add(name)
                _chown_at(folder, part, owner)
            if depth == len(parts) - 1:
                return
            try:
                inner = os.open(part, _DIR_FLAGS, dir_fd=folder)
            except OSError:  # a symlink, a file, or gone: nothing below it is the engine's
                return
            if folder != top:
                os.close(folder)
            folder = inner
    finally:
        if folder != top:
            os.close(folder)


def _chown_at(folder: int, name: str, owner: tuple[int, int]) -> None:
    try:
        status = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return
    if (status.st_uid, status.st_gid) != owner:
        os.chown(name, *owner, dir_fd=folder, follow_symlinks=False)


async def differing(checkout: Checkout) -> list[str]:
    """The tracked paths whose file or index entry differs from the checkout's commit (what a
    forced checkout or `reset --hard` writes again); untracked files are not listed."""
    _, out = await git_bytes(
        checkout.admin,
        *("status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=no"),
        "--ignore-submodules=all",
        work_tree=checkout.path,
    )
    return [os.fsdecode(entry[3:]) for entry in out.split(b"\0") if entry]


async def between(checkout: Checkout, old: str, new: str) -> list[str]:
    """The files that differ between commits `old` and `new` (what a switch writes)."""
    _, out = await git_bytes(
        checkout.admin, "diff-tree", "-r", "-z", "--name-only", "--no-renames", old, new
    )
    return [os.fsdecode(name) for name in out.split(b"\0") if name]
