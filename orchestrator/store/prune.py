"""Pruning a store: the rows of jobs that ended long ago, and old deliveries, then VACUUM.

Runner mode carries the whole store from one workflow run to the next, so it must not grow
without bound. A job that ended (`complete` or `withdrawn`) more than `keep_days` ago, and
whose pull request is not still open (a review on an open one brings its job back), goes
with every row that refers to it, directly or through another row: its conversations and
their messages, contexts and inbox, tasks and their dependencies and slots, gates and the
proxy's decisions on them, workspaces, links, waits, failures, steering, commands,
revisions, pull request and review rounds. Which tables those are is read from the schema's
foreign keys (`PRAGMA foreign_key_list`), so a table a later migration adds is followed
without a change here. A `failed` job stays: it waits for someone to ask for a retry.

A row reached that way which names a job that stays (its `job_id`) would mean the two jobs
are entangled; the job it was reached from is then kept whole, never half-deleted. Deliveries
handled (done or failed) and received more than `keep_days` ago go too, unless they are
within a day of the oldest read mark (the next read of GitHub starts a little before it, and
must recognise what it reads again); pending ones stay.
The store is then VACUUMed, so the file shrinks to what is left.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.core.errors import StoreError
from orchestrator.store.sqlite import now

KEEP_ENDED_DAYS = 30.0
DAY_S = 86_400.0
MARK_OVERLAP_S = DAY_S  # deliveries this long before a read mark are kept: a read overlaps


@dataclass(frozen=True)
class ForeignKey:
    """One single-column reference: `table.column` names `parent.target`."""

    table: str
    column: str
    parent: str
    target: str


@dataclass(frozen=True)
class Pruned:
    """What a prune removed: the jobs, the rows per table (theirs), old deliveries, and the
    file's size before and after."""

    jobs: tuple[int, ...]
    rows: Mapping[str, int] = field(default_factory=dict)
    deliveries: int = 0
    bytes_before: int = 0
    bytes_after: int = 0


def prune(path: Path, *, keep_days: float = KEEP_ENDED_DAYS, at: float | None = None) -> Pruned:
    """Delete the rows of jobs that ended over `keep_days` before `at` (default: now) and
    deliveries handled that long ago, then VACUUM the store at `path`.

    Meant for a store no engine is writing (runner mode prunes the snapshot it saves);
    SQLite's locking keeps it safe beside one all the same.
    """
    if not path.is_file():
        raise StoreError(f"no store at {path} to prune")
    cutoff = (now() if at is None else at) - keep_days * DAY_S
    before = path.stat().st_size
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA foreign_keys=ON")
        db.execute("PRAGMA busy_timeout=5000")
        db.execute("BEGIN IMMEDIATE")
        try:
            jobs, rows, deliveries = _delete(db, cutoff)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("VACUUM")
    except sqlite3.Error as exc:
        raise StoreError(f"cannot prune the store at {path}: {exc}") from exc
    finally:
        db.close()
    return Pruned(jobs, rows, deliveries, before, path.stat().st_size)


async def prune_store(
    path: Path, *, keep_days: float = KEEP_ENDED_DAYS, at: float | None = None
) -> Pruned:
    """`prune`, off the event loop."""
    return await asyncio.to_thread(prune, path, keep_days=keep_days, at=at)


def _delete(db: sqlite3.Connection, cutoff: float) -> tuple[tuple[int, ...], dict[str, int], int]:
    tables = _tables(db)
    keys = foreign_keys(db, tables)
    jobs = _ended(db, tables, cutoff) if "jobs" in tables else set()
    db.execute(
        "CREATE TEMP TABLE doomed (tbl TEXT, rid INTEGER, job INTEGER, PRIMARY KEY (tbl, rid))"
    )
    while True:  # until no candidate is entangled with a job that stays
        db.execute("DELETE FROM doomed")
        _reach(db, jobs, keys)
        entangled = _entangled(db, tables)
        if not entangled:
            break
        jobs -= entangled
    # Every row is deleted at once, in no particular order: references are checked at COMMIT.
    db.execute("PRAGMA defer_foreign_keys=ON")
    rows: dict[str, int] = {}
    for table in tables:
        deleted = db.execute(
            f"DELETE FROM {_quote(table)} WHERE rowid IN (SELECT rid FROM doomed WHERE tbl = ?)",
            (table,),
        ).rowcount
        if deleted:
            rows[table] = deleted
    db.execute("DROP TABLE doomed")
    deliveries = 0
    if "read_marks" in tables:  # what the next read of GitHub reads again stays recognised
        (oldest_mark,) = db.execute("SELECT min(read_at) FROM read_marks").fetchone()
        if oldest_mark is not None:
            cutoff = min(cutoff, float(oldest_mark) - MARK_OVERLAP_S)
    if "deliveries" in tables:
        deliveries = db.execute(
            "DELETE FROM deliveries WHERE state != 'pending' AND received_at < ?", (cutoff,)
        ).rowcount
    return tuple(sorted(jobs)), rows, deliveries


def _tables(db: sqlite3.Connection) -> list[str]:
    """The store's ordinary tables: a virtual table (the learnings' FTS5 index) and its
    shadow tables hold no job's rows, and some have no rowid to delete by."""
    virtual = [
        name
        for (name,) in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL%'"
        )
    ]
    return [
        name
        for (name,) in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            " ORDER BY name"
        )
        if name not in virtual and not any(name.startswith(f"{v}_") for v in virtual)
    ]


def foreign_keys(db: sqlite3.Connection, tables: list[str]) -> list[ForeignKey]:
    """Every reference between `tables`; a key of several columns is refused (StoreError):
    the pruner follows single-column ones only."""
    found: list[ForeignKey] = []
    for table in tables:
        listed = db.execute(f"PRAGMA foreign_key_list({_quote(table)})").fetchall()
        for key_id, seq, parent, column, target, *_ in listed:
            if seq != 0 or any(row[0] == key_id and row[1] != 0 for row in listed):
                raise StoreError(f"{table} has a foreign key of several columns to {parent}")
            found.append(ForeignKey(table, column, parent, target or _primary_key(db, parent)))
    return found


def _primary_key(db: sqlite3.Connection, table: str) -> str:
    columns = [row[1] for row in db.execute(f"PRAGMA table_info({_quote(table)})") if row[5]]
    if len(columns) != 1:
        raise StoreError(f"{table} has no single-column primary key to refer to")
    return str(columns[0])


def _ended(db: sqlite3.Connection, tables: list[str], cutoff: float) -> set[int]:
    open_pull = (
        " AND NOT EXISTS (SELECT 1 FROM job_pulls p WHERE p.job_id = j.job_id"
        " AND p.state IN ('open', 'draft'))"
        if "job_pulls" in tables
        else ""
    )
    return {
        int(job_id)
        for (job_id,) in db.execute(
            "SELECT job_id FROM jobs j WHERE state IN ('complete', 'withdrawn')"
            f" AND updated_at < ?{open_pull}",
            (cutoff,),
        )
    }


def _reach(db: sqlite3.Connection, jobs: set[int], keys: list[ForeignKey]) -> None:
    """Mark the candidate jobs' rows, and every row referring to a marked row, in `doomed`,
    each with the job it was reached from."""
    db.executemany(
        "INSERT INTO doomed SELECT 'jobs', rowid, job_id FROM jobs WHERE job_id = ?",
        [(job,) for job in jobs],
    )
    added = len(jobs)
    while added:
        added = 0
        for key in keys:
            table, parent = _quote(key.table), _quote(key.parent)
            added += db.execute(
                f"INSERT OR IGNORE INTO doomed SELECT ?, c.rowid, d.job FROM {table} c"
                f" JOIN {parent} p ON c.{_quote(key.column)} = p.{_quote(key.target)}"
                " JOIN doomed d ON d.tbl = ? AND d.rid = p.rowid",
                (key.table, key.parent),
            ).rowcount


def _entangled(db: sqlite3.Connection, tables: list[str]) -> set[int]:
    """Candidate jobs whose reach took in a row that names a job that stays."""
    found: set[int] = set()
    for table in tables:
        columns = {row[1] for row in db.execute(f"PRAGMA table_info({_quote(table)})")}
        if "job_id" not in columns or table == "jobs":
            continue
        found |= {
            int(job)
            for (job,) in db.execute(
                f"SELECT DISTINCT d.job FROM doomed d JOIN {_quote(table)} t"
                " ON d.tbl = ? AND d.rid = t.rowid"
                " WHERE t.job_id IS NOT NULL AND t.job_id != d.job"
                " AND t.job_id NOT IN (SELECT job FROM doomed WHERE tbl = 'jobs')",
                (table,),
            )
        }
    return found


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
