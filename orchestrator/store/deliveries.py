"""Deliveries from the outside world, stored before they are acknowledged and then worked off.

A delivery is committed before its sender hears 202, deduplicated by its id (a redelivery
is acknowledged and does nothing) and by its subject when the edge names one (`comment:ID`:
the same comment read again under another id is a redelivery too), and consumed by a
worker: one that fails is retried with exponential backoff and, after its attempts, marked
failed with the error kept.
Nothing is deleted until it is done and older than the redelivery window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from orchestrator.store.sqlite import Store, Tx, now

MAX_ATTEMPTS = 6
BACKOFF_BASE_S = 2.0
BACKOFF_CAP_S = 600.0
KEEP_DONE_S = 7 * 24 * 3600.0  # GitHub redelivers for 3 days; ids are kept longer than that

DeliveryState = Literal["pending", "done", "failed"]


@dataclass(frozen=True)
class Delivery:
    """One stored delivery."""

    delivery_id: str
    event: str
    action: str
    body: bytes
    attempts: int


@dataclass(frozen=True)
class DeliveryRecord:
    """A delivery's bookkeeping, for status and tests."""

    delivery_id: str
    event: str
    action: str
    state: DeliveryState
    attempts: int
    outcome: str | None
    error: str | None


def record(
    tx: Tx,
    *,
    delivery_id: str,
    event: str,
    action: str,
    body: bytes,
    at: float,
    subject: str | None = None,
) -> bool:
    """Store a delivery once; False when its id, or its subject, was seen before."""
    cursor = tx.execute(
        "INSERT OR IGNORE INTO deliveries (delivery_id, event, action, body, received_at,"
        " next_attempt_at, subject) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (delivery_id, event, action, body, at, at, subject),
    )
    return cursor.rowcount == 1


def read_mark(tx: Tx, scope: str) -> float | None:
    """When the edge last read the outside world's state for `scope`, if it has."""
    row = tx.execute("SELECT read_at FROM read_marks WHERE scope = ?", (scope,)).fetchone()
    return None if row is None else float(row[0])


def set_read_mark(tx: Tx, scope: str, at: float) -> None:
    """The edge read `scope`'s state as of `at` (a mark never moves back)."""
    tx.execute(
        "INSERT INTO read_marks (scope, read_at) VALUES (?, ?) ON CONFLICT (scope)"
        " DO UPDATE SET read_at = max(read_at, excluded.read_at)",
        (scope, at),
    )


def due(tx: Tx, *, at: float, limit: int = 50) -> list[Delivery]:
    """Pending deliveries whose next attempt is due, oldest first."""
    rows = tx.execute(
        "SELECT delivery_id, event, action, body, attempts FROM deliveries"
        " WHERE state = 'pending' AND next_attempt_at <= ? ORDER BY received_at, rowid LIMIT ?",
        (at, limit),
    ).fetchall()
    return [Delivery(d, e, a, bytes(b), n) for d, e, a, b, n in rows]


def next_due_at(tx: Tx) -> float | None:
    """When the earliest pending delivery is due, or None when none is pending."""
    row = tx.execute(
        "SELECT MIN(next_attempt_at) FROM deliveries WHERE state = 'pending'"
    ).fetchone()
    return None if row[0] is None else float(row[0])


def done(tx: Tx, delivery_id: str, *, outcome: str, at: float) -> None:
    """Mark a delivery handled, with what came of it."""
    tx.execute(
        "UPDATE deliveries SET state = 'done', outcome = ?, error = NULL, finished_at = ?,"
        " attempts = attempts + 1 WHERE delivery_id = ?",
        (outcome, at, delivery_id),
    )


def failed_attempt(tx: Tx, delivery_id: str, *, error: str, at: float, retry: bool = True) -> bool:
    """Record a failed attempt; schedule the next or, after the last, mark it failed.

    Returns True when another attempt is scheduled.
    """
    row = tx.execute(
        "SELECT attempts FROM deliveries WHERE delivery_id = ?", (delivery_id,)
    ).fetchone()
    attempts = int(row[0]) + 1
    if retry and attempts < MAX_ATTEMPTS:
        delay = min(BACKOFF_CAP_S, BACKOFF_BASE_S**attempts)
        tx.execute(
            "UPDATE deliveries SET attempts = ?, error = ?, next_attempt_at = ?"
            " WHERE delivery_id = ?",
            (attempts, error, at + delay, delivery_id),
        )
        return True
    tx.execute(
        "UPDATE deliveries SET state = 'failed', attempts = ?, error = ?, finished_at = ?"
        " WHERE delivery_id = ?",
        (attempts, error, at, delivery_id),
    )
    return False


def retry_later(tx: Tx, delivery_id: str, *, at: float, not_before: float, error: str) -> None:
    """Put a delivery back without spending an attempt (e.g. rate limited until a time)."""
    tx.execute(
        "UPDATE deliveries SET next_attempt_at = ?, error = ? WHERE delivery_id = ?",
        (max(at, not_before), error, delivery_id),
    )


def get(tx: Tx, delivery_id: str) -> DeliveryRecord | None:
    """One delivery's bookkeeping."""
    row = tx.execute(
        "SELECT delivery_id, event, action, state, attempts, outcome, error FROM deliveries"
        " WHERE delivery_id = ?",
        (delivery_id,),
    ).fetchone()
    return None if row is None else DeliveryRecord(*row)


def prune(tx: Tx, *, at: float) -> int:
    """Forget handled deliveries older than the keep window; returns how many."""
    cursor = tx.execute(
        "DELETE FROM deliveries WHERE state = 'done' AND finished_at < ?", (at - KEEP_DONE_S,)
    )
    return cursor.rowcount


def backlog(tx: Tx, *, at: float) -> Backlog:
    """How many deliveries wait, and how long the oldest has waited."""
    count, oldest = tx.execute(
        "SELECT COUNT(*), MIN(received_at) FROM deliveries WHERE state = 'pending'"
    ).fetchone()
    return Backlog(int(count), 0.0 if oldest is None else max(0.0, at - float(oldest)))


@dataclass(frozen=True)
class Backlog:
    """Pending deliveries: how many, and the oldest one's age in seconds."""

    pending: int
    oldest_age_s: float


@dataclass(frozen=True)
class Arrival:
    """A verified delivery to store; `subject` names what it is about when the edge can
    (`comment:ID`), so another delivery of the same thing is a redelivery."""

    delivery_id: str
    event: str
    action: str
    body: bytes
    subject: str | None = None


class DeliveryQueue:
    """The deliveries table as the edge uses it: store, take due, settle, measure."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def record_all(self, arrivals: Sequence[Arrival]) -> list[bool]:
        """Store several deliveries in one commit; for each, False when it was seen before."""

        def store_all(tx: Tx) -> list[bool]:
            at = now()
            return [
                record(
                    tx,
                    delivery_id=a.delivery_id,
                    event=a.event,
                    action=a.action,
                    body=a.body,
                    at=at,
                    subject=a.subject,
                )
                for a in arrivals
            ]

        return await self._store.write(store_all)

    async def due(self, *, limit: int = 50) -> list[Delivery]:
        """Pending deliveries due now, oldest first."""
        return await self._store.read(lambda tx: due(tx, at=now(), limit=limit))

    async def next_due_at(self) -> float | None:
        """When the earliest pending delivery is due."""
        return await self._store.read(next_due_at)

    async def done(self, delivery_id: str, *, outcome: str) -> None:
        """Mark a delivery handled."""
        await self._store.write(lambda tx: done(tx, delivery_id, outcome=outcome, at=now()))

    async def failed_attempt(self, delivery_id: str, *, error: str, retry: bool) -> bool:
        """Record a failed attempt; True when another is scheduled."""
        return await self._store.write(
            lambda tx: failed_attempt(tx, delivery_id, error=error, at=now(), retry=retry)
        )

    async def retry_later(self, delivery_id: str, *, not_before: float, error: str) -> None:
        """Put a delivery back without spending an attempt."""
        await self._store.write(
            lambda tx: retry_later(tx, delivery_id, at=now(), not_before=not_before, error=error)
        )

    async def get(self, delivery_id: str) -> DeliveryRecord | None:
        """One delivery's bookkeeping."""
        return await self._store.read(lambda tx: get(tx, delivery_id))

    async def read_mark(self, scope: str) -> float | None:
        """When the edge last read `scope`'s state."""
        return await self._store.read(lambda tx: read_mark(tx, scope))

    async def set_read_mark(self, scope: str, at: float) -> None:
        """The edge read `scope`'s state as of `at`."""
        await self._store.write(lambda tx: set_read_mark(tx, scope, at))

    async def prune(self) -> int:
        """Forget handled deliveries past the keep window."""
        return await self._store.write(lambda tx: prune(tx, at=now()))

    async def backlog(self) -> Backlog:
        """How many wait, and the oldest one's age."""
        return await self._store.read(lambda tx: backlog(tx, at=now()))
