"""Job workspaces: an old-layout job moves into a repository of its own on first use, and a
job branch is unique within its repository only."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import teams_script as script

from orchestrator.workspace.git import Checkout, GitError

BRANCH = "teaparty/job-1-old"


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], check=True, capture_output=True, text=True, env=script.ENV
    ).stdout


async def test_an_old_layout_job_gets_its_own_repository_with_its_branches(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    office = await script.open_office(home, script.model())
    try:
        repo = script.make_repo(tmp_path / "widgets")
        mirror = office.workspace.repo_dir("widgets") / "mirror.git"
        git("clone", "-q", "--bare", str(repo), str(mirror))  # the old mirror: refs/heads/*
        git("--git-dir", str(mirror), "branch", BRANCH, "main")
        git("--git-dir", str(mirror), "branch", f"{BRANCH}--task-1", "main")
        old_tree = mirror.parent / "jobs" / "job-1--old" / "worktree"
        git("--git-dir", str(mirror), "worktree", "add", "-q", str(old_tree), BRANCH)
        started = await office.engine.bus.start_job(
            job_key="k",
            project="widgets",
            title="old",
            agent="office-manager",
            brief="b",
            max_parallel=3,
            wake=False,
        )
        base = git("--git-dir", str(mirror), "rev-parse", "main").strip()
        await office.engine.store.write(
            lambda tx: tx.execute(
                "INSERT INTO job_workspaces (job_id, mirror, branch, base, path)"
                " VALUES (?, ?, ?, ?, ?)",
                (started.job_id, str(mirror), BRANCH, base, str(old_tree)),
            )
        )
        space = await office.workspace.job(started.job_id)
        assert space is not None
        assert space.repo == old_tree.parent / "repo.git"
        heads = git("--git-dir", str(space.repo), "for-each-ref", "--format=%(refname)")
        assert heads.split() == [f"refs/heads/{BRANCH}", f"refs/heads/{BRANCH}--task-1"]
        assert Checkout(space.repo, space.path).exists(), "the job worktree is the new repo's"
        assert "job-1--old" not in git("--git-dir", str(mirror), "worktree", "list")
        again = await office.workspace.job(started.job_id)
        assert again == space, "moved once; recorded"
    finally:
        await office.close()


async def test_a_branch_is_unique_in_its_repository_not_across_repositories(
    tmp_path: Path,
) -> None:
    office = await script.open_office(tmp_path / "home", script.model())
    try:
        ws = office.workspace
        sources = {name: script.make_repo(tmp_path / name) for name in ("widgets", "gadgets")}
        mirrors = {name: await ws.mirror(name, str(path)) for name, path in sources.items()}
        jobs = []
        for n in range(3):
            started = await office.engine.bus.start_job(
                job_key=f"k{n}", project="widgets", title="t", agent="office-manager", brief="b"
            )
            jobs.append(started.job_id)
        start = "refs/remotes/origin/main"
        first = await ws.open_job(
            jobs[0], mirror=mirrors["widgets"], branch=BRANCH, start=start, slug="old", mark="m0"
        )
        other = await ws.open_job(
            jobs[1], mirror=mirrors["gadgets"], branch=BRANCH, start=start, slug="old", mark="m1"
        )
        assert (first.branch, other.branch) == (BRANCH, BRANCH)
        assert await ws.job(jobs[1]) == other, "issue #1 of a second repository gets its own"
        with pytest.raises(GitError, match=f"belongs to job {jobs[0]} of the same repository"):
            await ws.open_job(
                jobs[2],
                mirror=mirrors["widgets"],
                branch=BRANCH,
                start=start,
                slug="old",
                mark="m2",
            )
        assert await ws.job(jobs[2]) is None
    finally:
        await office.close()
