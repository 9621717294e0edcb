"""What the edge asks the store about jobs, typed: a job by key, its link, its outside objects.

A forge (the App, a terminal) links each job it started to its own subject (an opaque text
it reads back), and records each object it made outside under a stable key, so a crash
between making one and recording it never makes a second. The edge reads and writes
these through `JobRecords` only: no SQL outside orchestrator/.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.bus import jobs as job_rows
from orchestrator.bus.transactions import listed
from orchestrator.store.sqlite import Store, Tx, now


@dataclass(frozen=True)
class JobRecord:
    """A job as the store has it."""

    job_id: int
    job_key: str
    project: str
    title: str
    state: str  # active, complete, failed, withdrawn


@dataclass(frozen=True)
class LinkedJob:
    """A job a forge started, with the subject it linked."""

    job_id: int
    state: str
    subject: str


@dataclass(frozen=True)
class ForgeObject:
    """Something a forge made for a job (a comment, a pull request), under its key."""

    external_id: str
    digest: str
    updated_at: float


class JobRecords:
    """The job queries and records the edge needs, over the engine's store."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def job(self, job_id: int) -> JobRecord | None:
        """The job with this id."""
        return _record(await self._store.read(lambda tx: job_rows.get(tx, job_id)))

    async def job_for_key(self, job_key: str) -> JobRecord | None:
        """The job started under this key (one per key, ever)."""
        return _record(await self._store.read(lambda tx: job_rows.get_by_key(tx, job_key)))

    async def latest_for_key(self, job_key: str) -> JobRecord | None:
        """The newest job of a subject: started under `job_key` itself, or a later one under
        `job_key/k` (the k-th job of the same subject, after the first ones finished)."""
        return _record(await self._store.read(lambda tx: job_rows.latest_of_subject(tx, job_key)))

    async def job_of_conversation(self, conversation_id: str) -> int | None:
        """The job a conversation works for, if any."""
        return await self._store.read(lambda tx: job_of_conversation(tx, conversation_id))

    async def link(self, job_id: int, forge: str, subject: str) -> None:
        """Link a job to the forge that started it (the first link stays)."""
        await self._store.write(
            lambda tx: tx.execute(
                "INSERT OR IGNORE INTO job_links (job_id, forge, subject) VALUES (?, ?, ?)",
                (job_id, forge, subject),
            )
        )

    async def subject(self, job_id: int, forge: str) -> str | None:
        """The subject `forge` linked to the job, or None when another (or none) started it."""
        row = await self._store.read(
            lambda tx: tx.execute(
                "SELECT subject FROM job_links WHERE job_id = ? AND forge = ?", (job_id, forge)
            ).fetchone()
        )
        return None if row is None else str(row[0])

    async def linked(self, forge: str, *, active: bool = True) -> list[LinkedJob]:
        """The jobs `forge` started (only the active ones by default), oldest first."""
        return await self._store.read(lambda tx: _linked(tx, forge, active=active))

    async def forge_object(self, job_id: int, key: str) -> ForgeObject | None:
        """What was recorded for the job under `key`."""
        row = await self._store.read(
            lambda tx: tx.execute(
                "SELECT external_id, digest, updated_at FROM forge_objects"
                " WHERE job_id = ? AND key = ?",
                (job_id, key),
            ).fetchone()
        )
        return None if row is None else ForgeObject(str(row[0]), str(row[1]), float(row[2]))

    async def forge_object_ids(self, job_id: int) -> frozenset[str]:
        """The outside ids of everything recorded for the job."""
        rows = await self._store.read(
            lambda tx: tx.execute(
                "SELECT external_id FROM forge_objects WHERE job_id = ?", (job_id,)
            ).fetchall()
        )
        return frozenset(str(row[0]) for row in rows)

    async def record_forge_object(
        self, job_id: int, key: str, external_id: str, digest: str, *, at: float | None = None
    ) -> None:
        """Remember what was made outside for the job under `key` (`at`: when; now)."""
        await self._store.write(
            lambda tx: record_forge_object(tx, job_id, key, external_id, digest, at=at)
        )


def job_of_conversation(tx: Tx, conversation_id: str) -> int | None:
    """The job a conversation works for, if any."""
    found = listed(tx, conversation_id)
    return None if found is None else found.job_id


def record_forge_object(
    tx: Tx, job_id: int, key: str, external_id: str, digest: str, *, at: float | None = None
) -> None:
    """Remember what a forge made for a job under `key` (the latest wins)."""
    tx.execute(
        "INSERT INTO forge_objects (job_id, key, external_id, digest, updated_at)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (job_id, key) DO UPDATE SET"
        " external_id = excluded.external_id, digest = excluded.digest,"
        " updated_at = excluded.updated_at",
        (job_id, key, external_id, digest, now() if at is None else at),
    )


def _record(row: job_rows.JobRow | None) -> JobRecord | None:
    return (
        None
        if row is None
        else JobRecord(row.job_id, row.job_key, row.project, row.title, row.state)
    )


def _linked(tx: Tx, forge: str, *, active: bool) -> list[LinkedJob]:
    """The jobs `forge` linked (only the active ones, with `active`), by job id."""
    rows = tx.execute(
        "SELECT job_id, subject FROM job_links WHERE forge = ? ORDER BY job_id", (forge,)
    ).fetchall()
    found = []
    for job_id, subject in rows:
        job = job_rows.get(tx, int(job_id))
        if job is not None and (job.state == "active" or not active):
            found.append(LinkedJob(job.job_id, job.state, str(subject)))
    return found
