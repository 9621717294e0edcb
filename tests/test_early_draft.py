"""The early draft in the engine: a scripted job of two tasks on a real repository and a
real store, the JobDriver syncing it through a forge that really pushes to a remote whose
every ref update is logged.

The draft opens once the plan is approved (with the plan gate off, once a task starts),
each task merge is one push, the draft is made ready at the end, a crash between a push and
its record pushes nothing twice, a refused push is tried again at the next sync and never
forced, and a review round pushes only through its own delivery.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import demo_office
from fakes import HeldJob, PushingForge, one_forge
from local_repo import git, make_repo
from test_app_early_draft import TwoTasks

from bot.local_forge import LocalForge
from orchestrator.bus.events import Event
from orchestrator.core.messages import job_conversation_id
from orchestrator.jobs import early_draft
from orchestrator.jobs.driver import JobDriver
from orchestrator.jobs.handle import JobHandle
from orchestrator.jobs.ports import Delivered, DraftForge
from orchestrator.jobs.round_records import Feedback, Point

EARLY = "humans: {decider: carol}\npull_request: {draft: early}\n"


@dataclass
class DraftingForge(PushingForge):
    """A PushingForge whose change request opens as a draft (pull request 7)."""

    drafts: list[int] = field(default_factory=list)
    readied: list[int] = field(default_factory=list)
    heads: list[str] = field(default_factory=list)  # each head the open draft was told of
    closed: list[tuple[int, str]] = field(default_factory=list)

    async def open_draft(self, status: Any, job: Any) -> Delivered:
        self.drafts.append(status.job_id)
        return Delivered("fake://pull/7", 7)

    async def draft_pushed(self, status: Any, head: str) -> None:
        self.heads.append(head)

    async def mark_ready(self, status: Any, number: int) -> None:
        self.readied.append(number)

    async def close_draft(self, status: Any, number: int, why: str) -> None:
        self.closed.append((number, why))

    async def deliver(self, status: Any, job: Any) -> Delivered:
        await super().deliver(status, job)
        return Delivered("fake://pull/7", 7)


@dataclass
class Early(HeldJob):
    forge: DraftingForge
    slug = "two"

    def updates(self) -> list[str]:
        """Each commit the remote's job branch was moved to, oldest first (its reflog)."""
        found = git(self.repo, "reflog", "show", "--format=%H", f"refs/heads/{self.branch}")
        return found.split()[::-1]

    def first_parents(self) -> list[str]:
        return git(
            self.repo, "rev-list", "--first-parent", "--reverse", f"main..{self.branch}"
        ).split()

    def subject(self, commit: str) -> str:
        return git(self.repo, "show", "-s", "--format=%s", commit).strip()


@asynccontextmanager
async def early(tmp_path: Path, project: str = EARLY) -> AsyncIterator[Early]:
    """A two-task job of an early-draft project; its plan gate is left for the test."""
    remote = make_repo(tmp_path / "widgets")
    git(remote, "config", "core.logAllRefUpdates", "always")
    office = await demo_office.open_office(tmp_path / "home", project, TwoTasks("docs/two.md"))
    try:
        job_id = await demo_office.start_job(
            office,
            remote,
            project,
            title="Two things",
            body="Do two things.",
            slug="two",
            hand_off=demo_office.TO_LEAD,
        )
        forge = DraftingForge(office, remote=remote, held=("plan",))

        yield Early(office, forge, JobDriver(office, one_forge(forge)), remote, job_id)
    finally:
        await office.close()


async def test_one_push_per_merge_and_a_lost_record_pushes_nothing_twice(tmp_path: Path) -> None:
    async with early(tmp_path) as job:
        office, forge, job_id = job.office, job.forge, job.job_id
        plan = await job.waiting()
        assert forge.drafts == [], "no draft before the plan is approved"
        await office.answer_gate(plan.gate_id, text="yes", answered_by="carol")
        await job.driver.sync(job_id)
        assert forge.drafts == [job_id]
        (pushed,) = job.updates()
        assert job.subject(pushed) == early_draft.PLAN_COMMIT

        # A crash between that push and its record: the next sync pushes it again, which
        # moves no ref, and opens no second draft.
        space = await office.workspace.job(job_id)
        assert space is not None
        await office.records.record_forge_object(job_id, early_draft.PUSHED, space.base, "")
        await job.driver.sync(job_id)
        assert job.updates() == [pushed]
        again = await office.records.forge_object(job_id, early_draft.PUSHED)
        assert again is not None
        assert again.external_id == pushed, "pushed again, and recorded"
        assert forge.drafts == [job_id]

        assert await job.drive() == "done"
        pull = await office.rounds.pull(job_id)
        line = job.first_parents()
        assert job.updates() == line, "one push per first-parent commit"
        merges = [job.subject(c) for c in line if job.subject(c).startswith("Merge task")]
        assert merges == ["Merge task #1: One", "Merge task #2: Two"]
        assert forge.heads == [pushed], "the draft was told of the head its re-push left"
    assert forge.readied == [7]
    assert forge.closed == [], "a delivered draft is made ready, never closed"
    assert pull is not None
    assert (pull.number, pull.state) == (7, "open")


async def test_a_job_done_with_no_file_changed_closes_its_draft_once(tmp_path: Path) -> None:
    async with early(tmp_path) as job:
        office, forge, job_id = job.office, job.forge, job.job_id
        plan = await job.waiting()
        await office.answer_gate(plan.gate_id, text="yes", answered_by="carol")
        await job.driver.sync(job_id)
        assert forge.drafts == [job_id]
        space = await office.workspace.job(job_id)
        assert space is not None
        handle = JobHandle(job_id, job_conversation_id(job_id), space, created=False)
        assert await office.has_work(handle), "the plan's empty commit is a commit"
        assert await early_draft.changes_nothing(office, forge, handle), "but no change"
        status = await job.driver.status(job_id)
        await early_draft.close_unfinished(office, forge, status)
        assert forge.closed == [], "a working job's draft stays"
        ended = replace(status, state="done", result="Nothing needed doing.\nThe docs agree.")
        await early_draft.close_unfinished(office, forge, ended)
        await early_draft.close_unfinished(office, forge, ended)
        pull = await office.rounds.pull(job_id)
    assert forge.closed == [(7, "the job ended without a change to deliver: Nothing needed doing.")]
    assert pull is not None
    assert pull.state == "closed"


async def test_with_the_plan_gate_off_the_draft_opens_once_a_task_starts(tmp_path: Path) -> None:
    project = EARLY + "gates: {plan: never}\n"
    async with early(tmp_path, project) as job:
        assert await job.driver.sync(job.job_id) == "planning"
        assert job.forge.drafts == []

        async def on_event(_: Event) -> None:  # as the App syncs a job on its events
            await job.driver.sync(job.job_id)

        job.office.subscribe(on_event)
        assert await job.drive() == "done"
        await job.office.engine.events.drain()
        assert job.forge.drafts == [job.job_id]
        assert job.updates() == job.first_parents()
        assert job.forge.readied == [7]


async def test_a_refused_push_waits_for_the_next_sync_and_is_never_forced(tmp_path: Path) -> None:
    async with early(tmp_path) as job:
        plan = await job.waiting()
        theirs = tmp_path / "theirs"
        git(tmp_path, "clone", "-q", str(job.repo), str(theirs))
        git(theirs, "checkout", "-q", "-b", job.branch)
        (theirs / "NOTES.md").write_text("a person's commit\n")
        git(theirs, "add", ".")
        git(theirs, "-c", "user.name=p", "-c", "user.email=p@e", "commit", "-qm", "theirs")
        git(theirs, "push", "-q", "origin", job.branch)
        before = job.updates()
        await job.office.answer_gate(plan.gate_id, text="yes", answered_by="carol")
        assert await job.driver.sync(job.job_id) == "working"  # the push failed: said later
        assert job.updates() == before, "nothing forced over a person's commit"
        assert job.forge.drafts == []
        assert await job.office.records.forge_object(job.job_id, early_draft.PUSHED) is None


async def test_a_review_round_pushes_only_through_its_delivery(tmp_path: Path) -> None:
    async with early(tmp_path) as job:
        job.forge.answers = {"The plan:": "yes"}
        job.forge.held = ()
        assert await job.drive() == "done"
        delivered = job.updates()
        point = Point("review:1", "carol", "Add a date.")
        taken = await job.office.rounds.feedback(job.job_id, Feedback(("carol",), (point,)))
        assert taken.state == "running"
        assert await job.drive() == "done"
        assert len(job.forge.rounds_delivered) == 1
        assert job.updates() == delivered, "the round's merge waited for its delivery"
        assert job.forge.readied == [7]


async def test_a_review_of_the_draft_is_a_round_once_the_job_is_done(tmp_path: Path) -> None:
    async with early(tmp_path) as job:
        plan = await job.waiting()
        await job.office.answer_gate(plan.gate_id, text="yes", answered_by="carol")
        await job.driver.sync(job.job_id)
        point = Point("review:1", "carol", "Add a date.")
        taken = await job.office.rounds.feedback(job.job_id, Feedback(("carol",), (point,)))
        assert taken.state == "queued", "no round while the job works"
        assert await job.drive() == "done"
        (review,) = await job.office.rounds.of_job(job.job_id)
        assert (review.state, review.outcome) == ("delivered", "pushed and answered")
        assert len(job.forge.rounds_delivered) == 1


def test_the_terminal_forge_opens_no_draft() -> None:
    assert not issubclass(LocalForge, DraftForge)
