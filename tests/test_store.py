"""The store on real SQLite files: migrations, pragmas, transactions, the engine lock."""

from __future__ import annotations

import asyncio
import fcntl
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.core.errors import StoreError, StoreLockedError
from orchestrator.store.migrations import MIGRATIONS
from orchestrator.store.sqlite import (
    LOCK_PATIENCE_S,
    Store,
    _lock,
    check_aiosqlite,
    holder,
)

TABLES = {
    "jobs",
    "conversations",
    "messages",
    "agent_contexts",
    "inbox",
    "tasks",
    "task_deps",
    "gates",
}


async def test_migrates_an_empty_file_to_the_latest_schema(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "s.db")
    version, mode, fk, tables = await store.read(
        lambda tx: (
            tx.execute("PRAGMA user_version").fetchone()[0],
            tx.execute("PRAGMA journal_mode").fetchone()[0],
            tx.execute("PRAGMA foreign_keys").fetchone()[0],
            {r[0] for r in tx.execute("SELECT name FROM sqlite_master WHERE type='table'")},
        )
    )
    assert (version, mode, fk) == (len(MIGRATIONS), "wal", 1)
    assert tables >= TABLES
    await store.close()
    reopened = await Store.open(tmp_path / "s.db")
    assert await reopened.read(lambda tx: tx.execute("PRAGMA user_version").fetchone()[0]) == len(
        MIGRATIONS
    )
    await reopened.close()


async def test_a_store_from_a_newer_teaparty_is_refused(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "s.db") as conn:
        conn.execute(f"PRAGMA user_version={len(MIGRATIONS) + 1}")
    before = set(threading.enumerate())
    with pytest.raises(StoreError, match="newer than this teaparty"):
        await Store.open(tmp_path / "s.db")
    started = [t for t in threading.enumerate() if t not in before]
    for thread in started:
        thread.join(timeout=2)
    assert not [t for t in started if t.is_alive()], "a failed open leaves no connection thread"


async def test_a_second_engine_on_one_store_is_refused(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "s.db")
    with pytest.raises(StoreLockedError, match="in use by another teaparty process"):
        await Store.open(tmp_path / "s.db")
    reader = await Store.open(tmp_path / "s.db", exclusive=False)
    await reader.close()
    await store.close()
    again = await Store.open(tmp_path / "s.db")
    await again.close()


async def test_whether_an_engine_holds_the_store_is_seen_without_taking_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    assert holder(path) is None
    assert not (tmp_path / "s.db.lock").exists(), "looking made nothing"
    store = await Store.open(path)
    assert holder(path) is not None
    assert holder(path) is not None, "a look leaves the holder holding"
    await store.close()
    assert holder(path) is None


async def test_what_an_engine_carries_on_is_read_beside_it(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = await Store.open(path)
    assert holder(path) == "", "said nothing: every job"
    store.claim("job:12")
    assert holder(path) == "job:12"
    store.claim("job:3")
    assert holder(path) == "job:3"
    await store.close()
    assert holder(path) is None
    (tmp_path / "s.db.lock").write_text("job:99")  # left by a holder that died
    again = await Store.open(path)
    try:
        assert holder(path) == ""
    finally:
        await again.close()


def test_an_engine_starting_while_someone_looks_waits_for_the_look(tmp_path: Path) -> None:
    """A probe holds the lock shared for an instant: the engine that meets it tries again."""
    path = tmp_path / "s.db"
    look = os.open(tmp_path / "s.db.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(look, fcntl.LOCK_SH)
    waited: list[float] = []

    def look_ends(seconds: float) -> None:
        waited.append(seconds)
        os.close(look)

    fd = _lock(path, sleep=look_ends)
    os.close(fd)
    assert len(waited) == 1

    holder = _lock(path)
    try:
        with pytest.raises(StoreLockedError, match="in use by another teaparty process"):
            _lock(path, sleep=waited.append)
    finally:
        os.close(holder)
    assert sum(waited[1:]) == pytest.approx(LOCK_PATIENCE_S), "a held store: refused soon"


async def test_a_failing_transaction_commits_nothing(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "s.db")

    def half(tx: sqlite3.Connection) -> None:
        tx.execute(
            "INSERT INTO jobs (job_key, project, title, created_at, updated_at)"
            " VALUES ('k', 'p', 't', 0, 0)"
        )
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await store.write(half)
    assert await store.read(lambda tx: tx.execute("SELECT count(*) FROM jobs").fetchone()[0]) == 0
    await store.close()


async def test_foreign_keys_are_enforced(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "s.db")
    with pytest.raises(sqlite3.IntegrityError):
        await store.write(
            lambda tx: tx.execute(
                "INSERT INTO messages (conversation_id, seq, sender, role, content, created_at)"
                " VALUES ('nope', 1, 'x', 'user', '{}', 0)"
            )
        )
    await store.close()


async def test_concurrent_writes_share_a_commit_and_a_failing_one_rolls_back_alone(
    tmp_path: Path,
) -> None:
    store = await Store.open(tmp_path / "s.db")

    def insert(key: str) -> Callable[[sqlite3.Connection], str]:
        def write(tx: sqlite3.Connection) -> str:
            tx.execute(
                "INSERT INTO jobs (job_key, project, title, created_at, updated_at)"
                " VALUES (?, 'p', 't', 0, 0)",
                (key,),
            )
            if key == "bad":
                raise ValueError("bad write")
            return key

        return write

    keys = [f"k{n}" for n in range(50)] + ["bad"] + [f"m{n}" for n in range(50)]
    results = await asyncio.gather(*(store.write(insert(k)) for k in keys), return_exceptions=True)
    assert [r for r in results if isinstance(r, Exception)] == [results[50]]
    assert str(results[50]) == "bad write"
    stored = await store.read(lambda tx: {r[0] for r in tx.execute("SELECT job_key FROM jobs")})
    assert stored == set(keys) - {"bad"}
    await store.close()


async def test_a_version_1_store_is_migrated_forward_keeping_its_rows(tmp_path: Path) -> None:
    from orchestrator.store.migrations import INITIAL

    with sqlite3.connect(tmp_path / "s.db") as conn:
        conn.executescript(INITIAL)
        conn.execute(
            "INSERT INTO jobs (job_key, project, title, created_at, updated_at)"
            " VALUES ('k', 'p', 't', 0, 0)"
        )
        conn.execute("PRAGMA user_version=1")
    store = await Store.open(tmp_path / "s.db")
    version, jobs = await store.read(
        lambda tx: (
            tx.execute("PRAGMA user_version").fetchone()[0],
            tx.execute("SELECT job_key FROM jobs").fetchall(),
        )
    )
    assert (version, jobs) == (len(MIGRATIONS), [("k",)])
    await store.close()


@pytest.mark.parametrize(
    ("version", "has_execute"),
    [("0.23.0", True), ("0.19.0", True), ("0.22.1", False), ("1.0", True)],
)
def test_an_aiosqlite_outside_the_tested_range_is_refused_by_name(
    version: str, has_execute: bool
) -> None:
    with pytest.raises(StoreError, match=rf"aiosqlite {version} is not in the tested range"):
        check_aiosqlite(version, has_execute)


@pytest.mark.parametrize("version", ["0.20.0", "0.21.0", "0.22.1"])
def test_the_tested_aiosqlite_releases_are_accepted(version: str) -> None:
    check_aiosqlite(version, True)
