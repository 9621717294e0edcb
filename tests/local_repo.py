"""A person's local repository for `teaparty run` tests: git as they run it, one commit."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ENV = {
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
