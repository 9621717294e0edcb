"""The `job_sources` table: where each job's work comes from and goes back to.

Its owner (tests/test_table_owners.py): the repository as the store names it, the URL or path
it is fetched from, the commit or ref the job starts from, its branch and slug.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.store.sqlite import Tx


@dataclass(frozen=True)
class KeptSource:
    """A job's source as recorded when it started."""

    repo: str  # as the store names it: `github/owner/name`, `local/name`
    source: str  # what its mirror fetches: a URL or a path
    start: str  # the ref or commit the job branch started from
    branch: str
    slug: str


def keep(tx: Tx, job_id: int, kept: KeptSource) -> None:
    """Record (or replace) the job's source."""
    tx.execute(
        "INSERT OR REPLACE INTO job_sources (job_id, repo, source, start, branch, slug)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (job_id, kept.repo, kept.source, kept.start, kept.branch, kept.slug),
    )


def of_job(tx: Tx, job_id: int) -> KeptSource | None:
    """The job's source (None: a job started without one)."""
    row = tx.execute(
        "SELECT repo, source, start, branch, slug FROM job_sources WHERE job_id = ?", (job_id,)
    ).fetchone()
    return None if row is None else KeptSource(*(str(value) for value in row))


# Named for the modules whose own SQL named this table (issue 32).


def jobs_from(tx: Tx, source: str) -> list[int]:
    """The jobs whose work comes from `source` (a URL or a path), by id."""
    rows = tx.execute(
        "SELECT job_id FROM job_sources WHERE source = ? ORDER BY job_id", (source,)
    ).fetchall()
    return [int(job_id) for (job_id,) in rows]


def jobs_of_repo(tx: Tx, repo: str) -> list[int]:
    """The jobs of the repository the store names `repo`, by id."""
    rows = tx.execute(
        "SELECT job_id FROM job_sources WHERE repo = ? ORDER BY job_id", (repo,)
    ).fetchall()
    return [int(job_id) for (job_id,) in rows]
