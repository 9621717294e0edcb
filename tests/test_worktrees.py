"""The engine's git on real repositories: merges without a checkout, worktrees, engine-made
commits, and nothing a repository or a worktree says ever running."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orchestrator.workspace.git import (
    Checkout,
    GitError,
    add_worktree,
    auth_env,
    commit_all,
    ensure_branch,
    git,
    merge,
    remove_worktrees,
    slug,
    strip_nested_repositories,
)

ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@x",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@x",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "PATH": "/usr/bin:/bin",
}
WHO = ("worker", "w@x")


def sh(cwd: Path, *args: str) -> str:
    return subprocess.run(args, cwd=cwd, check=True, capture_output=True, text=True, env=ENV).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A bare repository with one commit on main."""
    source = tmp_path / "source"
    source.mkdir()
    sh(source, "git", "init", "-q", "-b", "main")
    (source / "a.txt").write_text("one\ntwo\nthree\n")
    sh(source, "git", "add", ".")
    sh(source, "git", "commit", "-qm", "init")
    sh(tmp_path, "git", "clone", "-q", "--bare", str(source), str(tmp_path / "repo.git"))
    return tmp_path / "repo.git"


async def work(repo: Path, path: Path, branch: str, start: str) -> Checkout:
    checkout = await add_worktree(repo, path, start)
    await checkout.git("checkout", "-q", "-b", branch)
    return checkout


async def change(checkout: Checkout, name: str, text: str, message: str) -> str | None:
    (checkout.path / name).write_text(text)
    return (await commit_all(checkout, message, author=WHO, committer=WHO)).commit


def test_slug() -> None:
    assert slug("Fix: the parser (again)!") == "fix-the-parser-again"
    assert slug("!!!") == "job"


async def test_a_task_branch_merges_into_the_job_branch_without_a_checkout(
    repo: Path, tmp_path: Path
) -> None:
    await ensure_branch(repo, "job", "main")
    task = await work(repo, tmp_path / "wt" / "slot-1", "t1", "job")
    assert (await add_worktree(repo, task.path, "job")).path == task.path  # reused
    assert await change(task, "b.txt", "new\n", "task 1: add b")
    merged = await merge(repo, into="job", source="t1", message="Merge task 1")
    assert merged.commit is not None
    log = sh(repo, "git", "log", "--format=%s %p", "job")
    assert log.splitlines()[0].startswith("Merge task 1 ")
    assert len(log.splitlines()[0].split()) == 5, "a merge commit with two parents (--no-ff)"
    again = await merge(repo, into="job", source="t1", message="Merge task 1")
    assert again.commit == merged.commit, "merging what is merged changes nothing"
    assert sh(repo, "git", "log", "-1", "--format=%an", "job").strip() == "teaparty"
    assert sh(repo, "git", "log", "-1", "--format=%an", "t1").strip() == "worker"
    _, files = await git(repo, "ls-tree", "--name-only", "job")
    assert files.split() == ["a.txt", "b.txt"]
    await remove_worktrees(repo, [task.path])
    assert not task.path.exists()
    assert not task.admin.exists()


async def test_a_conflict_comes_back_with_its_files_and_moves_nothing(
    repo: Path, tmp_path: Path
) -> None:
    await ensure_branch(repo, "job", "main")
    one = await work(repo, tmp_path / "slot-1", "t1", "job")
    two = await work(repo, tmp_path / "slot-2", "t2", "job")
    await change(one, "a.txt", "ONE\n", "one")
    await change(two, "a.txt", "TWO\n", "two")
    first = await merge(repo, into="job", source="t1", message="m1")
    assert first.commit
    conflict = await merge(repo, into="job", source="t2", message="m2")
    assert (conflict.commit, conflict.conflicts) == (None, ("a.txt",))
    assert sh(repo, "git", "rev-parse", "job").strip() == first.commit
    with pytest.raises(GitError, match="a branch is missing"):
        await merge(repo, into="nope", source="t2", message="m")


async def test_the_engine_commits_a_worktree_once_and_ignores_ignored_files(
    repo: Path, tmp_path: Path
) -> None:
    checkout = await work(repo, tmp_path / "slot-1", "t1", "main")
    (checkout.path / ".gitignore").write_text("build/\n")
    (checkout.path / "build").mkdir()
    (checkout.path / "build" / "out.o").write_text("x")
    first = await change(checkout, "b.txt", "b\n", "Task 1: b\n\nwrote b")
    assert first is not None
    again = await commit_all(checkout, "again", author=WHO, committer=WHO)
    assert again.commit is None, "a clean worktree commits nothing"
    _, files = await git(repo, "ls-tree", "-r", "--name-only", "t1")
    assert files.split() == [".gitignore", "a.txt", "b.txt"]
    assert sh(repo, "git", "log", "-1", "--format=%s%n%b", "t1").split("\n")[:3] == [
        "Task 1: b",
        "wrote b",
        "",
    ]


async def test_what_a_worktree_or_repository_config_says_never_runs(
    repo: Path, tmp_path: Path
) -> None:
    """Hooks and fsmonitor, .gitattributes drivers and a nested repository's config are inert.

    (The repository's own config is the engine's; agents cannot write it. Its hooks and
    fsmonitor are switched off anyway, in case something else could.)
    """
    canary = tmp_path / "ran"
    evil = f"touch {canary}; false"
    checkout = await work(repo, tmp_path / "slot-1", "t1", "main")
    sh(repo, "git", "config", "core.fsmonitor", evil)
    hooks = repo / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in ("pre-commit", "post-commit", "post-index-change", "reference-transaction"):
        (hooks / hook).write_text(f"#!/bin/sh\n{evil}\n")
        (hooks / hook).chmod(0o755)
    (checkout.path / ".gitattributes").write_text("* filter=evil diff=evil\n")
    nested = checkout.path / "vendored"
    nested.mkdir()
    sh(nested, "git", "init", "-q")
    sh(nested, "git", "config", "core.fsmonitor", evil)
    sh(nested, "git", "config", "filter.evil.clean", evil)
    (nested / ".gitattributes").write_text("* filter=evil\n")
    (nested / "x.txt").write_text("x\n")
    (checkout.path / ".git").write_text("gitdir: /nonexistent\n")  # the agent's own .git file
    committed = await commit_all(checkout, "m", author=WHO, committer=WHO)
    await checkout.git("status", "--porcelain")
    await checkout.git("checkout", "-q", "-f", "main")
    assert committed.commit is not None
    assert committed.stripped == ("vendored/.git",)
    assert not canary.exists(), "something the repository or worktree named was run"
    _, tree = await git(repo, "ls-tree", "-r", "t1")
    assert "vendored/x.txt" in tree  # files, not a gitlink
    assert "160000" not in tree


def test_nested_repositories_are_stripped_but_the_top_git_file_stays(tmp_path: Path) -> None:
    (tmp_path / ".git").write_text("gitdir: x\n")
    (tmp_path / "a" / "b" / ".git").mkdir(parents=True)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / ".git").write_text("gitdir: y\n")
    assert strip_nested_repositories(tmp_path) == ["a/b/.git", "c/.git"]
    assert (tmp_path / ".git").exists()


def test_a_credential_is_scoped_to_its_one_url() -> None:
    env = auth_env("https://github.com/o/r.git", "Authorization: Basic abc")
    assert env["GIT_CONFIG_KEY_0"] == "http.https://github.com/o/r.git.extraHeader"
    assert auth_env("https://x", None) == {}


async def test_a_git_command_past_its_time_limit_is_killed(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(GitError, match="ran past"):
        await git(repo, "fetch", "--quiet", str(tmp_path / "nowhere"), timeout_s=0.000_001)


async def test_the_engines_git_sees_none_of_the_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "canary-token")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "canary-key")
    _, env = await git(None, "-c", "alias.show-env=!env", "show-env")
    assert "canary" not in env
    assert "GIT_CONFIG_GLOBAL=/dev/null" in env


async def test_a_nested_repository_is_stripped_wherever_an_agent_put_it(
    repo: Path, tmp_path: Path
) -> None:
    """Deep in a new directory, inside another nested one, in an ignored directory, in a
    tracked directory (which git then lists nothing of) and at a gitlink's path: git reports
    a new directory holding a repository as one entry (`dir/`) and never what is inside, so
    the engine looks for itself."""
    checkout = await work(repo, tmp_path / "slot-1", "t1", "main")
    await checkout.git("update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},link")
    (checkout.path / ".gitignore").write_text("build/\n")
    (checkout.path / "src").mkdir()
    (checkout.path / "src" / "kept.txt").write_text("tracked\n")
    assert await change(checkout, "src/kept.txt", "tracked\n", "a tracked directory, a gitlink")
    places = ["new/deep/repo", "outer", "outer/inner", "build/tool", "src", "link"]
    for place in places:
        (checkout.path / place).mkdir(parents=True, exist_ok=True)
        sh(checkout.path / place, "git", "init", "-q")
        (checkout.path / place / "x.txt").write_text(f"{place}\n")
    committed = await commit_all(checkout, "m", author=WHO, committer=WHO)
    assert committed.stripped == tuple(sorted(f"{place}/.git" for place in places))
    _, tree = await git(repo, "ls-tree", "-r", "t1")
    assert "outer/inner/x.txt" in tree, "files, not a gitlink, once the outer one is gone"
    assert "new/deep/repo/x.txt" in tree
    assert "link/x.txt" in tree
    assert "160000" not in tree
