"""The read side of `teaparty jobs`, in process, beside the Office that holds the store:
costs priced as the budget prices them, waits with their end, keys read back into where a
job comes from, a followed log that ends with its job, an older store migrated to be read."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import time
from pathlib import Path

import pytest
from jobs_harness import Parking, drive, open_office, start
from local_repo import make_repo

from orchestrator.config import shipped_org_dir
from orchestrator.core.errors import JobNotFoundError, JobStateError, StoreVersionError
from orchestrator.core.messages import AssistantTurn, Usage
from orchestrator.core.model import ModelRequest
from orchestrator.jobs import admin
from orchestrator.jobs.offline import DemoModel
from orchestrator.jobs.views import JobOrigin, JobViews
from orchestrator.jobs.withdraw import withdraw
from orchestrator.store.migrations import MIGRATIONS
from orchestrator.store.sqlite import Store

ORG = shipped_org_dir()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "widgets")


class Billed:
    """The demo model, billing 1,000 tokens in and 100 out for every turn."""

    def __init__(self) -> None:
        self.demo = DemoModel()

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        turn = await self.demo.complete(request)
        return dataclasses.replace(turn, usage=Usage(1_000, 100, 50, 0))


async def test_a_job_is_priced_as_its_budget_prices_it_and_says_what_it_waits_for(
    repo: Path, tmp_path: Path
) -> None:
    billed = Billed()
    office = await open_office(tmp_path / "home", models=lambda _: billed)
    try:
        job_id = await start(office, repo, "Add docs")
        assert await drive(office, Parking(office), job_id) == "waiting"
        spent = await office.budget.spent(job_id)
        assert spent.usd > 0
        until = time.time() + 600
        await office.wait_for_forge(job_id, "rate limited", until=until, at=time.time())
        async with JobViews.open(tmp_path / "home", org_dir=ORG) as views:
            [summary] = await views.jobs()
            assert summary.cost_usd == pytest.approx(spent.usd)
            assert summary.usage == spent.usage
            assert summary.waiting is not None
            assert (summary.waiting.kind, summary.waiting.until) == ("forge", until)
            assert (summary.state, summary.open_gates) == ("waiting", 1)
        unpriced = JobViews(None, dataclasses.replace(views.pricing, prices=None))
        assert await unpriced.jobs() == []
        async with JobViews.open(tmp_path / "home", org_dir=tmp_path / "no-org") as views:
            [summary] = await views.jobs()
            assert summary.cost_usd is None, "no organisation, no prices: not priced wrong"
    finally:
        await office.close()


def test_a_jobs_key_says_where_it_comes_from() -> None:
    local = JobOrigin.of_key("local:/home/me/my:repo:0123abcd")
    assert (local.forge, local.repository, local.issue) == ("local", "/home/me/my:repo", None)
    assert local.matches("/home/me/my:repo")
    assert local.matches("my:repo")
    assert not local.matches("me")
    github = JobOrigin.of_key("github:Octo/Widgets#12")
    assert (github.forge, github.repository, github.issue) == ("github", "Octo/Widgets", 12)
    assert github.matches("octo/widgets")
    assert github.matches("widgets")
    assert not github.matches("octo")
    other = JobOrigin.of_key("job-7")
    assert (other.forge, other.repository) == ("other", None)
    assert not other.matches("job-7")


async def test_a_followed_log_ends_when_its_job_is_cancelled(repo: Path, tmp_path: Path) -> None:
    office = await open_office(tmp_path / "home")
    try:
        job_id = await start(office, repo, "Add docs")
        assert await drive(office, Parking(office), job_id) == "waiting"
        seen: list[int] = []

        async def meanwhile(seconds: float) -> None:
            await withdraw(office, job_id, by="alice")

        async with JobViews.open(tmp_path / "home", org_dir=ORG) as views:
            async for entry in views.follow(job_id, sleep=meanwhile):
                seen.append(entry.message_id)
            assert seen == [e.message_id for e in await views.log(job_id)]
            assert len(seen) > 3
            with pytest.raises(JobNotFoundError):
                await views.log(job_id + 1)
    finally:
        await office.close()


async def test_an_older_store_is_migrated_to_be_read_unless_it_is_held(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()

    def downgrade() -> None:
        """A store as the version before the last migration left it."""
        (home / "teaparty.db").unlink(missing_ok=True)
        with sqlite3.connect(home / "teaparty.db") as db:
            for script in MIGRATIONS[:-1]:
                db.executescript(script)
            db.execute(f"PRAGMA user_version={len(MIGRATIONS) - 1}")

    downgrade()
    async with JobViews.open(home, org_dir=ORG) as views:
        assert await views.jobs() == []
    downgrade()
    holder = await Store.open(home / "teaparty.db", exclusive=True)  # an older teaparty, say
    try:
        with sqlite3.connect(home / "teaparty.db") as db:
            db.execute(f"PRAGMA user_version={len(MIGRATIONS) - 1}")
        with pytest.raises(StoreVersionError, match="the teaparty holding it is older"):
            async with JobViews.open(home, org_dir=ORG):
                pass
    finally:
        await holder.close()


async def test_answers_go_to_local_jobs_open_questions_only(repo: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    office = await open_office(home)
    try:
        local = await start(office, repo, "Add docs")
        github = await start(office, repo, "Fix typo", key="github:octo/widgets#7")
        for job_id in (local, github):
            assert await drive(office, Parking(office), job_id) == "waiting"
        gates = {g.job_id: g.gate_id for g in await office.open_gates()}
    finally:
        await office.close()
    with pytest.raises(JobStateError, match="GitHub job: .* octo/widgets#7"):
        await admin.answer_job(home, github, gates[github], text="yes", org_dir=ORG)
    with pytest.raises(JobStateError, match=f"gate {gates[github]} is not an open question"):
        await admin.answer_job(home, local, gates[github], text="yes", org_dir=ORG)
    answered = await admin.answer_job(home, local, gates[local], text="yes", org_dir=ORG)
    assert (answered.answer, answered.answered_by) == ("yes", "carol")
    with pytest.raises(JobNotFoundError):
        await admin.answer_job(home, 99, 1, text="yes", org_dir=ORG)
    with pytest.raises(JobNotFoundError):
        await admin.answer_job(tmp_path / "nowhere", 1, 1, text="yes", org_dir=ORG)

    cancel = await admin.cancel_job(home, local, org_dir=ORG, by="alice")
    assert (cancel.here, cancel.command.state) == (True, "done")
    with pytest.raises(JobStateError, match="has ended \\(cancelled\\)"):
        await admin.answer_job(home, local, gates[local], text="yes", org_dir=ORG)


async def test_a_cancel_beside_a_holder_waits_for_it_then_leaves_the_request(
    repo: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    office = await open_office(home)
    try:
        job_id = await start(office, repo, "Add docs")
        waited: list[float] = []

        async def sleep(seconds: float) -> None:
            waited.append(seconds)
            await asyncio.sleep(0)

        cancel = await admin.cancel_job(
            home, job_id, org_dir=ORG, by="alice", wait_s=0.05, sleep=sleep
        )
        assert (cancel.here, cancel.command.state) == (False, "pending")
        assert waited, "it looked again while it waited"
        with pytest.raises(JobNotFoundError):
            await admin.cancel_job(tmp_path / "nowhere", 1, org_dir=ORG, by="alice")
    finally:
        await office.close()
