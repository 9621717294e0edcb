"""A job recorded before jobs had repositories of their own moves into one on first use."""

from __future__ import annotations

import subprocess
from pathlib import Path

import teams_script as script

from orchestrator.workspace.git import Checkout

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
