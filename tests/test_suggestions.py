"""A reviewer's suggestion applied to the job branch with git's plumbing: exactly the line,
only while it reads as the reviewer saw it, only to a regular file of the branch."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from orchestrator.workspace.git import GitError
from orchestrator.workspace.suggestions import apply, seen_line, suggestion


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "job")
    (work / "app.py").write_text("one\ntwo\nthree\n")
    os.symlink("/etc/passwd", work / "link")
    git(work, "add", ".")
    git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    return work / ".git"


def test_the_block_and_the_line_are_read_from_the_comment() -> None:
    assert suggestion("Try:\n```suggestion\nTWO\n```\nthanks") == "TWO\n"
    assert suggestion("```suggestion\n```") == ""
    assert suggestion("no block") is None
    assert seen_line("@@ -1,3 +1,3 @@\n one\n+two") == "two"
    assert seen_line("@@ -1,3 +1,3 @@\n one\n-two") is None


async def test_the_line_is_replaced_in_a_commit_on_the_branch(repo: Path, tmp_path: Path) -> None:
    before = git(repo, "rev-parse", "job").strip()
    commit = await apply(
        repo,
        "job",
        path="app.py",
        line=2,
        seen="two",
        replacement="TWO\n",
        message="Apply",
        scratch=tmp_path / "s.tmp",
    )
    assert git(repo, "rev-parse", "job").strip() == commit
    assert git(repo, "show", "job:app.py") == "one\nTWO\nthree\n"
    assert git(repo, "rev-parse", f"{commit}^").strip() == before
    assert sorted(p.name for p in os.scandir(tmp_path) if p.name.startswith("s.")) == []


async def test_a_changed_line_a_symlink_or_a_missing_file_is_refused(
    repo: Path, tmp_path: Path
) -> None:
    head = git(repo, "rev-parse", "job").strip()
    cases = [
        ("app.py", 2, "zwei", "has changed since"),
        ("app.py", 9, "two", "has changed since"),
        ("link", 1, "x", "is not a file"),
        ("../app.py", 1, "one", "is not a file"),
        ("nope.py", 1, "one", "is not a file"),
    ]
    for path, line, seen, why in cases:
        with pytest.raises(GitError, match=why):
            await apply(
                repo,
                "job",
                path=path,
                line=line,
                seen=seen,
                replacement="x\n",
                message="m",
                scratch=tmp_path / "s.tmp",
            )
    assert git(repo, "rev-parse", "job").strip() == head
