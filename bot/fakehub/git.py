"""Bare git repositories behind the local GitHub stand-in: create them, read refs, files and
diffs, and make the commits, merges and branch deletions people make on GitHub."""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

_IDENTITY = {
    "GIT_AUTHOR_NAME": "fakehub",
    "GIT_AUTHOR_EMAIL": "fakehub@localhost",
    "GIT_COMMITTER_NAME": "fakehub",
    "GIT_COMMITTER_EMAIL": "fakehub@localhost",
}


class HubGitError(Exception):
    """A git command the stand-in relies on failed."""

    def __init__(self, args: tuple[str, ...], stderr: str) -> None:
        super().__init__(f"git {' '.join(args)!r} failed: {stderr.strip()}")
        self.args_run = args
        self.stderr = stderr


@dataclass(frozen=True)
class TreeEntry:
    """One `git ls-tree -l` line."""

    mode: str
    kind: str
    sha: str
    size: int
    path: str

    @property
    def name(self) -> str:
        """The last path segment."""
        return self.path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class DiffStats:
    """What GitHub reports about a pull request's changes."""

    commits: int
    additions: int
    deletions: int
    changed_files: int


def _run(
    path: Path | None, *args: str, stdin: bytes = b"", env: Mapping[str, str] | None = None
) -> str:
    argv = ("git", *(("-C", str(path)) if path else ()), *args)
    done = subprocess.run(
        argv,
        input=stdin,
        capture_output=True,
        env={**os.environ, **_IDENTITY, **(env or {})},
        check=False,
    )
    if done.returncode != 0:
        raise HubGitError(args, done.stderr.decode(errors="replace"))
    return done.stdout.decode().strip()


def create_bare(path: Path, *, source: Path | None, default_branch: str, title: str) -> None:
    """Create a bare remote at `path`: a clone of `source`, or one commit with a README."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if source is not None:
        _run(None, "clone", "--bare", "--quiet", str(source), str(path))
        _run(path, "rev-parse", "--verify", "--quiet", f"refs/heads/{default_branch}")
        _run(path, "symbolic-ref", "HEAD", f"refs/heads/{default_branch}")
        return
    _run(None, "init", "--bare", "--quiet", f"--initial-branch={default_branch}", str(path))
    blob = _run(path, "hash-object", "-w", "--stdin", stdin=f"# {title}\n".encode())
    tree = _run(path, "mktree", stdin=f"100644 blob {blob}\tREADME.md\n".encode())
    commit = _run(path, "commit-tree", tree, "-m", "Initial commit")
    _run(path, "update-ref", f"refs/heads/{default_branch}", commit)


def refuse_non_fast_forward(path: Path) -> None:
    """Make the bare remote refuse pushes that are not fast-forwards, forced or not."""
    _run(path, "config", "receive.denyNonFastForwards", "true")


async def git(path: Path, *args: str) -> tuple[int, bytes]:
    """Run git in `path`; return its exit status and stdout."""
    proc = await asyncio.create_subprocess_exec(
        "git",
        "-C",
        str(path),
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    out, _ = await proc.communicate()
    return (1 if proc.returncode is None else proc.returncode), out


async def resolve_commit(path: Path, ref: str) -> str | None:
    """The commit `ref` names (branch, tag or sha), or None."""
    if not ref or ref.startswith("-"):
        return None
    status, out = await git(path, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    return out.decode().strip() if status == 0 else None


async def branch_sha(path: Path, branch: str) -> str | None:
    """The tip of `refs/heads/<branch>`, or None when there is no such branch."""
    return await resolve_commit(path, f"refs/heads/{branch}")


def _parse_ls_tree(out: bytes, *, prefix: str) -> list[TreeEntry]:
    entries = []
    for record in out.decode().split("\0"):
        if not record:
            continue
        meta, name = record.split("\t", 1)
        mode, kind, sha, size = meta.split()
        entries.append(TreeEntry(mode, kind, sha, int(size) if size != "-" else 0, prefix + name))
    return entries


async def entry(path: Path, commit: str, file_path: str) -> TreeEntry | None:
    """The tree entry at `file_path` in `commit` (the root tree for an empty path)."""
    if not file_path:
        return TreeEntry("040000", "tree", commit, 0, "")
    status, out = await git(path, "ls-tree", "-l", "-z", "--full-tree", commit, "--", file_path)
    found = _parse_ls_tree(out, prefix="") if status == 0 else []
    return next((e for e in found if e.path == file_path), None)


async def list_tree(path: Path, commit: str, dir_path: str) -> list[TreeEntry]:
    """The entries directly inside `dir_path` at `commit`."""
    spec = f"{commit}:{dir_path}" if dir_path else commit
    status, out = await git(path, "ls-tree", "-l", "-z", spec)
    return _parse_ls_tree(out, prefix=f"{dir_path}/" if dir_path else "") if status == 0 else []


async def read_blob(path: Path, sha: str) -> bytes:
    """The bytes of blob `sha`."""
    status, out = await git(path, "cat-file", "blob", sha)
    if status != 0:
        raise HubGitError(("cat-file", "blob", sha), "missing blob")
    return out


async def diff_stats(path: Path, base: str, head: str) -> DiffStats:
    """Commits on `head` not on `base`, and the line counts of `base...head`."""
    _, count = await git(path, "rev-list", "--count", f"{base}..{head}")
    _, numstat = await git(path, "diff", "--numstat", f"{base}...{head}")
    additions = deletions = files = 0
    for line in numstat.decode().splitlines():
        added, deleted, _ = line.split("\t", 2)
        files += 1
        additions += int(added) if added.isdigit() else 0
        deletions += int(deleted) if deleted.isdigit() else 0
    return DiffStats(int(count.decode().strip() or 0), additions, deletions, files)


async def diff(
    path: Path, base: str, head: str, *, context: int = 3, from_merge_base: bool = True
) -> str:
    """`git diff base...head` (or `base head`) with `context` lines; a rename is a delete
    and an add."""
    _, out = await git(
        path,
        *("-c", "core.quotePath=false", "diff", "--no-color", "--no-ext-diff", "--no-renames"),
        f"-U{context}",
        *((f"{base}...{head}",) if from_merge_base else (base, head)),
    )
    return out.decode(errors="replace")


def person(login: str) -> dict[str, str]:
    """Author and committer variables for a commit a person makes on GitHub."""
    email = f"{login}@users.noreply.github.com"
    return {
        "GIT_AUTHOR_NAME": login,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": login,
        "GIT_COMMITTER_EMAIL": email,
    }


def commit_files(
    path: Path, branch: str, files: Mapping[str, str | None], *, message: str, login: str
) -> tuple[str, str]:
    """Commit `files` (None deletes one) on top of `branch` as `login`; `(before, after)`."""
    before = _run(path, "rev-parse", "--verify", f"refs/heads/{branch}^{{commit}}")
    with tempfile.TemporaryDirectory() as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index"), **person(login)}
        _run(path, "read-tree", before, env=env)
        entries = []
        for name, text in files.items():
            if text is None:  # mode 0 removes the entry; `--force-remove` needs a work tree
                entries.append(f"0 {'0' * 40}\t{name}\n")
                continue
            blob = _run(path, "hash-object", "-w", "--stdin", stdin=text.encode())
            entries.append(f"100644 {blob}\t{name}\n")
        _run(path, "update-index", "--index-info", stdin="".join(entries).encode(), env=env)
        tree = _run(path, "write-tree", env=env)
        after = _run(path, "commit-tree", tree, "-p", before, "-m", message, env=env)
    _run(path, "update-ref", f"refs/heads/{branch}", after, before)
    return before, after


def merge(path: Path, base: str, head: str, *, message: str, login: str) -> str:
    """Merge branch `head` into branch `base` with a merge commit by `login`; its sha.

    Raises HubGitError when they conflict (GitHub's "merge conflict" 405).
    """
    base_sha = _run(path, "rev-parse", "--verify", f"refs/heads/{base}^{{commit}}")
    head_sha = _run(path, "rev-parse", "--verify", f"refs/heads/{head}^{{commit}}")
    tree = _run(path, "merge-tree", "--write-tree", base_sha, head_sha).splitlines()[0]
    env = person(login)
    sha = _run(path, "commit-tree", tree, "-p", base_sha, "-p", head_sha, "-m", message, env=env)
    _run(path, "update-ref", f"refs/heads/{base}", sha, base_sha)
    return sha


def delete_branch(path: Path, branch: str) -> None:
    """Delete `refs/heads/<branch>`."""
    _run(path, "update-ref", "-d", f"refs/heads/{branch}")
