"""Pruning a store (orchestrator/store/prune.py) on jobs the real engine ran: the demo
organisation on a real repository, each job billed past a small token cap so it stops at a
budget gate the proxy is consulted on. A job that ended long ago goes with its rows in every
table; active jobs, recent ones and one whose pull request is open stay whole."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from demo_office import start_job
from fakes import FakeForge
from local_repo import make_repo
from test_budget_gate import billed, drive, open_office, project

from orchestrator.core.errors import StoreError
from orchestrator.jobs.budget_gate import QUESTION_OPENING
from orchestrator.jobs.office import Office
from orchestrator.jobs.withdraw import withdraw
from orchestrator.store.prune import DAY_S, prune
from orchestrator.store.snapshot import restore, snapshot
from orchestrator.store.sqlite import now

TEXT = project("max_usd: null, max_tokens: 250")
OLD = 40 * DAY_S  # ended this long ago: past the 30 days kept

# Which rows of each table belong to job :job, read from migrations.py by hand, so that the
# pruner's reading of the foreign keys is checked against a reading of our own.
IN_CONVERSATIONS = "IN (SELECT conversation_id FROM conversations WHERE job_id = :job)"
IN_TASKS = "task_id IN (SELECT task_id FROM tasks WHERE job_id = :job)"
BY_JOB_ID = (
    *("jobs", "conversations", "tasks", "gates", "job_workspaces", "task_log", "job_links"),
    *("forge_objects", "failures", "job_sources", "waits", "job_steering", "job_commands"),
    *("proxy_decisions", "proxy_jobs", "issue_revisions", "job_pulls", "review_rounds"),
    *("review_points", "review_threads", "checks", "network_refusals"),
    *("job_learned", "job_learning_files", "ci_facts"),
)
OWNED = {
    **dict.fromkeys(BY_JOB_ID, "job_id = :job"),
    "messages": f"conversation_id {IN_CONVERSATIONS}",
    "agent_contexts": f"context_id {IN_CONVERSATIONS}",
    "inbox": f"conversation_id {IN_CONVERSATIONS}",
    "task_deps": IN_TASKS,
    "worktree_slots": IN_TASKS,
}

# One row for a table the demo job leaves empty, made as the engine would (job :job, at :at).
FILL = {
    "inbox": "INSERT INTO inbox (conversation_id, kind, sender, content, created_at)"
    " VALUES ('job:' || :job, 'request', 'engine', '{}', :at)",
    "task_deps": "INSERT INTO tasks (job_id, number, title, spec, created_by, created_at,"
    " updated_at) VALUES (:job, 99, 'after', 'spec', 'lead', :at, :at);"
    " INSERT INTO task_deps SELECT a.task_id, b.task_id FROM tasks a, tasks b"
    " WHERE a.job_id = :job AND a.number = 99 AND b.job_id = :job AND b.number = 1",
    "worktree_slots": "INSERT INTO worktree_slots SELECT '/slots/' || :job, 'repo', task_id, :at"
    " FROM tasks WHERE job_id = :job AND number = 1",
    "job_links": "INSERT INTO job_links VALUES (:job, 'github', '{}')",
    "checks": "INSERT INTO checks (job_id, task, commit_sha, status, record, checked_at)"
    " VALUES (:job, 1, 'abc', 'passed', '{}', :at)",
    "forge_objects": "INSERT INTO forge_objects VALUES (:job, 'tracking', '7', '', :at)",
    "failures": "INSERT INTO failures VALUES ('workspace:' || :job, :job, 'workspace', 'r', :at)",
    "waits": "INSERT INTO waits VALUES ('forge:' || :job, :job, 'forge', 'slow', :at, :at, 1)",
    "job_steering": "INSERT INTO job_steering (job_id, text, given_by, given_at)"
    " VALUES (:job, 'tests first', 'carol', :at)",
    "job_commands": "INSERT INTO job_commands (job_id, kind, requested_by, requested_at, state)"
    " VALUES (:job, 'cancel', 'carol', :at, 'done')",
    "proxy_jobs": "INSERT INTO proxy_jobs VALUES (:job, 1, 'carol', :at)",
    "issue_revisions": "INSERT INTO issue_revisions (job_id, title, body, state, recorded_at)"
    " VALUES (:job, 't', 'b', 'original', :at)",
    "job_pulls": "INSERT INTO job_pulls VALUES (:job, :job, 'https://x/pull', 'merged', :at)",
    "review_rounds": "INSERT INTO review_rounds (job_id, number, state, created_at)"
    " VALUES (:job, 1, 'delivered', :at)",
    "review_points": "INSERT INTO review_points (round_id, number, job_id, source, author, body)"
    " SELECT round_id, 1, :job, 'review:' || :job, 'dave', 'why?' FROM review_rounds"
    " WHERE job_id = :job",
    "review_threads": "INSERT INTO review_threads VALUES (:job, 'thread-1', 3)",
    "job_learned": "INSERT INTO job_learned VALUES (:job, '0123456789', 'run make', 'x', 0)",
    "job_learning_files": "INSERT INTO job_learning_files VALUES (:job, '.teaparty/l.md', NULL)",
    "ci_facts": "INSERT INTO ci_facts (job_id, head_sha, kind, name, note, at)"
    " VALUES (:job, 'abc', 'round', '', 'round 1', :at)",
    "network_refusals": "INSERT INTO network_refusals (job_id, task, agent, host, port, why,"
    " command, count, first_at, last_at) VALUES (:job, 1, 'worker', 'crates.test', 443,"
    " 'host', 'cargo build', 1, :at, :at)",
}


async def start(office: Office, repo: Path, number: int) -> int:
    body = f"We need one ({number})."
    return await start_job(
        office, repo, TEXT, title=f"Job {number}", body=body, number=number, hand_off=""
    )


async def run_jobs(home: Path, repo: Path) -> dict[str, int]:
    """Five jobs: three finished, one parked at its open gate, one withdrawn there."""
    office = await open_office(home, TEXT, billed())
    try:
        jobs: dict[str, int] = {}
        for name in ("old", "recent", "old with open pull", "active", "withdrawn"):
            jobs[name] = job_id = await start(office, repo, len(jobs) + 1)
            if name in ("active", "withdrawn"):
                assert await drive(office, FakeForge(office, leave_open=True), job_id) == "waiting"
            else:
                forge = FakeForge(office, answers={QUESTION_OPENING: "yes"})
                assert await drive(office, forge, job_id) == "done"
        await withdraw(office, jobs["withdrawn"], by="carol")
        return jobs
    finally:
        await office.close()


def referring_to_jobs(db: sqlite3.Connection) -> set[str]:
    """The tables whose rows refer to a job, directly or through other rows."""
    refs = {
        table: {row[2] for row in db.execute(f"PRAGMA foreign_key_list({table})")}
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    found = {"jobs"}
    while grown := {t for t, parents in refs.items() if parents & found} - found:
        found |= grown
    return found


def counts(db: sqlite3.Connection, job: int) -> dict[str, int]:
    return {
        table: db.execute(f"SELECT count(*) FROM {table} WHERE {where}", {"job": job}).fetchone()[0]
        for table, where in OWNED.items()
    }


def fill(db: sqlite3.Connection, job: int) -> None:
    """A row in every table the job has none in yet."""
    for table, count in counts(db, job).items():
        if count == 0:
            for statement in FILL[table].split(";"):
                db.execute(statement, {"job": job, "at": now()})


def deliveries(db: sqlite3.Connection) -> None:
    at = now()
    for delivery_id, state, age in [
        ("old-done", "done", OLD),
        ("old-failed", "failed", OLD),
        ("old-pending", "pending", OLD),
        ("recent-done", "done", DAY_S),
    ]:
        db.execute(
            "INSERT INTO deliveries (delivery_id, event, body, received_at, next_attempt_at,"
            " state) VALUES (?, 'issues', ?, ?, ?, ?)",
            (delivery_id, b"x" * 200_000, at - age, at - age, state),
        )


async def test_an_old_finished_job_goes_from_every_table_and_the_others_stay_whole(
    tmp_path: Path,
) -> None:
    home, repo = tmp_path / "home", make_repo(tmp_path / "widgets")
    jobs = await run_jobs(home, repo)
    path = home / "teaparty.db"
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA foreign_keys=ON")
        assert referring_to_jobs(db) == set(OWNED), "a new table: say which rows are a job's"
        for job in jobs.values():
            fill(db, job)
        db.execute(
            "UPDATE job_pulls SET state = 'open' WHERE job_id = ?", (jobs["old with open pull"],)
        )
        for name in ("old", "old with open pull", "active", "withdrawn"):
            db.execute("UPDATE jobs SET updated_at = ? WHERE job_id = ?", (now() - OLD, jobs[name]))
        deliveries(db)
        before = {name: counts(db, job) for name, job in jobs.items()}
        assert all(all(before[name].values()) for name in jobs), "every table has rows of each"
        assert db.execute("SELECT state FROM jobs ORDER BY job_id").fetchall() == [
            ("complete",),
            ("complete",),
            ("complete",),
            ("active",),
            ("withdrawn",),
        ]
    finally:
        db.close()
    size = path.stat().st_size

    pruned = prune(path)

    assert pruned.jobs == (jobs["old"], jobs["withdrawn"])
    assert pruned.deliveries == 2
    assert pruned.rows["jobs"] == 2
    assert (pruned.bytes_before, pruned.bytes_after < size - 300_000) == (size, True)
    db = sqlite3.connect(path)
    try:
        for name in ("old", "withdrawn"):
            assert set(counts(db, jobs[name]).values()) == {0}, name
        for name in ("recent", "old with open pull", "active"):
            assert counts(db, jobs[name]) == before[name], name
        assert sum(pruned.rows.values()) == sum(
            sum(before[name].values()) for name in ("old", "withdrawn")
        )
        assert db.execute("SELECT delivery_id FROM deliveries ORDER BY 1").fetchall() == [
            ("old-pending",),
            ("recent-done",),
        ]
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []
        assert db.execute("PRAGMA freelist_count").fetchone() == (0,), "vacuumed"
        assert db.execute("SELECT count(*) FROM proxy_settings").fetchone() == (1,)
    finally:
        db.close()

    office = await open_office(home, TEXT, billed())  # the engine carries on with what is left
    try:
        await office.resume()
        await office.run_until_idle()
        for name, job in jobs.items():
            record = await office.records.job(job)
            assert (record is None) == (name in ("old", "withdrawn")), name
        assert [g.job_id for g in await office.open_gates()] == [jobs["active"]]
    finally:
        await office.close()
    assert prune(path).jobs == (), "nothing more to prune"


async def test_a_job_entangled_with_one_that_stays_is_kept_whole(tmp_path: Path) -> None:
    home, repo = tmp_path / "home", make_repo(tmp_path / "widgets")
    office = await open_office(home, TEXT, billed())
    try:
        old = await start(office, repo, 1)
        assert await drive(office, FakeForge(office, answers={QUESTION_OPENING: "yes"}), old)
        kept = await start(office, repo, 2)
    finally:
        await office.close()
    db = sqlite3.connect(home / "teaparty.db", isolation_level=None)
    try:
        db.execute("UPDATE jobs SET updated_at = ? WHERE job_id = ?", (now() - OLD, old))
        db.execute(  # a conversation of the job that stays, opened under the old job's root
            "INSERT INTO conversations (conversation_id, kind, agent, initiator, parent_id,"
            " job_id, created_at) VALUES ('agent:x:y:1', 'agent', 'y', 'x', ?, ?, ?)",
            (f"job:{old}", kept, now()),
        )
        before = counts(db, old)
    finally:
        db.close()
    assert prune(home / "teaparty.db").jobs == ()
    db = sqlite3.connect(home / "teaparty.db")
    try:
        assert counts(db, old) == before
    finally:
        db.close()


def database(path: Path, schema: str) -> Path:
    db = sqlite3.connect(path)
    db.executescript(schema)
    db.close()
    return path


def test_any_schema_is_pruned_by_its_foreign_keys(tmp_path: Path) -> None:
    """No deliveries table, a reference that names no column: the keys still lead the way."""
    path = database(
        tmp_path / "other.db",
        "CREATE TABLE jobs (job_id INTEGER PRIMARY KEY, state TEXT, updated_at REAL);"
        "CREATE TABLE notes (note_id INTEGER PRIMARY KEY, job INTEGER REFERENCES jobs);"
        f"INSERT INTO jobs VALUES (1, 'complete', 0), (2, 'complete', {now()}), (3, 'active', 0);"
        "INSERT INTO notes (job) VALUES (1), (1), (2), (3);",
    )
    pruned = prune(path)
    assert (pruned.jobs, dict(pruned.rows), pruned.deliveries) == ((1,), {"jobs": 1, "notes": 2}, 0)
    db = sqlite3.connect(path)
    assert db.execute("SELECT job FROM notes ORDER BY job").fetchall() == [(2,), (3,)]
    db.close()


def test_deliveries_the_next_read_of_github_reads_again_are_kept_past_the_window(
    tmp_path: Path,
) -> None:
    """A repository idle for weeks: its last run's read mark is old, and what that run
    handled just before it must still be recognised when the next run reads from the mark."""
    at = now()
    mark = at - OLD
    path = database(
        tmp_path / "idle.db",
        "CREATE TABLE jobs (job_id INTEGER PRIMARY KEY, state TEXT, updated_at REAL);"
        "CREATE TABLE deliveries (delivery_id TEXT PRIMARY KEY, state TEXT, received_at REAL);"
        "CREATE TABLE read_marks (scope TEXT PRIMARY KEY, read_at REAL);"
        f"INSERT INTO read_marks VALUES ('github/octo/widgets', {mark});"
        f"INSERT INTO deliveries VALUES ('near-the-mark', 'done', {mark - DAY_S / 2}),"
        f" ('long-before', 'done', {mark - 2 * DAY_S});",
    )
    assert prune(path).deliveries == 1
    db = sqlite3.connect(path)
    assert db.execute("SELECT delivery_id FROM deliveries").fetchall() == [("near-the-mark",)]
    db.close()


def test_what_cannot_be_pruned_or_copied_says_why(tmp_path: Path) -> None:
    composite = database(
        tmp_path / "composite.db",
        "CREATE TABLE jobs (job_id INTEGER PRIMARY KEY, state TEXT, updated_at REAL, k TEXT,"
        " UNIQUE (job_id, k));"
        "CREATE TABLE pairs (a INTEGER, b TEXT, FOREIGN KEY (a, b) REFERENCES jobs (job_id, k));"
        "INSERT INTO jobs VALUES (1, 'complete', 0, 'x');",
    )
    with pytest.raises(StoreError, match="pairs has a foreign key of several columns to jobs"):
        prune(composite)
    db = sqlite3.connect(composite)
    assert db.execute("SELECT count(*) FROM jobs").fetchone() == (1,), "rolled back"
    db.close()

    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all" * 200)
    with pytest.raises(StoreError, match="cannot prune the store at .*garbage.db"):
        prune(garbage)
    with pytest.raises(StoreError, match="cannot snapshot the store at .*garbage.db"):
        snapshot(garbage, tmp_path / "copy.db")
    with pytest.raises(StoreError, match="garbage.db is not a sound SQLite database"):
        restore(garbage, tmp_path / "home" / "teaparty.db")
    with pytest.raises(StoreError, match="nothing.db is not a readable SQLite database"):
        restore(tmp_path / "nothing.db", tmp_path / "home" / "teaparty.db")
    for missing in (prune, lambda path: snapshot(path, tmp_path / "copy.db")):
        with pytest.raises(StoreError, match="no store at"):
            missing(tmp_path / "nothing.db")
