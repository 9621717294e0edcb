"""`teaparty run` end to end on a real repository with the scripted stand-in for the model."""

from __future__ import annotations

from pathlib import Path

import pytest
from local_repo import ENV, git, make_repo

from bot.cli import main
from bot.local_run import run_local
from orchestrator.bus.gates import Gate
from orchestrator.config import shipped_org_dir

BRANCH = "teaparty/job-1-add-a-verbose-flag"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "widgets")


def test_run_makes_a_job_branch_with_the_workers_commit_merged(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = tmp_path / "issue.md"
    body.write_text("The CLI should accept --verbose.\n")
    argv = [
        "run",
        "--repo",
        str(repo),
        "--title",
        "Add a --verbose flag",
        "--body-file",
        str(body),
        "--yes",
        "--home",
        str(tmp_path / "home"),
        "--model",
        "scripted",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "job 1 started: branch teaparty/job-1-add-a-verbose-flag" in out
    assert "gate 1 (plan, " in out
    assert "The plan: 1 task.\n\n1. Add a --verbose flag" in out
    assert f"result: Done. Task #1 merged into {BRANCH}" in out
    assert "task #1 [done] Add a --verbose flag" in out
    log = git(repo, "log", "--format=%an|%s|%P", BRANCH, "--not", "main").splitlines()
    assert [entry.split("|")[:2] for entry in log] == [
        ["teaparty", "Merge task #1: Add a --verbose flag"],
        ["implementer (teaparty)", "Task #1: Add a --verbose flag"],
    ]
    assert len(log[0].split("|")[2].split()) == 2, "a --no-ff merge of the task branch"
    recorded = git(repo, "show", f"{BRANCH}:docs/requests/add-a-verbose-flag.md")
    assert "The CLI should accept --verbose." in recorded
    assert git(repo, "status", "--porcelain") == "", "the user's checkout is untouched"
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"

    resume = ["run", "--repo", str(repo / "docs"), "--resume", "1", *argv[-4:]]
    (repo / "docs").mkdir()
    assert main(resume) == 2, "a finished job, named from a directory inside the repo"
    again = capsys.readouterr()
    assert f"job 1 is done: its branch was {BRANCH}; nothing to resume" in again.err
    assert "gate" not in again.out
    assert git(repo, "log", "--format=%s", BRANCH, "--not", "main").splitlines() == [
        "Merge task #1: Add a --verbose flag",
        "Task #1: Add a --verbose flag",
    ]
    assert main(argv) == 0, "the same command again is a new job"
    assert "job 2 started: branch teaparty/job-2-add-a-verbose-flag" in capsys.readouterr().out


async def test_a_declined_plan_stops_before_any_work(repo: Path, tmp_path: Path) -> None:
    """Also: the project's file, standing learnings and instruction files come from HEAD."""
    (repo / ".teaparty").mkdir()
    (repo / ".teaparty" / "project.yaml").write_text("humans: {decider: carol}\n")
    (repo / ".teaparty" / "learnings.md").write_text("Never touch the vendored code.\n")
    (repo / "AGENTS.md").write_text("Run make check.\n")
    (repo / "src").mkdir()
    (repo / "src" / "AGENTS.md").write_text("Type everything.\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "configure teaparty")
    asked: list[Gate] = []
    lines: list[str] = []

    async def decline(gate: Gate) -> str:
        asked.append(gate)
        return "no, not this week"

    job = await run_local(
        repo,
        title="Add a --verbose flag",
        body="b",
        home=tmp_path / "h",
        org_dir=shipped_org_dir(),
        model="scripted",
        env=ENV,
        approve=decline,
        say=lines.append,
    )
    assert [g.options for g in asked] == [("yes", "no")]
    assert "  carol answered: no, not this week" in lines
    assert "standing learnings: .teaparty/learnings.md (1 lines)" in lines
    assert "instructions for agents: AGENTS.md (+1 scoped)" in lines
    assert job.result is not None
    assert job.result == (
        "The plan was rejected (carol answered 'no, not this week'), so nothing was done."
    )
    assert job.commits == ()
    assert git(repo, "branch", "--list", "teaparty/*") == "", "nothing to publish: no branch"


def test_run_refuses_a_directory_that_is_not_a_repository(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--repo", str(tmp_path), "--title", "t", "--model", "scripted"]) == 2
    assert "is not a git repository" in capsys.readouterr().err
