"""The job's `TeaParty` check run on its pull request, against the stand-in in-process: made
on the head the pull request opens with, moved through queued / in progress / completed with
the job and again with each review round (a new run per round; a round that pushes moves to a
run on the new head), found again after a restart, never made twice after a 5xx, and, on an
installation without `checks: write`, left out with the tracking comment saying why once."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app_harness import declined, office_forge
from fakehub_support import APP_ID, NAME, OWNER, app_client
from local_repo import make_repo as repository
from test_budget_gate import billed, open_office, project, start

from bot.fakehub.hub import FakeGitHub
from bot.fakehub.state import DEFAULT_APP_PERMISSIONS
from bot.github.check_runs import OUTPUT_LIMIT, fit
from bot.github.client import GitHubApp
from bot.github.forge import GitHubForge
from bot.github.job_check import CHECK_NAME, check_state
from bot.github.subject import Subject
from bot.github.tracking import MARKER_PREFIX
from orchestrator.api import (
    Checked,
    JobCheck,
    JobDriver,
    JobHandle,
    JobStatus,
    Office,
    Ports,
    Pull,
    ReviewRound,
    Usage,
)
from orchestrator.jobs.levels import LevelCost
from orchestrator.workspace.layout import JobSpace

PAGES = "https://teaparty.example"
PAGE = f"{PAGES}/jobs/1"
BRANCH = "teaparty/job-1-changelog"
CHECKS = dict(DEFAULT_APP_PERMISSIONS)  # the manifest grants `checks: write`


@dataclass
class World:
    hub: FakeGitHub
    github: GitHubApp
    office: Office
    forge: GitHubForge
    job_id: int
    number: int
    work: Path

    async def status(self, **changes: Any) -> JobStatus:
        base = await JobDriver(self.office, lambda _: _none()).status(self.job_id)
        return replace(base, **changes)

    def handle(self) -> JobHandle:
        space = JobSpace(self.job_id, self.work, self.work, BRANCH, "main", self.work)
        return JobHandle(self.job_id, "c", space, created=False)

    def runs(self) -> list[tuple[str, str, str | None]]:
        """The App's check runs: (commit, status, conclusion), oldest first."""
        found = self.hub.app_check_runs(OWNER, NAME, check=CHECK_NAME)
        return [(r["head_sha"][:7], r["status"], r["conclusion"]) for r in found]

    def sent(self) -> list[tuple[str, str | None]]:
        """What the App asked of its check runs: (method, status or conclusion), in order."""
        asked = [r for r in self.hub.requests if r.path.startswith(f"/repos/{OWNER}/{NAME}/check")]
        return [
            (r.method, r.body.get("conclusion") or r.body.get("status"))
            for r in asked
            if r.method in ("POST", "PATCH") and r.status < 300
        ]


async def _none() -> None:
    return None


async def _world(tmp_path: Path, pem: str, permissions: dict[str, str]) -> AsyncIterator[World]:
    hub = FakeGitHub(tmp_path / "hub", app_id=APP_ID, private_key_pem=pem, permissions=permissions)
    hub.add_repo(OWNER, NAME)
    hub.add_user("alice", "maintain")
    number = hub.open_issue(OWNER, NAME, title="A changelog", body="b", author="alice")
    github = app_client(hub, pem, sleep=_no_sleep)
    text = project("max_usd: null")
    office = await open_office(tmp_path / "home", text, billed())
    try:
        job_id = await start(office, repository(tmp_path / "widgets"), text)
        subject = Subject(OWNER, NAME, number, 1, "main", "t", "alice", "alice", "teaparty")
        forge = office_forge(
            github,
            office,
            subject,
            identity=await github.identity(),
            progress_interval_s=0.0,
            pages_url=PAGES,
            notes=Ports.of(office).ci,
        )
        yield World(hub, github, office, forge, job_id, number, tmp_path / "work")
    finally:
        await office.close()
        await github.aclose()


async def _no_sleep(seconds: float) -> None:
    await asyncio.sleep(0)


def commit(hub: FakeGitHub, work: Path, text: str) -> str:
    """Commit `text` on the job branch in a clone of the stand-in's remote, push it; its sha."""
    person = {"NAME": "TeaParty", "EMAIL": "teaparty@example.com"}
    env = os.environ | {f"GIT_AUTHOR_{k}": v for k, v in person.items()}
    env |= {f"GIT_COMMITTER_{k}": v for k, v in person.items()}

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=work, env=env, check=True, capture_output=True)
        return done.stdout.decode().strip()

    if not work.exists():
        remote = hub.root / OWNER / f"{NAME}.git"
        subprocess.run(["git", "clone", "-q", str(remote), str(work)], check=True, env=env)
        git("checkout", "-q", "-b", BRANCH)
    (work / "CHANGELOG.md").write_text(text)
    git("add", "-A")
    git("commit", "-q", "-m", text)
    git("push", "-q", "origin", BRANCH)
    return git("rev-parse", "HEAD")


class Ledger:
    """The engine's half of a round's delivery: its push makes one more commit."""

    def __init__(self, world: World, number: int) -> None:
        self.world = world
        self.pull = Pull(world.job_id, number, "url", "open")

    async def push(self) -> str | None:
        return commit(self.world.hub, self.world.work, "round 1\n")

    async def replied(self, number: int, ref: str) -> None:
        raise AssertionError("the round has no points")


def passed(sha: str) -> tuple[JobCheck, ...]:
    return (JobCheck(None, Checked(sha, "passed")),)


async def test_the_check_run_moves_with_the_job_and_with_each_round(
    tmp_path: Path, pem: str
) -> None:
    async for w in _world(tmp_path, pem, CHECKS):
        await w.forge.show(await w.status(state="working"))
        assert w.runs() == [], "no pull request yet: no commit to check"
        first = commit(w.hub, w.work, "one\n")
        delivered = await w.forge.deliver(await w.status(state="delivering"), w.handle())
        assert w.runs() == [(first[:7], "in_progress", None)]
        lead = LevelCost("lead", Usage(input_tokens=1200), 0.25)
        await w.forge.show(await w.status(state="done", checks=passed(first), levels=(lead,)))
        assert w.runs() == [(first[:7], "completed", "success")]
        (made,) = w.hub.app_check_runs(OWNER, NAME, check=CHECK_NAME)
        assert made["details_url"] == PAGE
        assert made["external_id"] == f"teaparty:job:{w.job_id}:round:0:0"
        summary = made["output"]["summary"]
        assert f"[job {w.job_id}]({PAGE})" in summary
        assert delivered.link in summary
        assert "**Cost:** $" in summary
        assert "| lead | 1,200 | 0% | $0.2500 |" in summary
        assert made["output"]["title"].startswith(f"Job {w.job_id}: done, checks passed")

        # A review round: held at first (the pull request is a draft), then worked on.
        rounds = ("round 1 (`@alice`): 1 point(s), 0 answered; running",)
        await w.forge.show(await w.status(state="working", rounds=rounds, paused_by="alice"))
        await w.forge.show(await w.status(state="working", rounds=rounds))
        assert w.runs()[1:] == [(first[:7], "in_progress", None)], "a new run, same head"
        review = ReviewRound(1, w.job_id, 1, "running", ("alice",))
        working = await w.status(state="delivering", rounds=rounds)
        assert delivered.number is not None
        second = await w.forge.deliver_round(
            working, w.handle(), review, Ledger(w, delivered.number)
        )
        assert second is not None
        await w.forge.show(await w.status(state="done", rounds=rounds, checks=passed(second)))
        assert (
            w.runs()
            == [
                (first[:7], "completed", "success"),
                (first[:7], "completed", "neutral"),  # superseded by the round's push
                (second[:7], "completed", "success"),
            ]
        )
        assert w.sent() == [
            ("POST", "in_progress"),
            ("PATCH", "success"),
            ("POST", "queued"),
            ("PATCH", "in_progress"),
            ("PATCH", "neutral"),
            ("POST", "in_progress"),
            ("PATCH", "success"),
        ]

        # A restart: another forge over the same store updates the run it recorded.
        again = office_forge(
            w.github, w.office, w.forge.subject, identity=w.forge.identity, pages_url=PAGES
        )
        await again.show(await w.status(state="failed", rounds=rounds, error="it broke"))
        assert w.runs()[-1] == (second[:7], "completed", "failure")
        assert len(w.runs()) == 3
        assert w.hub.violations == []


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


async def test_progress_alone_waits_for_the_interval_and_a_new_phase_does_not(
    tmp_path: Path, pem: str
) -> None:
    async for w in _world(tmp_path, pem, CHECKS):
        clock = Clock()
        forge = office_forge(
            w.github, w.office, w.forge.subject, identity=w.forge.identity, clock=clock
        )
        commit(w.hub, w.work, "one\n")
        await forge.deliver(await w.status(state="delivering"), w.handle())
        for step in range(5):  # the job works on: its step and cost move, its phase does not
            clock.now += 1
            await forge.show(await w.status(state="working", step=f"step {step}"))
        assert w.sent() == [("POST", "in_progress")]
        clock.now += 60
        await forge.show(await w.status(state="working", step="step 6"))
        await forge.show(await w.status(state="done"))
        assert w.sent() == [("POST", "in_progress"), ("PATCH", "in_progress"), ("PATCH", "neutral")]


async def test_a_5xx_on_create_does_not_make_two_check_runs(tmp_path: Path, pem: str) -> None:
    async for w in _world(tmp_path, pem, CHECKS):
        head = commit(w.hub, w.work, "one\n")
        # GitHub made the run and then answered 502: the client looks for it before retrying
        w.hub.fail_next("POST", rf"^/repos/{OWNER}/{NAME}/check-runs$", 502, apply=True)
        await w.forge.deliver(await w.status(state="delivering"), w.handle())
        await w.forge.show(await w.status(state="done"))
        assert w.runs() == [(head[:7], "completed", "neutral")]
        posts = [r.status for r in w.hub.requests if r.method == "POST" and "check-runs" in r.path]
        assert posts == [502]
        assert w.hub.violations == []


async def test_without_checks_write_the_job_goes_on_and_says_why_once(
    tmp_path: Path, pem: str
) -> None:
    async for w in _world(tmp_path, pem, declined("checks")):
        commit(w.hub, w.work, "one\n")
        await w.forge.deliver(await w.status(state="delivering"), w.handle())
        for _ in range(2):
            await w.forge.show(await w.status(state="done"))
        assert w.runs() == []
        refused = [r for r in w.hub.requests if "check-runs" in r.path]
        assert [(r.method, r.status) for r in refused] == [("GET", 403)], (
            "asked once for this head and round"
        )
        (tracking,) = [
            c.body for c in w.hub.comments(OWNER, NAME, w.number) if MARKER_PREFIX in c.body
        ]
        assert tracking.count("`TeaParty` check run") == 1
        assert "`checks: write` permission" in tracking
        assert w.hub.violations == []


def test_the_check_runs_state_follows_the_job() -> None:
    def state(**changes: Any) -> tuple[str, str | None]:
        return check_state(replace(STATUS, **changes))

    assert state(state="planning") == ("queued", None)
    assert state(state="working", paused_by="alice") == ("queued", None)
    assert state(state="waiting") == ("in_progress", None)
    assert state(state="done") == ("completed", "neutral")
    failing = (JobCheck(None, Checked("a" * 40, "failed")),)
    assert state(state="done", checks=failing) == ("completed", "failure")
    assert state(state="failed") == ("completed", "failure")
    assert state(state="cancelled") == ("completed", "cancelled")


def test_a_long_summary_is_cut_with_a_note() -> None:
    assert fit("short") == "short"
    cut = fit("x" * (OUTPUT_LIMIT + 10))
    assert len(cut) <= OUTPUT_LIMIT
    assert cut.endswith("at most 65,535 characters of a check run's summary)")


STATUS = JobStatus(1, "t", "working", "step", (), Usage(), 0.0, "b")
