"""The engine's check runner (orchestrator/setup/checks.py) on its own: the totals it reads
from test runners' output, and a run on a real repository's commit in a real sandbox —
the commit's files only, its time bound, secrets masked, the result by exit code alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from local_repo import git, make_repo

from bot.github.outbound import Outbound
from bot.github.tracking import pull_body
from orchestrator.core.messages import Usage
from orchestrator.jobs.checks import JobCheck
from orchestrator.jobs.ports import JobStatus
from orchestrator.sandbox.confine import NO_NETWORK, Sandbox
from orchestrator.sandbox.probe import probe
from orchestrator.setup.checks import Checked, Checker, CommandRun, counts

SECRET = "hunter2-value-9f8e"


@pytest.mark.parametrize(
    ("output", "said"),
    [
        ("===== 3 failed, 12 passed, 1 skipped in 0.52s =====", "3 failed, 12 passed, 1 skipped"),
        ("Tests:       1 failed, 12 passed, 13 total", "1 failed, 12 passed"),
        ("test result: FAILED. 12 passed; 1 failed; 0 ignored", "12 passed, 1 failed"),
        ("# tests 13\n# pass 12\n# fail 1\n", "12 passed, 1 failed"),
        ("Ran 3 tests in 0.001s\n\nOK\n", "3 run"),
        ("compiling...\nall good\n", ""),
    ],
)
def test_the_totals_test_runners_print_are_read(output: str, said: str) -> None:
    assert counts(output) == said


async def test_a_check_runs_on_the_commits_files_bounded_and_masked(tmp_path: Path) -> None:
    sandbox: Sandbox = await probe({"TEAPARTY_SANDBOX": "off"}, home=tmp_path / "home")
    repo = make_repo(tmp_path / "repo")
    (repo / "ok.sh").write_text(f"ls; echo {SECRET}; echo '2 passed'\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    commit = git(repo, "rev-parse", "HEAD").strip()
    (repo / "uncommitted.txt").write_text("not in the commit\n")
    checker = Checker(
        sandbox,
        tmp_path / "checks",
        parent_env={"PATH": "/usr/bin:/bin"},
        mask=lambda text: text.replace(SECRET, "***"),
    )

    checked = await checker.check(
        repo=repo / ".git",
        commit=commit,
        commands=(("test", "bash ok.sh"), ("lint", "sleep 30")),
        prepared=None,
        network=NO_NETWORK,
        timeout_s=3,
    )

    test, lint = checked.runs
    assert (test.status, test.exit_code, test.counts) == ("passed", 0, "2 passed")
    assert "ok.sh" in test.tail
    assert "uncommitted.txt" not in test.tail, "the commit's files, not a worktree's"
    assert SECRET not in test.tail
    assert "***" in test.tail
    assert (lint.status, lint.exit_code) == ("failed", None)
    assert "stopped at its time limit" in lint.reason
    assert checked.status == "failed", "the lint command ran out of time"
    assert Checked.from_json(checked.to_json()) == checked
    assert not list((tmp_path / "checks").iterdir()), "the checkout is removed after"


def test_what_the_code_under_test_printed_cannot_break_out_of_its_block() -> None:
    hostile = "```\n</details>\n@alice see #1 <img src=x onerror=alert(1)>\n````\n"
    run = CommandRun("test", "pytest -q", "failed", 1, 1.0, "1 failed", "exit 1", hostile)
    checked = Checked("e" * 40, "failed", (run,))
    status = JobStatus(
        7, "Add it", "delivering", "delivering", (), Usage(), 0.0, "b",
        checks=(JobCheck(None, checked),),
    )  # fmt: skip

    body = pull_body(status, agent=Outbound("octo", "widgets", 1))

    block = body[body.index("<details>") :]
    fence = "`" * 5
    assert f"{fence}\n" in block, "the fence is longer than any run of backticks inside"
    inside = block.split(f"{fence}\n", 1)[1].rsplit(f"\n{fence}", 1)[0]
    assert "</details>" in inside, "the output's own </details> stays inside the code block"
    assert block.count("</details>") == 2
    assert "❌ failed" in body
    assert "- test `pytest -q` failed (1 failed; exit 1) in 1.0 s" in body


async def test_a_commit_that_cannot_be_checked_out_is_a_check_that_did_not_run(
    tmp_path: Path,
) -> None:
    sandbox: Sandbox = await probe({"TEAPARTY_SANDBOX": "off"}, home=tmp_path / "home")
    repo = make_repo(tmp_path / "repo")
    checker = Checker(sandbox, tmp_path / "checks", parent_env={"PATH": "/usr/bin:/bin"})

    checked = await checker.check(
        repo=repo / ".git",
        commit="0" * 40,
        commands=(("test", "true"),),
        prepared=None,
        network=NO_NETWORK,
        timeout_s=3,
    )

    assert (checked.status, checked.runs) == ("not run", ())
    assert checked.reason.startswith("its files could not be checked out: "), checked.reason
    assert not list((tmp_path / "checks").iterdir())
