"""The tracking comment on GitHub, against the stand-in in-process: a change of phase is
shown at once, progress alone (a round's answered count, a task's state) at most once per
progress interval, so a round's edits do not grow with its points."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from app_harness import office_forge
from fakehub_support import app_hub
from local_repo import make_repo as repository
from test_budget_gate import billed, open_office, project, start

from bot.fakehub.hub import FakeGitHub
from bot.github.client import GitHubApp
from bot.github.subject import Subject
from orchestrator.api import JobDriver, JobStatus

OWNER, REPO = "octo", "widgets"
INTERVAL = 60.0


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def hub(tmp_path: Path, pem: str) -> FakeGitHub:
    return app_hub(tmp_path / "hub", pem, alice="maintain")


def writes(hub: FakeGitHub) -> list[str]:
    """The App's writes to issue comments so far, as `POST` or `PATCH`."""
    wrote = [r for r in hub.requests if r.method in ("POST", "PATCH")]
    return [r.method for r in wrote if "/comments" in r.path]


def round_line(answered: int) -> tuple[str, ...]:
    return (f"round 1 (`@alice`): 150 point(s), {answered} answered; running",)


async def test_progress_is_coalesced_and_a_new_phase_is_shown_at_once(
    hub: FakeGitHub, github: GitHubApp, tmp_path: Path
) -> None:
    number = hub.open_issue(OWNER, REPO, title="A changelog", body="b", author="alice")
    text = project("max_usd: null")
    office = await open_office(tmp_path / "home", text, billed())
    clock = Clock()
    try:
        job_id = await start(office, repository(tmp_path / "widgets"), text)
        subject = Subject(OWNER, REPO, number, 1, "main", "t", "alice", "alice", "teaparty")
        forge = office_forge(
            github,
            office,
            subject,
            identity=await github.identity(),
            progress_interval_s=INTERVAL,
            clock=clock,
        )
        base: JobStatus = await JobDriver(office, lambda _: _none()).status(job_id)
        working = replace(base, state="working", rounds=round_line(0))
        await forge.show(working)
        assert writes(hub) == ["POST"]
        for answered in range(1, 50):  # the lead answers point after point
            clock.now += 1
            await forge.show(replace(working, rounds=round_line(answered)))
        assert writes(hub) == ["POST"], "progress alone waits for the interval"
        clock.now += INTERVAL
        await forge.show(replace(working, rounds=round_line(50)))
        assert writes(hub) == ["POST", "PATCH"]
        clock.now += 1
        await forge.show(replace(working, state="done", rounds=round_line(150)))
        assert writes(hub) == ["POST", "PATCH", "PATCH"], "a new phase is shown at once"
    finally:
        await office.close()
    (tracking,) = [c.body for c in hub.comments(OWNER, REPO, number)]
    assert "150 point(s), 150 answered" in tracking


async def _none() -> None:
    return None
