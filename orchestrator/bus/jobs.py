"""The `jobs` table: a job's row, which the bus makes with the job's root conversation.

Its owner (tests/test_table_owners.py): other modules call these functions rather than
naming the table in SQL of their own.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.store.sqlite import Tx, now


@dataclass(frozen=True)
class StoredProject:
    """What a job keeps of the project it started under, to serve it again after a restart."""

    job_id: int
    project: str
    text: str | None  # the project file's text (None: a job from before it was kept)
    learnings: str | None


def find(tx: Tx, job_key: str) -> int | None:
    """The job started for `job_key`, if one was."""
    row = tx.execute("SELECT job_id FROM jobs WHERE job_key = ?", (job_key,)).fetchone()
    return None if row is None else int(row[0])


def create(
    tx: Tx,
    *,
    job_key: str,
    project: str,
    title: str,
    max_parallel: int,
    project_text: str | None,
    learnings: str | None,
    ready: bool,
) -> int:
    """A new job's row (active); its id."""
    stamp = now()
    (job_id,) = tx.execute(
        "INSERT INTO jobs (job_key, project, title, created_at, updated_at, max_parallel,"
        " project_text, learnings, ready) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " RETURNING job_id",
        (job_key, project, title, stamp, stamp, max_parallel, project_text, learnings, ready),
    ).fetchone()
    return int(job_id)


def keep_project(
    tx: Tx, job_id: int, text: str | None, learnings: str | None, *, replace: bool = False
) -> None:
    """Replace the project text the job keeps, and its learnings: with `replace` by
    `learnings` whatever it is, else only where it is given."""
    keep = "?" if replace else "COALESCE(?, learnings)"
    tx.execute(
        f"UPDATE jobs SET project_text = ?, learnings = {keep} WHERE job_id = ?",
        (text, learnings, job_id),
    )


def set_ready(tx: Tx, job_id: int) -> None:
    """The job's workspace exists: its first turn may run."""
    tx.execute("UPDATE jobs SET ready = 1 WHERE job_id = ?", (job_id,))


def is_ready(tx: Tx, job_id: int) -> bool:
    """Whether the job's workspace was made and its first turn may run."""
    row = tx.execute("SELECT ready FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
    return row is not None and bool(row[0])


def set_gate_modes(tx: Tx, job_id: int, modes: str) -> None:
    """The gate policy (JSON, kind to mode) the job started under."""
    tx.execute("UPDATE jobs SET gate_modes = ? WHERE job_id = ?", (modes, job_id))


def key_of(tx: Tx, job_id: int) -> str | None:
    """The key the job was started for (None: no such job)."""
    row = tx.execute("SELECT job_key FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
    return None if row is None else str(row[0])


def project_of(tx: Tx, job_id: int) -> str | None:
    """The name of the job's project (None: no such job)."""
    row = tx.execute("SELECT project FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
    return None if row is None else str(row[0])


def stored_project(tx: Tx, job_id: int) -> StoredProject | None:
    """The project the job keeps (None: no such job)."""
    row = tx.execute(
        "SELECT job_id, project, project_text, learnings FROM jobs WHERE job_id = ?", (job_id,)
    ).fetchone()
    return None if row is None else StoredProject(*row)


def active_projects(tx: Tx) -> list[StoredProject]:
    """The projects active jobs keep, by job id."""
    rows = tx.execute(
        "SELECT job_id, project, project_text, learnings FROM jobs"
        " WHERE state = 'active' ORDER BY job_id"
    ).fetchall()
    return [StoredProject(*row) for row in rows]


def complete(tx: Tx, job_id: int, result: str | None) -> bool:
    """Record an active job complete with `result`; False when it was not active."""
    cursor = tx.execute(
        "UPDATE jobs SET state = 'complete', result = ?, updated_at = ?"
        " WHERE job_id = ? AND state = 'active'",
        (result, now(), job_id),
    )
    return cursor.rowcount == 1
