"""Waits as rows: work that may not be tried again before a time, and since when it waits.

A conversation whose model is overloaded or rate-limited, or a job whose forge asked it to
slow down (GitHub's rate limits), waits `until` a time kept in the store, so a restart waits
as long as the process it replaces would have, and an outage is measured from `since`, when
it began. A wait is not a failure: the work runs again by itself once it is due, and the
row goes when it succeeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from orchestrator.store.sqlite import Tx

WaitKind = Literal["model", "forge"]


@dataclass(frozen=True)
class Wait:
    """What waits (a conversation id, or `forge:{job}`), in which job, why, and until when."""

    wait_key: str
    job_id: int | None
    kind: WaitKind
    reason: str
    since: float
    until: float
    attempts: int


def forge_key(job_id: int) -> str:
    """The wait key of a job held back by its forge."""
    return f"forge:{job_id}"


_COLUMNS = "wait_key, job_id, kind, reason, since, until, attempts"


def record(
    tx: Tx, key: str, *, job_id: int | None, kind: WaitKind, reason: str, at: float, until: float
) -> Wait:
    """Wait `key` (of job `job_id`, None: of none) until `until`; a wait already under
    way keeps its `since` and counts on."""
    tx.execute(
        f"INSERT INTO waits ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, 1)"
        " ON CONFLICT (wait_key) DO UPDATE SET reason = excluded.reason,"
        " until = excluded.until, attempts = attempts + 1",
        (key, job_id, kind, reason, at, until),
    )
    found = of_key(tx, key)
    assert found is not None
    return found


def of_key(tx: Tx, key: str) -> Wait | None:
    """The wait under `key`, if any."""
    row = tx.execute(f"SELECT {_COLUMNS} FROM waits WHERE wait_key = ?", (key,)).fetchone()
    return None if row is None else Wait(*row)


def of_job(tx: Tx, job_id: int) -> list[Wait]:
    """The job's waits, the one ending last first."""
    rows = tx.execute(
        f"SELECT {_COLUMNS} FROM waits WHERE job_id = ? ORDER BY until DESC, wait_key", (job_id,)
    )
    return [Wait(*row) for row in rows]


def every(tx: Tx) -> list[Wait]:
    """Every wait in the store, soonest first."""
    return [Wait(*row) for row in tx.execute(f"SELECT {_COLUMNS} FROM waits ORDER BY until")]


def clear(tx: Tx, key: str) -> None:
    """The work under `key` succeeded: it no longer waits."""
    tx.execute("DELETE FROM waits WHERE wait_key = ?", (key,))


# Named for the modules whose own SQL named this table (issue 32).


def clear_job(tx: Tx, job_id: int) -> None:
    """Nothing of the job waits any more."""
    tx.execute("DELETE FROM waits WHERE job_id = ?", (job_id,))
