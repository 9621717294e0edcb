"""The early draft in the engine: a scripted job of two tasks on a real repository and a
real store, the JobDriver syncing it through a forge that really pushes to a remote whose
every ref update is logged.

The draft opens once the plan is approved, each task merge is one push, the draft is made
ready at the end, and a crash between a push and its record pushes nothing twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import demo_office
from fakes import HeldJob, PushingForge
from local_repo import git, make_repo
from test_app_early_draft import TwoTasks

from orchestrator.jobs import early_draft
from orchestrator.jobs.driver import JobDriver
from orchestrator.jobs.local_forge import LocalForge
from orchestrator.jobs.ports import Delivered, DraftForge, Forge

EARLY = "humans: {decider: carol}\npull_request: {draft: early}\n"


@dataclass
class DraftingForge(PushingForge):
    """A PushingForge whose change request opens as a draft (pull request 7)."""

    drafts: list[int] = field(default_factory=list)
    readied: list[int] = field(default_factory=list)

    async def open_draft(self, status: Any, job: Any) -> Delivered:
        self.drafts.append(status.job_id)
        return Delivered("fake://pull/7", 7)

    async def mark_ready(self, status: Any, number: int) -> None:
        self.readied.append(number)

    async def deliver(self, status: Any, job: Any) -> Delivered:
        await super().deliver(status, job)
        return Delivered("fake://pull/7", 7)


def _updates(remote: Path, branch: str) -> list[str]:
    return git(remote, "reflog", "show", "--format=%H", f"refs/heads/{branch}").split()[::-1]


def _first_parents(remote: Path, branch: str) -> list[str]:
    return git(remote, "rev-list", "--first-parent", "--reverse", f"main..{branch}").split()


async def test_one_push_per_merge_and_a_lost_record_pushes_nothing_twice(tmp_path: Path) -> None:
    remote = make_repo(tmp_path / "widgets")
    git(remote, "config", "core.logAllRefUpdates", "always")
    office = await demo_office.open_office(tmp_path / "home", EARLY, TwoTasks("docs/two.md"))
    try:
        job_id = await demo_office.start_job(
            office,
            remote,
            EARLY,
            title="Two things",
            body="Do two things.",
            slug="two",
            hand_off=demo_office.TO_LEAD,
        )
        forge = DraftingForge(office, remote=remote, held=("plan",))

        async def forges(_: int) -> Forge:
            return forge

        job = HeldJob(office, forge, JobDriver(office, forges), remote, job_id)
        plan = await job.waiting()
        assert forge.drafts == [], "no draft before the plan is approved"
        branch = f"teaparty/job-{job_id}-two"
        await office.answer_gate(plan.gate_id, text="yes", answered_by="carol")
        await job.driver.sync(job_id)
        assert forge.drafts == [job_id]
        (pushed,) = _updates(remote, branch)
        assert git(remote, "show", "-s", "--format=%s", pushed).strip() == early_draft.PLAN_COMMIT

        # A crash between that push and its record: the next sync pushes it again, which
        # moves no ref, and opens no second draft.
        space = await office.workspace.job(job_id)
        assert space is not None
        await office.records.record_forge_object(job_id, early_draft.PUSHED, space.base, "")
        await job.driver.sync(job_id)
        assert _updates(remote, branch) == [pushed]
        again = await office.records.forge_object(job_id, early_draft.PUSHED)
        assert again is not None
        assert again.external_id == pushed, "pushed again, and recorded"
        assert forge.drafts == [job_id]

        assert await job.drive() == "done"
        pull = await office.rounds.pull(job_id)
    finally:
        await office.close()
    line = _first_parents(remote, branch)
    assert _updates(remote, branch) == line, "one push per first-parent commit"
    subjects = [git(remote, "show", "-s", "--format=%s", c).strip() for c in line]
    assert [s for s in subjects if s.startswith("Merge task")] == [
        "Merge task #1: One",
        "Merge task #2: Two",
    ]
    assert forge.readied == [7]
    assert pull is not None
    assert (pull.number, pull.state) == (7, "open")


def test_the_terminal_forge_opens_no_draft() -> None:
    assert not issubclass(LocalForge, DraftForge)
