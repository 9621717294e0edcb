"""The job page's read model: a job's tracking view, the hierarchy of its conversations as
it ran (office manager, lead, each task's mini-team and its members), what each level
used and cost, and one conversation's transcript at a time.

Read from a store opened read-only beside whoever holds it (JobViews). The page shows
totals for every conversation but loads a transcript only when one is opened, so a job of
thousands of messages costs one grouped count, not thousands of rows, to show.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from orchestrator.bus import jobs as job_rows
from orchestrator.bus import transactions as txn
from orchestrator.core.errors import JobNotFoundError
from orchestrator.core.messages import Message, Usage
from orchestrator.jobs.views import JobView, JobViews
from orchestrator.store.sqlite import Tx
from orchestrator.teams import board

ENDED = ("done", "cancelled", "failed")


@dataclass(frozen=True)
class Level:
    """One conversation in the hierarchy: who, under whom, for which task, and its totals."""

    conversation_id: str
    parent_id: str | None
    depth: int  # 0: the office manager's; each level under it one more
    agent: str
    task: int | None  # the number of the task it works on, if any
    active: bool
    messages: int
    usage: Usage
    cost_usd: float | None  # None: not priced
    last_message_id: int


@dataclass(frozen=True)
class JobPage:
    """A job as its page shows it."""

    view: JobView
    levels: tuple[Level, ...]  # depth first, each conversation after its parent
    readers: bool = False  # its project opens its page to whoever can read the repository

    @property
    def version(self) -> tuple[object, ...]:
        """What changes whenever anything the page shows does (a live page redraws then)."""
        summary = self.view.summary
        return (
            summary.state,
            summary.step,
            summary.open_gates,
            tuple((t.number, t.state) for t in self.view.tasks),
            tuple((g.gate_id, g.answer, g.closed_at) for g in self.view.gates),
            max((level.last_message_id for level in self.levels), default=0),
            len(self.levels),
        )


async def job_page(views: JobViews, job_id: int) -> JobPage:
    """The job's page (JobNotFoundError: no such job)."""
    view = await views.job(job_id)
    if views.store is None:
        raise JobNotFoundError(job_id)
    stored, listed, tallies, numbers = await views.store.read(lambda tx: _facts(tx, job_id))
    if stored is None:
        raise JobNotFoundError(job_id)
    by_parent: dict[str | None, list[txn.Listed]] = {}
    known = {c.conversation_id for c in listed}
    for conversation in listed:
        parent = conversation.parent_id if conversation.parent_id in known else None
        by_parent.setdefault(parent, []).append(conversation)
    levels: list[Level] = []

    def walk(parent: str | None, depth: int) -> None:
        for conversation in by_parent.get(parent, []):
            tally = tallies.get(conversation.conversation_id, txn.Tally(0, Usage(), 0))
            spent = {conversation.agent: tally.usage}
            cost = views.pricing.cost(stored.project, stored.text, spent)
            task = numbers.get(conversation.task_id) if conversation.task_id else None
            levels.append(
                Level(
                    conversation.conversation_id, conversation.parent_id, depth,
                    conversation.agent, task, conversation.active, tally.messages,
                    tally.usage, cost, tally.last_message_id,
                )
            )  # fmt: skip
            walk(conversation.conversation_id, depth + 1)

    walk(None, 0)
    if view.summary.state in ENDED:  # its conversations may stay open; none works on
        levels = [replace(level, active=False) for level in levels]
    project = views.pricing.project(stored.project, stored.text)
    return JobPage(view, tuple(levels), readers=project is not None and project.job_page.readers)


async def transcript(
    views: JobViews, job_id: int, conversation_id: str
) -> tuple[Level, tuple[Message, ...]]:
    """One conversation of the job and its messages (JobNotFoundError when the job has no
    such conversation: an id of another job's is not shown through this one's page)."""
    page = await job_page(views, job_id)
    level = next((lv for lv in page.levels if lv.conversation_id == conversation_id), None)
    if level is None or views.store is None:
        raise JobNotFoundError(job_id)
    messages = await views.store.read(lambda tx: txn.transcript(tx, conversation_id))
    return level, messages


def _facts(
    tx: Tx, job_id: int
) -> tuple[job_rows.StoredProject | None, list[txn.Listed], dict[str, txn.Tally], dict[int, int]]:
    """In one read: the job's project, its conversations, their totals, its tasks' numbers."""
    listed = txn.of_job(tx, job_id)
    numbers: dict[int, int] = {}
    for task_id in {c.task_id for c in listed if c.task_id is not None}:
        found = board.locate(tx, task_id)
        if found is not None:
            numbers[task_id] = found[1]
    return job_rows.stored_project(tx, job_id), listed, txn.tallies(tx, job_id), numbers
