"""Git for the engine: branches, task worktrees and merges, through explicit subprocess calls.

Merges need no checkout: `git merge-tree --write-tree` computes the result (or the
conflicts) and `git commit-tree` + `git update-ref` record it, in milliseconds at any
repository size (docs/performance.md). A conflict is returned, never resolved silently.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import OrchestratorError


class GitError(OrchestratorError):
    """A git command failed; the message has the command and git's own words."""


async def git(
    repo: Path, *args: str, check: bool = True, env: Mapping[str, str] | None = None
) -> tuple[int, str]:
    """Run git in `repo`; return (exit code, stdout). Raises GitError when `check` and it fails.

    `env` adds to the environment (credentials travel this way, never in arguments, which
    appear in error messages).
    """
    process = await asyncio.create_subprocess_exec(
        "git",
        "-C",
        str(repo),
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=None if env is None else {**os.environ, "GIT_TERMINAL_PROMPT": "0", **env},
    )
    out, err = await process.communicate()
    code = process.returncode if process.returncode is not None else -1
    if check and code != 0:
        raise GitError(f"git {' '.join(args)} failed in {repo}: {err.decode().strip()}")
    return code, out.decode()


def slug(text: str, *, limit: int = 40) -> str:
    """A branch-safe slug of `text`."""
    words = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return words[:limit].rstrip("-") or "job"


async def rev(repo: Path, name: str) -> str | None:
    """The commit `name` points at, or None."""
    code, out = await git(
        repo, "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}", check=False
    )
    return out.strip() if code == 0 else None


async def ensure_branch(repo: Path, branch: str, start: str) -> str:
    """Create `branch` at `start` unless it exists; return its commit."""
    if (commit := await rev(repo, f"refs/heads/{branch}")) is not None:
        return commit
    await git(repo, "branch", branch, start)
    commit = await rev(repo, f"refs/heads/{branch}")
    assert commit is not None
    return commit


async def ensure_worktree(repo: Path, path: Path, branch: str, start: str) -> Path:
    """A worktree of `branch` at `path` (created from `start` when new); reused if present."""
    if _is_worktree(path):
        return path
    _make_parent(path)
    await git(repo, "worktree", "prune")
    if await rev(repo, f"refs/heads/{branch}") is None:
        await git(repo, "worktree", "add", "-b", branch, str(path), start)
    else:
        await git(repo, "worktree", "add", str(path), branch)
    return path


async def remove_worktree(repo: Path, path: Path) -> None:
    """Remove a worktree (its branch stays)."""
    if _is_worktree(path):
        await git(repo, "worktree", "remove", "--force", str(path))


def _is_worktree(path: Path) -> bool:
    return (path / ".git").exists()


def _make_parent(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)


@dataclass(frozen=True)
class Merge:
    """The outcome of merging one branch into another: a commit, or the conflicting files."""

    commit: str | None
    conflicts: tuple[str, ...] = ()
    tree: str | None = None  # on a conflict: the merged tree, with conflict markers in files


IDENTITY = ("teaparty", "teaparty@users.noreply.localhost")


async def merge(
    repo: Path, *, into: str, source: str, message: str, identity: tuple[str, str] = IDENTITY
) -> Merge:
    """Merge `source` into branch `into` without a checkout (--no-ff); conflicts come back.

    Merging what is already merged changes nothing, so a retried merge is harmless.
    """
    target = await rev(repo, f"refs/heads/{into}")
    head = await rev(repo, source)
    if target is None or head is None:
        raise GitError(f"cannot merge {source!r} into {into!r}: a branch is missing")
    code, _ = await git(repo, "merge-base", "--is-ancestor", head, target, check=False)
    if code == 0:
        return Merge(target)
    code, out = await git(
        repo,
        "merge-tree",
        "--write-tree",
        "--name-only",
        "--no-messages",
        target,
        head,
        check=False,
    )
    lines = out.splitlines()
    if code == 1:
        return Merge(None, tuple(line for line in lines[1:] if line), lines[0])
    if code != 0:
        raise GitError(f"git merge-tree failed for {source!r} into {into!r}")
    name, email = identity
    _, commit = await git(
        repo,
        "-c",
        f"user.name={name}",
        "-c",
        f"user.email={email}",
        "commit-tree",
        lines[0],
        "-p",
        target,
        "-p",
        head,
        "-m",
        message,
    )
    await git(repo, "update-ref", f"refs/heads/{into}", commit.strip(), target)
    return Merge(commit.strip())
