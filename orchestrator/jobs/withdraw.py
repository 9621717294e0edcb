"""Withdrawing a job (`teaparty jobs cancel`): it ends as cancelled, in one transaction.

The job's row says withdrawn (and no longer held, if its decider had paused it), its open
gates are closed unanswered, its conversations are closed (nothing runs them again, and a
late answer reaches none), its unfinished tasks are cancelled, and nothing of it waits any
more. Before that transaction, this process's own runs of the job's conversations are
stopped, so no turn under way writes after it. The job's worktrees and branches stay, to
be looked at, until `teaparty jobs clean`.

`stop_work` stops an active job the same way but ends it complete: what it was doing became
moot (a review round whose pull request was merged, or whose branch was deleted).
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.bus import gates, waits
from orchestrator.bus import jobs as job_rows
from orchestrator.bus import transactions as txn
from orchestrator.bus.events import StateChanged
from orchestrator.core.errors import JobNotFoundError, JobStateError
from orchestrator.core.messages import job_conversation_id
from orchestrator.jobs import rounds
from orchestrator.jobs.office import Office
from orchestrator.store.sqlite import Tx, now
from orchestrator.teams.board import cancel_unfinished, log_event

ENDED = {"complete": "done", "withdrawn": "cancelled"}


@dataclass(frozen=True)
class Withdrawn:
    """What withdrawing a job changed; `already` when it was cancelled before (nothing did)."""

    job_id: int
    already: bool = False
    gates: tuple[int, ...] = ()  # closed unanswered
    conversations: int = 0  # stopped
    tasks: tuple[int, ...] = ()  # cancelled, by number

    def describe(self) -> str:
        """One line on what changed."""
        if self.already:
            return f"job {self.job_id} was already cancelled"
        return (
            f"job {self.job_id} cancelled: {_count(len(self.gates), 'open gate')} closed, "
            f"{_count(self.conversations, 'conversation')} stopped, "
            f"{_count(len(self.tasks), 'task')} cancelled"
        )


async def withdraw(office: Office, job_id: int, *, by: str, announce: bool = True) -> Withdrawn:
    """End the job as cancelled (see the module); `by` says who asked, for its log.

    Without `announce` no event says so (the App, uninstalled, has nowhere to show it).
    JobNotFoundError when there is no such job; JobStateError when it has ended otherwise.
    """
    record = await office.records.job(job_id)
    if record is None:
        raise JobNotFoundError(job_id)
    if record.state == "withdrawn":
        return Withdrawn(job_id, already=True)
    _check_active(job_id, record.state)
    await stop_runs(office, job_id)
    withdrawn = await office.engine.store.write(lambda tx: withdraw_rows(tx, job_id, by=by))
    if announce:  # the App's runtime syncs a job on its events: the issue shows it cancelled
        office.engine.events.publish(StateChanged(job_conversation_id(job_id), "closed"))
    return withdrawn


async def stop_work(office: Office, job_id: int, *, why: str) -> Withdrawn | None:
    """Stop what an active job runs, as `withdraw` does, and end it complete with its review
    round stopped (`why`: what made the work moot); None when the job was not active."""
    record = await office.records.job(job_id)
    if record is None:
        raise JobNotFoundError(job_id)
    if record.state != "active":
        return None
    await stop_runs(office, job_id)

    def write(tx: Tx) -> Withdrawn | None:
        row = job_rows.get(tx, job_id)
        if row is None or row.state != "active":  # it came to rest meanwhile
            return None
        rounds.stop_running(tx, job_id, why=why)
        return _end_rows(tx, job_id, state="complete", event="job stopped", detail=why)

    stopped = await office.engine.store.write(write)
    if stopped is not None:
        office.engine.events.publish(StateChanged(job_conversation_id(job_id), "closed"))
    return stopped


async def stop_runs(office: Office, job_id: int) -> None:
    """Stop this process's runs of the job's conversations, and of any they opened meanwhile."""
    stopped: set[str] = set()
    while True:
        active = set(await office.engine.store.read(lambda tx: _active_conversations(tx, job_id)))
        if active <= stopped:
            return
        await office.engine.scheduler.stop(active - stopped)
        stopped |= active


def withdraw_rows(tx: Tx, job_id: int, *, by: str) -> Withdrawn:
    """The transaction that ends an active job as cancelled (see the module)."""
    row = job_rows.get(tx, job_id)
    if row is None:
        raise JobNotFoundError(job_id)
    _check_active(job_id, row.state)
    return _end_rows(tx, job_id, state="withdrawn", event="job cancelled", detail=f"by {by}")


def _end_rows(tx: Tx, job_id: int, *, state: str, event: str, detail: str) -> Withdrawn:
    """End an active job as `state`: gates, conversations and unfinished tasks closed."""
    at = now()
    job_rows.end(tx, job_id, state, at=at)
    closed = gates.close_every(tx, job_id, at=at)
    conversations = txn.close_job(tx, job_id, at=at)
    tasks = cancel_unfinished(tx, job_id, at=at)
    waits.clear_job(tx, job_id)
    log_event(tx, job_id, None, event, detail)
    return Withdrawn(job_id, False, tuple(sorted(closed)), len(conversations), tuple(sorted(tasks)))


def _check_active(job_id: int, state: str) -> None:
    if state != "active":
        raise JobStateError(
            f"job {job_id} has already ended ({ENDED.get(state, state)}): nothing to cancel"
        )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _active_conversations(tx: Tx, job_id: int) -> list[str]:
    return [c.conversation_id for c in txn.of_job(tx, job_id) if c.active]
