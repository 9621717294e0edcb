"""Files the engine itself writes on a job branch (never an agent): set or removed in one
commit made with git's plumbing (objects, a temporary index, a commit, the ref moved from
the head it read), so no worktree is involved and a branch that moved meanwhile is not
overwritten (GitError)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path

from orchestrator.workspace.git import GitError, commit_index, git, rev

FILE_MODE = "100644"


async def blob_at(repo: Path, commit: str, path: str) -> str | None:
    """The blob id of `path` at `commit`, or None when it is no file there."""
    code, listed = await git(repo, "ls-tree", commit, "--", path, check=False)
    fields = listed.split(maxsplit=3)
    if code != 0 or len(fields) != 4 or fields[1] != "blob" or fields[3].strip() != path:
        return None
    return fields[2]


async def text_at(repo: Path, commit: str, path: str) -> str | None:
    """The text of `path` at `commit` (undecodable bytes replaced), or None."""
    blob = await blob_at(repo, commit, path)
    if blob is None:
        return None
    _, text = await git(repo, "cat-file", "blob", blob)
    return text


async def store_blob(repo: Path, text: str, *, scratch: Path) -> str:
    """Write `text` as a blob in `repo`; its id."""
    await asyncio.to_thread(_write, scratch, text)
    try:
        _, made = await git(repo, "hash-object", "-w", "--", str(scratch))
    finally:
        os.unlink(scratch)
    return made.strip()


async def commit_blobs(
    repo: Path,
    branch: str,
    head: str,
    blobs: Mapping[str, str | None],
    *,
    message: str,
    scratch: Path,
) -> str:
    """Commit on `branch` (at `head`) each path set to its blob (None: removed); the commit."""
    ref = f"refs/heads/{branch}"
    index = scratch.with_suffix(".index")
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        await git(repo, "read-tree", head, env=env)
        for path, blob in blobs.items():
            if blob is None:
                # git wants a work tree for this, though it never reads one here
                await git(
                    repo,
                    *("update-index", "--force-remove", "--", path),
                    work_tree=scratch.parent,
                    env=env,
                )
            else:
                await git(
                    repo,
                    "update-index",
                    "--add",
                    "--cacheinfo",
                    f"{FILE_MODE},{blob},{path}",
                    env=env,
                )
        commit = await commit_index(repo, env, parent=head, message=message, ref=ref)
    finally:
        if index.exists():
            os.unlink(index)
    return commit


async def branch_head(repo: Path, branch: str) -> str:
    """The commit `branch` is at (GitError when it is missing)."""
    head = await rev(repo, f"refs/heads/{branch}")
    if head is None:
        raise GitError(f"the job branch {branch!r} is missing")
    return head


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
