"""CI rounds, decided purely and kept in the store: which completed suites are read, what a
settled set of suites calls for (wait, re-run once, flaky, a round, a person), the brief's
point (trimmed, masked), and the facts a restarted process must neither repeat nor forget."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from conftest import Load
from fakes import FakeForge
from test_rounds import delivered, points

from bot.handlers.ci import refused, suites_of
from bot.handlers.deliveries import ChecksCompleted
from bot.handlers.payloads import Ignored, parse_command
from orchestrator.api import (
    CiFacts,
    CiIgnore,
    CiRerun,
    CiRound,
    CiSay,
    CiSuites,
    CiWait,
    FailedCheck,
    decide_ci,
)
from orchestrator.config.schema import Rounds
from orchestrator.core.secret_scan import Scanner
from orchestrator.jobs import ci_rounds

APP = "teaparty[bot]"
SHA = "a" * 40
TESTS = FailedCheck("tests", "failure", 11, "GitHub Actions", rerun="job")
LINT = FailedCheck("lint", "failure", 12, "GitHub Actions", rerun="job")


def settled(*failed: FailedCheck, passed: tuple[str, ...] = ()) -> CiSuites:
    return CiSuites(0, (), failed, passed)


NONE = CiFacts()


def decide(suites: CiSuites, facts: CiFacts = NONE, **given: Any) -> Any:
    settings: dict[str, Any] = {"on": True, "limit": 2, "sha": SHA, "head": SHA} | given
    return decide_ci(suites, facts, **settings)


# --- parsing ------------------------------------------------------------------------------


def test_every_completed_suite_on_a_pull_request_is_read_and_one_on_none_ignored(
    payload: Load,
) -> None:
    data = payload("check_suite.completed")
    passing = parse_command("check_suite", data, app_login=APP)  # a flaky re-run passes
    assert isinstance(passing, ChecksCompleted)
    assert not passing.failed
    data["check_suite"]["conclusion"] = "failure"
    data["sender"].update(login=APP, type="Bot")  # the App's push ran the checks: still read
    command = parse_command("check_suite", data, app_login=APP)
    assert isinstance(command, ChecksCompleted)
    assert command.failed
    assert (command.suite_id, command.app_name, command.pull_numbers) == (
        118578147,
        "octocoders-linter",
        (2,),
    )
    data["check_suite"]["pull_requests"] = []
    assert isinstance(parse_command("check_suite", data, app_login=APP), Ignored)


def test_a_workflow_run_is_read_as_its_check_suite(payload: Load) -> None:
    data = payload("workflow_run.completed.with-pull-requests")
    data["workflow_run"]["conclusion"] = "failure"
    command = parse_command("workflow_run", data, app_login=APP)
    assert isinstance(command, ChecksCompleted)
    assert (command.suite_id, command.pull_numbers, command.app_slug) == (
        data["workflow_run"]["check_suite_id"],
        (2,),
        "github-actions",
    )
    assert command.failed
    on_none = parse_command("workflow_run", payload("workflow_run.completed"), app_login=APP)
    assert isinstance(on_none, Ignored)  # a run of the default branch: no job's pull request


# --- deciding -----------------------------------------------------------------------------


def test_off_an_older_commit_or_suites_still_running_decide_nothing_yet() -> None:
    assert isinstance(decide(settled(TESTS), on=False), CiIgnore)
    older = decide(settled(TESTS), head="b" * 40)
    assert isinstance(older, CiIgnore)
    assert "older commit" in older.why
    waiting = decide(CiSuites(1, (), (TESTS,), ()))
    assert isinstance(waiting, CiWait)
    assert isinstance(decide(settled(passed=("tests",))), CiIgnore)


def test_a_failure_is_re_run_once_and_then_starts_one_round_per_commit() -> None:
    first = decide(settled(TESTS, LINT))
    assert isinstance(first, CiRerun)
    assert [c.name for c in first.checks] == ["tests", "lint"]
    ran = CiFacts(reruns=frozenset({"tests", "lint"}))
    again = decide(settled(TESTS, LINT), ran)
    assert isinstance(again, CiRound)
    assert [c.name for c in again.checks] == ["tests", "lint"]
    assert isinstance(decide(settled(TESTS), replace(ran, rounded=True)), CiIgnore)
    cannot = replace(TESTS, rerun=None)  # the installation may not re-run it
    assert isinstance(decide(settled(cannot)), CiRound)


def test_a_check_that_passes_when_re_run_is_flaky_and_starts_nothing() -> None:
    ran = CiFacts(reruns=frozenset({"tests", "lint"}))
    flaky = decide(settled(passed=("tests", "lint")), ran)
    assert isinstance(flaky, CiSay)
    assert (flaky.kind, flaky.names) == ("flaky", ("tests", "lint"))
    assert "flaky" in flaky.note
    said = replace(ran, flaky=frozenset({"tests", "lint"}))
    assert isinstance(decide(settled(passed=("tests", "lint")), said), CiIgnore)
    twice = decide(settled(TESTS, passed=("tests",)), replace(ran, rounded=False))
    assert isinstance(twice, CiRound)  # passed in one suite, failed in another: not flaky
    assert twice.flaky == ()
    mixed = decide(settled(LINT, passed=("tests",)), ran)  # one real, one flaky
    assert isinstance(mixed, CiRound)
    assert ([c.name for c in mixed.checks], mixed.flaky) == (["lint"], ("tests",))


def test_after_ci_rounds_automatic_rounds_in_a_row_the_next_failure_waits_for_a_person() -> None:
    ran = CiFacts(reruns=frozenset({"tests"}), in_a_row=2)
    held = decide(settled(TESTS), ran)
    assert isinstance(held, CiSay)
    assert held.kind == "held"
    assert "waits for a" in held.note
    assert "person" in held.note
    assert isinstance(decide(settled(TESTS), replace(ran, held=True)), CiIgnore)
    assert isinstance(decide(settled(TESTS), replace(ran, in_a_row=1)), CiRound)
    assert isinstance(decide(settled(TESTS), ran, limit=3), CiRound)


def test_a_workflow_awaiting_approval_is_said_to_have_not_run() -> None:
    said = decide(CiSuites(0, ("GitHub Actions",), (), ()))
    assert isinstance(said, CiSay)
    assert "approval" in said.note


def test_the_default_is_on_with_two_automatic_rounds() -> None:
    assert (Rounds().on_failed_checks, Rounds().ci_rounds) == (True, 2)


# --- reading ------------------------------------------------------------------------------


def test_suites_that_never_run_a_check_and_the_apps_own_do_not_hold_the_decision() -> None:
    actions = {"id": 15368, "slug": "github-actions", "name": "GitHub Actions"}
    other = {"id": 5, "slug": "some-app", "name": "Some App"}
    ours = {"id": 4242, "slug": "teaparty", "name": "TeaParty"}
    suites = [
        {"status": "completed", "conclusion": "failure", "app": actions},
        {"status": "queued", "conclusion": None, "app": other, "latest_check_runs_count": 0},
        {"status": "in_progress", "conclusion": None, "app": ours, "latest_check_runs_count": 1},
    ]
    output = {"title": "1 failed", "summary": "<!-- hidden -->It broke", "text": None}
    runs = [
        {"id": 1, "name": "tests", "conclusion": "failure", "app": actions, "output": output},
        {"id": 2, "name": "lint", "conclusion": "success", "app": actions},
        {"id": 3, "name": "summary", "conclusion": "failure", "app": ours},
        # the job's own check run, made with GITHUB_TOKEN in runner mode: Actions' by app
        {
            "id": 4,
            "name": "TeaParty",
            "conclusion": "failure",
            "app": actions,
            "external_id": "teaparty:job:1:round:0:0",
        },
    ]
    read = suites_of(suites, runs, own_app=4242)
    assert read.running == 0
    assert [(c.name, c.rerun, c.log) for c in read.failed] == [
        ("tests", "job", "1 failed\n\nIt broke")
    ]
    assert read.passed == ("lint",)
    assert "actions: read" in refused("actions: read")


# --- the brief's point ----------------------------------------------------------------------


def test_the_point_holds_the_log_end_and_annotations_trimmed_and_masked() -> None:
    log = "\n".join(f"2026-01-01T00:00:00.0000000Z line {n}" for n in range(500))
    log += "\n\x1b[31mFAILED tests/test_x.py::test_adds - assert 3 == 4\x1b[0m"
    log += "\nusing token ghp_" + "a" * 36 + " and s3cr3t-value-of-the-app"
    check = replace(
        TESTS,
        annotations=tuple(f"tests/test_x.py:{n} assert {n}" for n in range(15)),
        log=log,
    )
    made = ci_rounds.point(check, sha=SHA, scanner=Scanner({"s3cr3t-value-of-the-app": "KEY"}))
    assert made.source == f"ci:{SHA}:tests"
    assert "FAILED tests/test_x.py::test_adds - assert 3 == 4" in made.body
    assert "line 499" in made.body
    assert "line 100" not in made.body  # only the end of the log
    assert "2026-01-01T" not in made.body
    assert "\x1b" not in made.body
    assert "ghp_" + "a" * 36 not in made.body
    assert "s3cr3t-value-of-the-app" not in made.body
    assert "[KEY]" in made.body
    assert "tests/test_x.py:9 assert 9" in made.body
    assert "tests/test_x.py:10 " not in made.body
    assert "and 5 more" in made.body
    assert len(made.body) <= 4_000
    nolog = ci_rounds.point(replace(TESTS, log_note="not allowed"), sha=SHA, scanner=Scanner({}))
    assert "No log: not allowed" in nolog.body
    many = [replace(TESTS, name=f"check-{n}", log="x" * 9_000) for n in range(20)]
    each = ci_rounds.points(many, sha=SHA, scanner=Scanner({}))
    assert len(each) == ci_rounds.MAX_CHECKS + 1
    assert "12 more checks failed" in each[-1].body
    assert "`check-19`" in each[-1].body
    assert sum(len(p.body) for p in each) <= (ci_rounds.MAX_CHECKS + 1) * 4_000


# --- the store ------------------------------------------------------------------------------


async def test_one_automatic_round_per_commit_and_the_count_in_a_row_survive_a_restart(
    tmp_path: Path,
) -> None:
    office, forge, job_id = await delivered(tmp_path)
    try:
        taken = await office.ci.start_round(job_id, SHA, [TESTS])
        assert taken is not None
        assert (taken.round_number, taken.added, taken.state) == (1, 1, "running")
        assert await office.ci.start_round(job_id, SHA, [TESTS]) is None  # once per commit
        facts = await office.ci.facts(job_id, SHA)
        assert (facts.rounded, facts.in_a_row) == (True, 1)
        await office.ci.reran(job_id, SHA, ["tests"], note="re-running")
        assert (await office.ci.facts(job_id, SHA)).reruns == {"tests"}
        assert await office.ci.notes(job_id) == (
            "re-running",
            "❌ `tests` failed on aaaaaaaaaaaa: round 1 works on it.",
        )
        (running,) = [r for r in await office.rounds.of_job(job_id) if r.state == "running"]
        assert (
            "The check `tests` (GitHub Actions) concluded failure" in running.points[0].point.body
        )
    finally:
        await office.close()
    # A restarted process reads the same facts; a person's round ends the run of automatic ones.
    office, forge, job_id = await reopened(tmp_path, job_id)
    try:
        assert (await office.ci.facts(job_id, SHA)).rounded
        assert (await office.ci.facts(job_id, "b" * 40)).in_a_row == 1
        await office.rounds.feedback(job_id, points("Rename it."))
        assert (await office.ci.facts(job_id, "b" * 40)).in_a_row == 0
    finally:
        await office.close()


async def reopened(tmp_path: Path, job_id: int) -> tuple[Any, FakeForge, int]:
    from test_budget_gate import open_office
    from test_rounds import TEXT, demo

    office = await open_office(tmp_path / "home", TEXT, demo())
    return office, FakeForge(office), job_id


async def test_what_ci_did_is_said_once_per_commit(tmp_path: Path) -> None:
    office, _, job_id = await delivered(tmp_path)
    try:
        flaky = CiSay("flaky", ("tests",), "🔁 `tests` … flaky")
        assert await office.ci.say(job_id, SHA, flaky)
        assert not await office.ci.say(job_id, SHA, flaky)  # said once
        awaiting = CiSay("note", ("GitHub Actions",), "CI did not run: approval")
        assert await office.ci.say(job_id, SHA, awaiting)
        assert not await office.ci.say(job_id, SHA, awaiting)
        assert (await office.ci.facts(job_id, SHA)).flaky == {"tests"}
        assert await office.ci.note(job_id, "", "token", "no CI with GITHUB_TOKEN")
        assert not await office.ci.note(job_id, "", "token", "no CI with GITHUB_TOKEN")
        assert await office.ci.notes(job_id) == (
            "no CI with GITHUB_TOKEN",
            "CI did not run: approval",
            "🔁 `tests` … flaky",
        )
    finally:
        await office.close()


def test_a_resting_head_is_looked_at_for_ci_once_after_the_wait() -> None:
    assert ci_rounds.watch(seen_at=None, ran=False, now=100.0, wait_s=900) == "seen"
    assert ci_rounds.watch(seen_at=100.0, ran=False, now=999.0, wait_s=900) is None
    assert ci_rounds.watch(seen_at=100.0, ran=False, now=1000.0, wait_s=900) == "look"
    assert ci_rounds.watch(seen_at=100.0, ran=True, now=5000.0, wait_s=900) is None
    # checks that completed while it was a draft are decided at first sight, once
    assert ci_rounds.watch(seen_at=None, ran=False, now=1.0, wait_s=900, deferred=True) == "decide"
    assert ci_rounds.watch(seen_at=1.0, ran=True, now=2.0, wait_s=900, deferred=True) is None
    assert "No CI ran on aaaaaaaaaaaa in the 15 minutes" in ci_rounds.no_ci_note(SHA, minutes=15)


async def test_checks_deferred_on_a_draft_are_taken_once_and_again_after_a_failure(
    tmp_path: Path,
) -> None:
    """The ready delivery and the sweep may both look: one takes the head's deferred checks;
    a decision that fails defers them again, and the look after takes them."""
    office, _, job_id = await delivered(tmp_path)
    try:
        assert not await office.ci.take_deferred(job_id, SHA)  # nothing deferred
        await office.ci.defer(job_id, SHA)
        assert (await office.ci.facts(job_id, SHA)).deferred
        assert await office.ci.watch(job_id, SHA, now=1.0, wait_s=900) == "decide"
        assert await office.ci.take_deferred(job_id, SHA)
        assert not await office.ci.take_deferred(job_id, SHA)  # the other look: not twice
        assert not (await office.ci.facts(job_id, SHA)).deferred
        await office.ci.defer(job_id, SHA)  # the decision failed: deferred again
        assert await office.ci.take_deferred(job_id, SHA)
        await office.ci.ran(job_id, SHA)
        assert await office.ci.watch(job_id, SHA, now=2.0, wait_s=900) is None
    finally:
        await office.close()
