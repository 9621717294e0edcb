"""Branches, task worktrees and checkout-free merges on real repositories."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orchestrator.worktrees import (
    GitError,
    ensure_branch,
    ensure_worktree,
    git,
    merge,
    remove_worktree,
    slug,
)

ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@x",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@x",
    "PATH": "/usr/bin:/bin",
}


def sh(cwd: Path, *args: str) -> str:
    return subprocess.run(args, cwd=cwd, check=True, capture_output=True, text=True, env=ENV).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    sh(path, "git", "init", "-q", "-b", "main")
    (path / "a.txt").write_text("one\ntwo\nthree\n")
    sh(path, "git", "add", ".")
    sh(path, "git", "commit", "-qm", "init")
    return path


def commit_in(worktree: Path, name: str, text: str, message: str) -> None:
    (worktree / name).write_text(text)
    sh(worktree, "git", "add", ".")
    sh(worktree, "git", "commit", "-qm", message)


def test_slug() -> None:
    assert slug("Fix: the parser (again)!") == "fix-the-parser-again"
    assert slug("!!!") == "job"


async def test_a_task_branch_merges_into_the_job_branch_without_a_checkout(
    repo: Path, tmp_path: Path
) -> None:
    await ensure_branch(repo, "teaparty/job-1-x", "main")
    task = await ensure_worktree(
        repo, tmp_path / "wt" / "task-1", "teaparty/job-1-x--t1", "teaparty/job-1-x"
    )
    assert await ensure_worktree(repo, task, "teaparty/job-1-x--t1", "x") == task  # reused
    commit_in(task, "b.txt", "new\n", "task 1: add b")
    merged = await merge(
        repo, into="teaparty/job-1-x", source="teaparty/job-1-x--t1", message="Merge task 1"
    )
    assert merged.commit is not None
    log = sh(repo, "git", "log", "--format=%s %p", "teaparty/job-1-x")
    assert log.splitlines()[0].startswith("Merge task 1 ")
    assert len(log.splitlines()[0].split()) == 5, "a merge commit with two parents (--no-ff)"
    again = await merge(
        repo, into="teaparty/job-1-x", source="teaparty/job-1-x--t1", message="Merge task 1"
    )
    assert again.commit == merged.commit, "merging what is merged changes nothing"
    assert sh(repo, "git", "log", "-1", "--format=%an", "teaparty/job-1-x").strip() == "teaparty"
    _, files = await git(repo, "ls-tree", "--name-only", "teaparty/job-1-x")
    assert files.split() == ["a.txt", "b.txt"]
    assert sh(repo, "git", "status", "--porcelain") == "", "the main checkout is untouched"
    await remove_worktree(repo, task)
    assert not task.exists()


async def test_a_conflict_comes_back_with_its_files_and_moves_nothing(
    repo: Path, tmp_path: Path
) -> None:
    before = await ensure_branch(repo, "job", "main")
    one = await ensure_worktree(repo, tmp_path / "one", "t1", "job")
    two = await ensure_worktree(repo, tmp_path / "two", "t2", "job")
    commit_in(one, "a.txt", "ONE\n", "one")
    commit_in(two, "a.txt", "TWO\n", "two")
    assert (await merge(repo, into="job", source="t1", message="m1")).commit
    conflict = await merge(repo, into="job", source="t2", message="m2")
    assert conflict.commit is None
    assert conflict.conflicts == ("a.txt",)
    assert sh(repo, "git", "rev-parse", "job").strip() != before
    with pytest.raises(GitError, match="a branch is missing"):
        await merge(repo, into="nope", source="t2", message="m")
