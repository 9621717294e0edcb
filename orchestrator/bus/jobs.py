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


@dataclass(frozen=True)
class JobRow:
    """A job's row: what it is, where it stands, and what it keeps."""

    job_id: int
    job_key: str
    project: str
    title: str
    state: str  # active | complete | withdrawn | failed
    paused_by: str | None  # who holds it, if anyone does
    max_parallel: int  # mini-teams at work at once
    budget_usd: float | None  # its own caps, replacing its project's (`/budget`, a gate)
    budget_tokens: int | None
    learnings: str | None


_ROW = (
    "SELECT job_id, job_key, project, title, state, paused_by, max_parallel, budget_usd,"
    " budget_tokens, learnings FROM jobs"
)


def get(tx: Tx, job_id: int) -> JobRow | None:
    """The job's row (None: no such job)."""
    row = tx.execute(f"{_ROW} WHERE job_id = ?", (job_id,)).fetchone()
    return None if row is None else JobRow(*row)


def get_by_key(tx: Tx, job_key: str) -> JobRow | None:
    """The row of the job started for `job_key` (None: none was)."""
    row = tx.execute(f"{_ROW} WHERE job_key = ?", (job_key,)).fetchone()
    return None if row is None else JobRow(*row)


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


def set_state(tx: Tx, job_id: int, state: str, *, was: str | None = None) -> bool:
    """Move the job to `state` (only from `was`, when given); whether it moved."""
    cursor = tx.execute(
        "UPDATE jobs SET state = ?, updated_at = ? WHERE job_id = ? AND (? IS NULL OR state = ?)",
        (state, now(), job_id, was, was),
    )
    return cursor.rowcount == 1


def reopen(tx: Tx, job_id: int) -> None:
    """Make a resting job active again, its first turn waiting for its workspace (`ready`)."""
    tx.execute(
        "UPDATE jobs SET state = 'active', ready = 0, updated_at = ? WHERE job_id = ?",
        (now(), job_id),
    )


def end(tx: Tx, job_id: int, state: str, *, at: float) -> None:
    """End the job as `state`, released from any hold."""
    tx.execute(
        "UPDATE jobs SET state = ?, paused_by = NULL, updated_at = ? WHERE job_id = ?",
        (state, at, job_id),
    )


def pause(tx: Tx, job_id: int, by: str) -> bool:
    """Hold the job for `by`; False when it was held already."""
    cursor = tx.execute(
        "UPDATE jobs SET paused_by = ?, updated_at = ? WHERE job_id = ? AND paused_by IS NULL",
        (by, now(), job_id),
    )
    return cursor.rowcount == 1


def hold(tx: Tx, job_id: int, by: str) -> None:
    """Hold the job for `by` unless someone holds it already."""
    tx.execute(
        "UPDATE jobs SET paused_by = coalesce(paused_by, ?), updated_at = ? WHERE job_id = ?",
        (by, now(), job_id),
    )


def release(tx: Tx, job_id: int) -> bool:
    """Release the job from its hold; False when nobody held it."""
    cursor = tx.execute(
        "UPDATE jobs SET paused_by = NULL, updated_at = ?"
        " WHERE job_id = ? AND paused_by IS NOT NULL",
        (now(), job_id),
    )
    return cursor.rowcount == 1


def raise_caps(tx: Tx, job_id: int, *, usd: float | None, tokens: int | None) -> None:
    """The job's own caps become `usd` and `tokens`, each where given."""
    tx.execute(
        "UPDATE jobs SET budget_usd = coalesce(?, budget_usd),"
        " budget_tokens = coalesce(?, budget_tokens), updated_at = ? WHERE job_id = ?",
        (usd, tokens, now(), job_id),
    )


def set_title(tx: Tx, job_id: int, title: str) -> None:
    """The job's title (its issue's, edited)."""
    tx.execute("UPDATE jobs SET title = ?, updated_at = ? WHERE job_id = ?", (title, now(), job_id))


def keep_learnings(tx: Tx, job_id: int, text: str) -> None:
    """The learnings the job keeps, unless it keeps some already (they are never undone)."""
    tx.execute(
        "UPDATE jobs SET learnings = ? WHERE job_id = ? AND learnings IS NULL", (text, job_id)
    )


# For the bus's other modules (issue 32: one owner per table).


def gate_modes(tx: Tx, job_id: int) -> str | None:
    """The gate policy (JSON, kind to mode) the job started under (None: none recorded, or
    no such job)."""
    row = tx.execute("SELECT gate_modes FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
    return None if row is None else row[0]


def held_back(tx: Tx) -> set[int]:
    """The jobs whose conversations may not run: not ready (no workspace yet) or paused."""
    rows = tx.execute("SELECT job_id FROM jobs WHERE ready = 0 OR paused_by IS NOT NULL")
    return {int(job_id) for (job_id,) in rows}


# Named for the modules whose own SQL named this table (issue 32).


def latest_of_subject(tx: Tx, job_key: str) -> JobRow | None:
    """The newest job of a subject: started under `job_key` itself, or a later one under
    `job_key/k` (the k-th job of the same subject, after the first ones finished)."""
    row = tx.execute(
        f"{_ROW} WHERE job_key = ? OR substr(job_key, 1, ?) = ? ORDER BY job_id DESC LIMIT 1",
        (job_key, len(job_key) + 1, f"{job_key}/"),
    ).fetchone()
    return None if row is None else JobRow(*row)


def result_of(tx: Tx, job_id: int) -> str | None:
    """What the job ended with (None: no such job, or nothing recorded)."""
    row = tx.execute("SELECT result FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
    return None if row is None else row[0]


@dataclass(frozen=True)
class Listed:
    """A job as `teaparty jobs` lists it: its row's facts and times, and its own result."""

    job_id: int
    job_key: str
    project: str
    title: str
    state: str
    created_at: float
    updated_at: float
    project_text: str | None
    result: str | None


def listing(tx: Tx, job_id: int | None = None) -> list[Listed]:
    """Every job (or only `job_id`), the newest first."""
    where = "" if job_id is None else " WHERE job_id = ?"
    rows = tx.execute(
        "SELECT job_id, job_key, project, title, state, created_at, updated_at, project_text,"
        f" result FROM jobs{where} ORDER BY job_id DESC",
        () if job_id is None else (job_id,),
    ).fetchall()
    return [Listed(*row) for row in rows]
