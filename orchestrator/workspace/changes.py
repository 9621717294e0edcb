"""What a job branch changes against its base, read from commits by the engine's git.

Only the job's repository is read (commits and trees, never a worktree), through the
hardened `git`: file names come NUL-separated and undecoded, since an agent chose them
(any bytes, newlines included), and are decoded so that no byte is lost or can pass for
another (`backslashreplace`). The diff is hashed as git wrote it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from orchestrator.workspace.git import git_bytes, reset_config

# The same diff for the same commits, whatever any configuration says.
DIFF = (
    *("diff", "--no-color", "--no-ext-diff", "--no-textconv", "--find-renames"),
    *("--ignore-submodules=none", "--no-relative", "--src-prefix=a/", "--dst-prefix=b/"),
)
EXCERPT_FILES = 40  # protected files whose diff a gate shows at most


@dataclass(frozen=True)
class ChangedFile:
    """One file the branch changes: git's status letter (A, M, D, T, R, C), its path, the
    path it came from (a rename or copy), and lines added and deleted (None: binary)."""

    status: str
    path: str
    old_path: str | None = None
    added: int | None = None
    deleted: int | None = None

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path it touches: a rename's old and new path."""
        return (self.path,) if self.old_path is None else (self.old_path, self.path)

    @property
    def label(self) -> str:
        """How it is named to a person: `old -> new` for a rename or copy."""
        return self.path if self.old_path is None else f"{self.old_path} -> {self.path}"


@dataclass(frozen=True)
class BranchChange:
    """The commits a branch goes from and to, the files it changes, and its diff's hash."""

    base: str
    head: str
    files: tuple[ChangedFile, ...]
    diff_sha256: str

    def stat(self) -> str:
        """Git's short stat: `3 files changed, 20 insertions(+), 1 deletion(-)`."""
        added = sum(f.added or 0 for f in self.files)
        deleted = sum(f.deleted or 0 for f in self.files)
        parts = [_count(len(self.files), "file", "files") + " changed"]
        if added:
            parts.append(_count(added, "insertion", "insertions") + "(+)")
        if deleted:
            parts.append(_count(deleted, "deletion", "deletions") + "(-)")
        return ", ".join(parts)


async def branch_change(repo: Path, *, base: str, head: str) -> BranchChange:
    """What `head` changes against `base` in the repository `repo` (a bare one)."""
    reset_config(repo)
    _, names = await git_bytes(repo, *DIFF, "--name-status", "-z", base, head)
    _, counts = await git_bytes(repo, *DIFF, "--numstat", "-z", base, head)
    _, whole = await git_bytes(repo, *DIFF, "--binary", "--full-index", base, head)
    files = tuple(  # one diff, two views of it: the same files in the same order
        ChangedFile(f.status, f.path, f.old_path, added, deleted)
        for f, (added, deleted) in zip(_name_status(names), _numstat(counts), strict=True)
    )
    return BranchChange(base, head, files, hashlib.sha256(whole).hexdigest())


async def diff_excerpt(
    repo: Path, change: BranchChange, paths: list[str], *, limit: int
) -> tuple[str, bool]:
    """The diff of `paths` alone (as literal paths, never pathspec magic), cut at `limit`
    characters; and whether it was cut."""
    shown = paths[:EXCERPT_FILES]
    _, out = await git_bytes(
        repo,
        *DIFF,
        change.base,
        change.head,
        "--",
        *shown,
        env={"GIT_LITERAL_PATHSPECS": "1"},
    )
    text = out.decode(errors="replace")
    if len(text) <= limit and len(shown) == len(paths):
        return text, False
    return text[:limit], True


async def added_lines(repo: Path, change: BranchChange) -> bytes:
    """The diff of `change` with no context, for a scan of what it adds: `--text`, so a
    file git or an attribute the branch sets would call binary is read all the same."""
    _, out = await git_bytes(repo, *DIFF, "--unified=0", "--text", change.base, change.head)
    return out


def _decode(raw: bytes) -> str:
    return raw.decode(errors="backslashreplace")


def _name_status(raw: bytes) -> list[ChangedFile]:
    """`--name-status -z`: `status NUL path NUL`, or for R and C `status NUL old NUL new NUL`."""
    fields = raw.split(b"\0")
    files: list[ChangedFile] = []
    index = 0
    while index < len(fields) - 1:
        status = _decode(fields[index])[:1]
        if status in ("R", "C"):
            old, new = _decode(fields[index + 1]), _decode(fields[index + 2])
            files.append(ChangedFile(status, new, old))
            index += 3
        else:
            files.append(ChangedFile(status, _decode(fields[index + 1])))
            index += 2
    return files


def _numstat(raw: bytes) -> list[tuple[int | None, int | None]]:
    """`--numstat -z`: `added TAB deleted TAB path NUL`, or for a rename `added TAB deleted
    TAB NUL old NUL new NUL`; `-` for a binary file's counts."""
    fields = raw.split(b"\0")
    counts: list[tuple[int | None, int | None]] = []
    index = 0
    while index < len(fields) - 1:
        added, deleted, path = (fields[index].split(b"\t", 2) + [b"", b""])[:3]
        counts.append((_number(added), _number(deleted)))
        index += 3 if path == b"" else 1
    return counts


def _number(raw: bytes) -> int | None:
    return int(raw) if raw.isdigit() else None


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"
