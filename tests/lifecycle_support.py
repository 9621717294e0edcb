"""The App's runtime over the local GitHub stand-in, stepped by hand, for the lifecycle tests.

Nothing listens for the stand-in's webhooks: a test hands each delivery to the service as the
delivery worker would (`World.handle`), and runs a job to its pull request with the scripted
models (`World.run_to_pull`). A job runs only when a test says so, so a review round started
by a lifecycle event stays exactly where the event left it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from app_harness import OWNER, bodies, unserved, until
from local_repo import committed

from bot.fakehub.hub import FakeGitHub
from bot.fakehub.webhooks import SentDelivery
from bot.server.runtime import Runtime
from orchestrator.api import Delivery, JobRecord, JobState

REPO = "gadgets"
PROJECT = "humans: {decider: alice}\ngates: {plan: never}\n"


def source_repo(path: Path) -> Path:
    """A repository whose project lets a job run to its pull request with no question."""
    return committed(path, {".teaparty/project.yaml": PROJECT, "README.md": "gadgets\n"})


def git(repo: Path, *args: str) -> str:
    """git's output in a repository (bare or not)."""
    done = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    return done.stdout.decode()


@dataclass
class World:
    """The stand-in, the App's runtime over it, and the state directory."""

    hub: FakeGitHub
    runtime: Runtime
    home: Path
    api_url: str
    pem: str

    async def handle(self, delivery: SentDelivery) -> tuple[str, int | None]:
        """Hand one delivery to the service, as the delivery worker would."""
        return await self.runtime.service.handle(
            Delivery(delivery.delivery_id, delivery.event, delivery.action, delivery.body, 0)
        )

    def sent(self, event: str, action: str) -> SentDelivery:
        """The newest delivery of `event.action` the stand-in sent."""
        return next(
            d for d in reversed(self.hub.deliveries) if (d.event, d.action) == (event, action)
        )

    async def settled(self) -> None:
        """Every sync the runtime started has ended."""
        await until(lambda: not self.runtime._syncing, what="the App's syncs to end")

    async def label(self, number: int, sender: str = "alice") -> tuple[str, int | None]:
        """Add the trigger label as `sender` and hand the delivery over."""
        await self.hub.label_issue(OWNER, REPO, number, "teaparty", sender=sender)
        return await self.handle(self.sent("issues", "labeled"))

    async def run(self, job_id: int) -> JobState:
        """Run the job and sync it until it is done, failed, cancelled or waits."""
        office, driver = self.runtime.office, self.runtime.service.driver
        while (state := await driver.sync(job_id)) not in ("done", "failed", "cancelled"):
            if state == "waiting":
                return state
            await office.run_until_idle(job_id)
        await self.settled()
        return state

    async def run_to_pull(self, title: str = "Add a note") -> tuple[int, int, int]:
        """Open an issue, label it, run its job to a pull request: (issue, pull, job)."""
        number = self.hub.open_issue(OWNER, REPO, title=title, body="Please.", author="alice")
        outcome, job_id = await self.label(number)
        assert job_id is not None, outcome
        assert await self.run(job_id) == "done"
        pull = await self.runtime.office.rounds.pull(job_id)
        assert pull is not None
        return number, pull.number, job_id

    async def job(self, job_id: int) -> JobRecord:
        """The job as the store has it now."""
        found = await self.runtime.office.records.job(job_id)
        assert found is not None
        return found

    def tracking(self, number: int) -> list[str]:
        """The issue's tracking comments (one per job), oldest first."""
        return bodies(self.hub, number, "job:", REPO)

    def payload(self, delivery: SentDelivery) -> dict[str, Any]:
        """A delivery's payload, decoded."""
        decoded: dict[str, Any] = json.loads(delivery.body)
        return decoded


@pytest.fixture
async def lifecycle(tmp_path: Path) -> AsyncIterator[World]:
    """alice (admin) and bob (write) on octo/gadgets; the App's runtime, not serving."""

    def people(hub: FakeGitHub) -> None:
        hub.add_repo(OWNER, REPO, source=source_repo(tmp_path / "src"))
        hub.add_user("alice", "admin")
        hub.add_user("bob", "write")

    async with unserved(tmp_path, prepare=people) as (hub, runtime, api_url, pem):
        yield World(hub, runtime, tmp_path / "home", api_url, pem)
    assert hub.violations == [], hub.violations
