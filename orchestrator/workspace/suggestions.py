"""A reviewer's suggestion applied as written: one line of one file replaced on the job branch.

GitHub's ```` ```suggestion ```` block proposes the text that replaces the commented line.
The engine applies it with git's plumbing alone (the blob at the branch's head, a temporary
index, a commit on the branch), so nothing from the review touches the filesystem: the path
must name a regular file in the branch's tree, and the line must still read as the reviewer
saw it (the last line of the comment's diff hunk), else nothing changes and the lead is told
why. The job worktree is then brought to the branch.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

from orchestrator.workspace.git import GitError, commit_index, git, git_bytes, rev

_BLOCK = re.compile(r"```suggestion[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
_REGULAR = ("100644", "100755")


def suggestion(body: str) -> str | None:
    """The text of the first suggestion block in a review comment, if it has one."""
    found = _BLOCK.search(body)
    return None if found is None else found.group(1)


def seen_line(hunk: str) -> str | None:
    """The line a single-line comment is on, as its diff hunk shows it (None: a comment on
    a removed line, which a suggestion cannot replace)."""
    lines = hunk.splitlines()
    if not lines or lines[-1].startswith(("-", "@@")):
        return None
    return lines[-1][1:]


async def apply(
    repo: Path,
    branch: str,
    *,
    path: str,
    line: int,
    seen: str,
    replacement: str,
    message: str,
    scratch: Path,
) -> str:
    """Replace line `line` (1-based) of `path` on `branch` with `replacement`, if it still
    reads `seen`; the new commit. GitError says why not."""
    ref = f"refs/heads/{branch}"
    head = await rev(repo, ref)
    if head is None:
        raise GitError(f"the job branch {branch!r} is missing")
    code, listed = await git(repo, "ls-tree", head, "--", path, check=False)
    fields = listed.split(maxsplit=3)
    if code != 0 or len(fields) != 4 or fields[3].strip() != path or fields[0] not in _REGULAR:
        raise GitError(f"{path!r} is not a file on the job branch")
    mode, blob = fields[0], fields[2]
    _, raw = await git_bytes(repo, "cat-file", "blob", blob)
    try:
        lines = raw.decode().splitlines(keepends=True)
    except UnicodeDecodeError:
        raise GitError(f"{path} is not text") from None
    if not 1 <= line <= len(lines) or lines[line - 1].rstrip("\r\n") != seen:
        raise GitError(f"line {line} of {path} has changed since the suggestion was made")
    ending = "\n" if lines[line - 1].endswith("\n") else ""
    new = replacement if not replacement or replacement.endswith("\n") else replacement + ending
    lines[line - 1] = new
    await asyncio.to_thread(_write, scratch, "".join(lines))
    index = scratch.with_suffix(".index")
    try:
        _, made = await git(repo, "hash-object", "-w", "--", str(scratch))
        env = {"GIT_INDEX_FILE": str(index)}
        await git(repo, "read-tree", head, env=env)
        await git(repo, "update-index", "--cacheinfo", f"{mode},{made.strip()},{path}", env=env)
        commit = await commit_index(repo, env, parent=head, message=message, ref=ref)
    finally:
        for leftover in (scratch, index):
            if leftover.exists():
                os.unlink(leftover)
    return commit


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
