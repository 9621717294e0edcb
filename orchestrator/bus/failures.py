"""Failures as rows: a conversation that raised, a job whose delivery or workspace failed.

A failure stays until someone asks for a retry (`clear`): the scheduler does not run a
failed conversation again on its own, after a restart or a wake, and a job's status says
"failed" for as long as one of its rows is here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from orchestrator.store.sqlite import Tx, now

FailureKind = Literal["conversation", "delivery", "workspace"]
JobFailureKind = Literal["delivery", "workspace"]


@dataclass(frozen=True)
class Failure:
    """What failed (a conversation id, `delivery:{job}`, `workspace:{job}`), where, and why."""

    failure_key: str
    job_id: int | None
    kind: FailureKind
    reason: str
    failed_at: float


def record_conversation(tx: Tx, conversation_id: str, reason: str, *, job_id: int | None) -> None:
    """A conversation of job `job_id` (None: of none) raised: it runs again only after
    `clear`."""
    tx.execute(
        "INSERT INTO failures (failure_key, job_id, kind, reason, failed_at)"
        " VALUES (?, ?, 'conversation', ?, ?) ON CONFLICT (failure_key) DO UPDATE SET"
        " reason = excluded.reason, failed_at = excluded.failed_at",
        (conversation_id, job_id, reason, now()),
    )


def record_job(tx: Tx, job_id: int, kind: JobFailureKind, reason: str) -> None:
    """Publishing a job's work, or making its workspace, failed: tried again after `clear`."""
    tx.execute(
        "INSERT INTO failures (failure_key, job_id, kind, reason, failed_at)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (failure_key) DO UPDATE SET"
        " reason = excluded.reason, failed_at = excluded.failed_at",
        (f"{kind}:{job_id}", job_id, kind, reason, now()),
    )


def of_job(tx: Tx, job_id: int | None) -> list[Failure]:
    """The failures of one job (None: of conversations outside any job), oldest first."""
    rows = tx.execute(
        "SELECT failure_key, job_id, kind, reason, failed_at FROM failures"
        " WHERE job_id IS ? ORDER BY failed_at, failure_key",
        (job_id,),
    )
    return [Failure(*row) for row in rows]


def every(tx: Tx) -> list[Failure]:
    """Every failure in the store, oldest first."""
    rows = tx.execute(
        "SELECT failure_key, job_id, kind, reason, failed_at FROM failures"
        " ORDER BY failed_at, failure_key"
    )
    return [Failure(*row) for row in rows]


def clear(tx: Tx, job_id: int) -> list[Failure]:
    """Forget a job's failures (a retry was asked for); the ones forgotten."""
    found = of_job(tx, job_id)
    tx.execute("DELETE FROM failures WHERE job_id = ?", (job_id,))
    return found


# For the bus's other modules (issue 32: one owner per table).


def failed(tx: Tx, failure_key: str) -> bool:
    """Whether a failure row holds `failure_key` (a conversation id) until a retry."""
    row = tx.execute("SELECT 1 FROM failures WHERE failure_key = ?", (failure_key,)).fetchone()
    return row is not None


def held_of(tx: Tx, keys: Sequence[str]) -> set[str]:
    """Those of `keys` (conversation ids) a failure row holds: looked up by key, so the
    scheduler's every pass reads only its candidates' rows, not the store's whole history."""
    found: set[str] = set()
    for start in range(0, len(keys), 500):  # SQLite's bound on a statement's parameters
        chunk = keys[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows = tx.execute(f"SELECT failure_key FROM failures WHERE failure_key IN ({marks})", chunk)
        found |= {str(key) for (key,) in rows}
    return found
