"""SIGKILL the engine inside a mini-team; a restart must finish the job with the same branch.

The scripted teams job (teams_script.py) runs in a real subprocess (teams_harness.py),
dies at one point, and runs again without a kill. The job branch's final tree must equal
an uninterrupted run's, with each task merged once.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import teams_script as script

HARNESS = Path(__file__).with_name("teams_harness.py")
BRANCH = "teaparty/job-7-alpha-and-beta"
KILLS = {
    "inside the worker's first model call": "model:implementer:1",
    "inside a worker's fix after review": "model:implementer:9",
    "inside a reviewer's verdict": "model:spec-reviewer:2",
    "after a merge, before its result was recorded": "step:team_merge:1",
    "after a slot was leased, before the worker was briefed": "step:team_prepare:2",
    "after the phase reviewer's tasks were created, before recording": "step:team_phase:1",
    "inside the coding lead's resolution plan": "model:coding-lead:2",
    "after a review round began, before the reviewers were briefed": "step:team_review:2",
    "after a team ended, before its reply": "step:team_finish:3",
}


def harness(home: Path, repo: Path, kill: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(HARNESS), str(home), str(repo)]
    if kill:
        command += ["--kill", kill]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def outcome(home: Path) -> tuple[str, list[str]]:
    repo = script.job_repo(home)
    tree = script.git(repo, "rev-parse", f"{BRANCH}^{{tree}}").strip()
    log = script.git(repo, "log", "--format=%s", BRANCH).splitlines()
    return tree, sorted(line for line in log if line.startswith("Merge task"))


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[str]]:
    base = tmp_path_factory.mktemp("uninterrupted")
    repo = script.make_repo(base / "widgets")
    done = harness(base / "home", repo)
    assert done.returncode == 0, done.stderr
    return outcome(base / "home")


@pytest.mark.parametrize("kill", list(KILLS.values()), ids=list(KILLS))
def test_sigkill_inside_a_mini_team_then_restart_gives_the_same_branch(
    kill: str, tmp_path: Path, uninterrupted: tuple[str, list[str]]
) -> None:
    repo = script.make_repo(tmp_path / "widgets")
    killed = harness(tmp_path / "home", repo, kill)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    restarted = harness(tmp_path / "home", repo)
    assert restarted.returncode == 0, restarted.stderr
    assert "All tasks merged" in restarted.stdout
    assert outcome(tmp_path / "home") == uninterrupted
