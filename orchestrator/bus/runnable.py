"""Which conversations may run now, asked of each table's owner: those with work to do
(transactions.py), none a failure holds (failures.py), none of a job not ready or paused
(jobs.py), nor of one waiting on its decider's word on an issue edit (gates.py)."""

from __future__ import annotations

from orchestrator.bus import failures, gates
from orchestrator.bus import jobs as job_rows
from orchestrator.bus.transactions import with_work
from orchestrator.store.sqlite import Tx


def runnable(tx: Tx, job_id: int | None = None) -> list[str]:
    """Conversations with work to do: an unfinished invocation or a non-empty inbox (of one
    job's conversations, if `job_id` is given). None that a failure holds, nor of a job not
    ready or held."""
    candidates = with_work(tx, job_id)
    if not candidates:
        return []
    failed = failures.held_of(tx, [cid for cid, _ in candidates])
    stopped = job_rows.held_back(tx) | gates.editing(tx)
    return [cid for cid, job in candidates if cid not in failed and job not in stopped]


def held(tx: Tx, job_id: int) -> bool:
    """Whether the job is held: paused, or waiting on its decider's word on an issue edit."""
    job = job_rows.get(tx, job_id)
    return job is not None and (job.paused_by is not None or job_id in gates.editing(tx, job_id))
