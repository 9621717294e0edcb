"""A person's local repository for `teaparty run` tests: git as they run it, one commit."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

ENV = {
    # The checkout under test, not whichever one the virtualenv installed (editable).
    "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
    "GIT_AUTHOR_NAME": "dev",
    "GIT_AUTHOR_EMAIL": "dev@x",
    "GIT_COMMITTER_NAME": "dev",
    "GIT_COMMITTER_EMAIL": "dev@x",
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": "/nonexistent",
}


def git(repo: Path, *args: str) -> str:
    """Run git in `repo`; its standard output."""
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=ENV
    ).stdout


def make_repo(path: Path) -> Path:
    """A repository at `path` on branch main with one commit (a README)."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("widgets\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "init")
    return path


def committed(path: Path, files: Mapping[str, str]) -> Path:
    """A repository at `path` on branch main whose one commit (by t <t@e>, with git as the
    process environment runs it) holds `files`, each at its relative path."""
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    for args in (
        ["init", "--quiet", "--initial-branch=main"],
        ["add", "."],
        ["-c", "user.name=t", "-c", "user.email=t@e", "commit", "--quiet", "-m", "init"],
    ):
        subprocess.run(["git", "-C", str(path), *args], check=True)
    return path


def plumbed(
    repo: Path, ref: str, files: Mapping[str, str | bytes], *, message: str, on_top: bool = True
) -> str:
    """A commit whose tree holds only `files`, made with git's plumbing in `repo` (bare or
    not), `ref` moved to it; its parent is the commit `ref` was at (`on_top`, and then the
    move fails if `ref` moved meanwhile), else it has none. The commit's id."""

    def run(*args: str, stdin: bytes | None = None) -> str:
        done = subprocess.run(
            ["git", "-C", str(repo), *args], input=stdin, capture_output=True, check=True, env=ENV
        )
        return done.stdout.decode().strip()

    lines = []
    for name, content in files.items():
        data = content.encode() if isinstance(content, str) else content
        lines.append(f"100644 blob {run('hash-object', '-w', '--stdin', stdin=data)}\t{name}\n")
    tree = run("mktree", stdin="".join(lines).encode())
    if not on_top:
        commit = run("commit-tree", tree, "-m", message)
        run("update-ref", ref, commit)
        return commit
    parent = run("rev-parse", ref)
    commit = run("commit-tree", tree, "-p", parent, "-m", message)
    run("update-ref", ref, commit, parent)
    return commit
