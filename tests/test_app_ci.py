"""CI is part of the job, end to end: a real `teaparty serve` and the local GitHub stand-in,
whose CI fails, passes, and passes when re-run as a test says.

A failing check on the pull request's head is re-run once, fails again, and starts one round
whose brief (which the scripted lead writes into the round's file) holds the failing test's
log lines; the round's push passes; after two automatic rounds the third failure waits for a
person. A check that passes when re-run is flaky and starts nothing. Without `actions`
permissions the job's log cannot be read and no job re-run: the round has what could be
read and the tracking comment says why.
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
from app_harness import OWNER, REPO, Served, Server, declined, served, until
from test_app_rounds import app_comments, delivered_pull

from bot.fakehub.ci_state import Annotation, Check
from bot.fakehub.hub import FakeGitHub
from bot.fakehub.state import DEFAULT_APP_PERMISSIONS

pytestmark = pytest.mark.timeout(300)

FAILED_LINE = "FAILED tests/test_widgets.py::test_adds - assert 3 == 4"
FAILING = Check(
    "tests",
    "failure",
    log=f"Run pytest -q\n..F.\n{FAILED_LINE}\n1 failed, 3 passed in 0.1s\n",
    annotations=(Annotation("tests/test_widgets.py", 12, "assert 3 == 4"),),
)
PASSING = Check("tests", "success", log="4 passed in 0.1s\n")


def _alice(hub: FakeGitHub) -> None:
    hub.add_user("alice", "maintain")


def _world(
    tmp_path: Path, permissions: dict[str, str], **env: str
) -> AbstractAsyncContextManager[Served]:
    return served(tmp_path, prepare=_alice, env=env, permissions=permissions)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[Served]:
    async with _world(tmp_path, dict(DEFAULT_APP_PERMISSIONS)) as made:
        yield made


def head(hub: FakeGitHub) -> tuple[str, str]:
    """The pull request's head branch and the commit it is at on the remote."""
    (pull,) = hub.pulls(OWNER, REPO)
    assert pull.pull is not None
    remote = hub.root / OWNER / f"{REPO}.git"
    return pull.pull.head_ref, git(remote, "rev-parse", pull.pull.head_ref)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def tracking(hub: FakeGitHub, issue: int) -> str:
    return app_comments(hub, issue, "job:")[0]


def rested_after(hub: FakeGitHub, issue: int, rounds: int) -> bool:
    """The job rests again with CI's round `rounds` pushed."""
    said = tracking(hub, issue)
    return (
        "✅" in said
        and f"round {rounds} (CI)" in said
        and "; pushed" in said.split(f"round {rounds} (CI)")[1].split("\n")[0]
    )


async def settled(server: Server) -> bool:
    return await server.pending() == 0


async def test_failing_checks_start_rounds_until_a_person_is_needed(world: Served) -> None:
    hub, server = world.hub, world.server
    issue, number, _ = await delivered_pull(hub, server)
    branch, first = head(hub)

    # A failing check is re-run once (it fails again), then round 1 works on it.
    await hub.run_checks(OWNER, REPO, first, [FAILING])
    await until(lambda: rested_after(hub, issue, 1), what="CI's round 1", limit=120)
    (rerun,) = hub.ci_reruns()
    assert rerun[0] == "actions/re-run-job-for-workflow-run"
    assert hub.log_reads()
    assert not any(token for _, token in hub.log_reads())  # the token stayed with the API
    _, second = head(hub)
    assert second != first
    remote = hub.root / OWNER / f"{REPO}.git"
    brief = git(remote, "show", f"{second}:docs/reviews/round-1.md")
    assert FAILED_LINE in brief  # the failing test's log lines reached the lead
    assert "tests/test_widgets.py:12 assert 3 == 4" in brief  # and its annotation
    assert "CI (its checks failed" in brief
    said = tracking(hub, issue)
    assert "**CI on the pull request**" in said
    assert "`tests` failed on" in said

    # The round's push passes: nothing starts.
    await hub.run_checks(OWNER, REPO, second, [PASSING])
    await until(lambda: settled(server), what="the passing suite handled")
    assert "round 2" not in tracking(hub, issue)

    # The next failure waits for the head's other suite to finish, then is round 2.
    lint = await hub.start_checks(OWNER, REPO, second, workflow="Lint")
    hub.plan_rerun(OWNER, REPO, FAILING)
    await hub.run_checks(OWNER, REPO, second, [FAILING])
    await until(lambda: settled(server), what="the failure read while Lint runs")
    assert len(hub.ci_reruns()) == 1  # nothing decided yet: not even a re-run
    await hub.finish_checks(OWNER, REPO, lint, [Check("lint", "success")])
    await until(lambda: rested_after(hub, issue, 2), what="CI's round 2", limit=120)
    _, third = head(hub)
    await hub.run_checks(OWNER, REPO, third, [FAILING])
    await until(lambda: "waits for a person" in tracking(hub, issue), what="the hold", limit=60)
    await until(lambda: settled(server), what="every delivery handled")
    assert "round 3" not in tracking(hub, issue)
    assert len(hub.ci_reruns()) == 3  # once per commit, never again for the held one

    # The same failure delivered again starts nothing (the facts are in the store).
    last = next(d for d in reversed(hub.deliveries) if d.event == "check_suite")
    await hub.redeliver(last.delivery_id)
    await until(lambda: settled(server), what="the redelivery handled")
    assert "round 3" not in tracking(hub, issue)
    assert len(hub.ci_reruns()) == 3


@pytest.fixture
async def checks_only(tmp_path: Path) -> AsyncIterator[Served]:
    """An installation that accepted `checks: write` and not `actions`."""
    async with _world(tmp_path, declined("actions")) as made:
        yield made


async def test_a_check_that_passes_when_re_run_is_flaky_and_without_actions_the_round_says_why(
    checks_only: Served,
) -> None:
    hub, server = checks_only.hub, checks_only.server
    issue, number, _ = await delivered_pull(hub, server)
    _, sha = head(hub)
    # Another app's check fails, and passes when rerequested: flaky, no round.
    hub.plan_rerun(OWNER, REPO, replace_name(PASSING, "lint"))
    await hub.run_checks(
        OWNER, REPO, sha, [replace_name(FAILING, "lint")], app="lint-ci", app_name="Lint CI"
    )
    await until(lambda: "flaky" in tracking(hub, issue), what="the flaky note", limit=60)
    await until(lambda: settled(server), what="every delivery handled")
    assert [op for op, _ in hub.ci_reruns()] == ["checks/rerequest-run"]
    assert "round 1" not in tracking(hub, issue)

    # Actions fails; the installation may neither re-run its job nor read its log.
    await hub.run_checks(OWNER, REPO, sha, [FAILING])
    await until(lambda: rested_after(hub, issue, 1), what="the degraded round", limit=120)
    said = tracking(hub, issue)
    assert "`actions: read`" in said
    assert "`actions: write`" in said
    assert hub.log_reads() == []
    _, after = head(hub)
    brief = git(hub.root / OWNER / f"{REPO}.git", "show", f"{after}:docs/reviews/round-1.md")
    assert "tests/test_widgets.py:12 assert 3 == 4" in brief  # annotations: checks: read
    assert "No log: the installation has not accepted `actions: read`" in brief


def replace_name(check: Check, name: str) -> Check:
    return Check(name, check.conclusion, check.log, check.summary, check.text, check.annotations)


@pytest.fixture
async def quick_to_miss_ci(tmp_path: Path) -> AsyncIterator[Served]:
    """An App that says a head had no CI one second after it saw it rest."""
    permissions = dict(DEFAULT_APP_PERMISSIONS)
    async with _world(tmp_path, permissions, TEAPARTY_CI_START="1") as made:
        yield made


async def test_a_pull_request_on_which_no_ci_runs_is_said_to_have_none(
    quick_to_miss_ci: Served,
) -> None:
    hub, server = quick_to_miss_ci.hub, quick_to_miss_ci.server
    issue, number, _ = await delivered_pull(hub, server)
    _, sha = head(hub)
    await until(lambda: "No CI ran on" in tracking(hub, issue), what="the no-CI note", limit=60)
    said = tracking(hub, issue)
    assert f"No CI ran on {sha[:12]}" in said
    assert "`on:` filters" in said


async def test_checks_that_fail_on_a_draft_are_decided_once_it_is_ready(world: Served) -> None:
    """A draft is not asked for review, and an early draft's head moves on as tasks merge:
    failing checks on it start nothing, not even a re-run, until it is ready again; then
    they are decided as their delivery would have been."""
    hub, server = world.hub, world.server
    issue, number, _ = await delivered_pull(hub, server)
    _, sha = head(hub)
    await hub.set_draft(OWNER, REPO, number, "alice")
    await until(lambda: settled(server), what="the conversion to a draft handled")
    await hub.run_checks(OWNER, REPO, sha, [FAILING])
    await until(lambda: settled(server), what="the failure on the draft read")
    assert hub.ci_reruns() == []
    assert "round 1" not in tracking(hub, issue)

    # GitHub fails the ready delivery's read of the suites: the pull request is open all the
    # same, and the App's sweep decides at its next look
    hub.fail_next("GET", r"/commits/[0-9a-f]{40}/check-suites", 502, times=5)
    await hub.set_draft(OWNER, REPO, number, "alice", draft=False)
    await until(lambda: rested_after(hub, issue, 1), what="CI's round 1, once ready", limit=120)
    assert any(r.status == 502 and "check-suites" in r.path for r in hub.requests)
    assert [op for op, _ in hub.ci_reruns()] == ["actions/re-run-job-for-workflow-run"]
    assert hub.violations == []
