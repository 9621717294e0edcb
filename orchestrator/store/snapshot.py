"""Whole-store copies: a consistent snapshot of a store in use, and putting one in its place.

Runner mode keeps the store between workflow runs as one file in git. A WAL-mode store is
not one file: committed transactions may still sit in `teaparty.db-wal`, so copying the
database file by its bytes can lose them or tear a page. `snapshot` uses SQLite's online
backup API instead: one read transaction sees the database and its WAL as they were at one
commit, whether an engine holds the store open or not, and the copy is switched to a
rollback journal, so it is a single self-contained file (no `-wal` beside it).

`restore` is the other way: a snapshot checked (`PRAGMA quick_check`) and moved into the
store's place under the engine lock, so no engine has it open, with any WAL or shared-memory
file of the store it replaces removed first (a stale WAL would be replayed onto the new file).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sqlite3
from pathlib import Path

from orchestrator.core.errors import StoreError
from orchestrator.store.sqlite import engine_lock

_BESIDE = ("-wal", "-shm", "-journal")  # files SQLite keeps next to a database


def snapshot(store: Path, dest: Path) -> int:
    """Copy the store at `store` into `dest` as one consistent rollback-journal file; return
    its schema version (`PRAGMA user_version`). Works while an engine holds the store."""
    if not store.is_file():
        raise StoreError(f"no store at {store} to snapshot")
    partial = dest.with_name(dest.name + ".partial")
    _remove(partial)
    source = sqlite3.connect(f"{store.resolve().as_uri()}?mode=rw", uri=True)
    try:
        source.execute("PRAGMA query_only=1")
        source.execute("PRAGMA busy_timeout=5000")
        copy = sqlite3.connect(partial)
        try:
            source.backup(copy)  # all pages in one step: one read transaction, one commit's view
            mode = copy.execute("PRAGMA journal_mode=DELETE").fetchone()[0]
            version = int(copy.execute("PRAGMA user_version").fetchone()[0])
        finally:
            copy.close()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot snapshot the store at {store}: {exc}") from exc
    finally:
        source.close()
    if mode != "delete":
        raise StoreError(f"the snapshot of {store} stayed in journal mode {mode!r}")
    os.replace(partial, dest)
    return version


def restore(snapshot_file: Path, store: Path) -> int:
    """Put the snapshot at `snapshot_file` in place of the store at `store` (none may be
    there yet); return its schema version. StoreLockedError when an engine holds the store;
    StoreError when the snapshot is not a sound SQLite database."""
    version = check(snapshot_file)
    store.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with engine_lock(store):
        incoming = store.with_name(store.name + ".restoring")
        _remove(incoming)
        descriptor = os.open(incoming, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "wb") as out, snapshot_file.open("rb") as source:
            shutil.copyfileobj(source, out)
            out.flush()
            os.fsync(out.fileno())
        for suffix in _BESIDE:  # before the file they belong to goes: never replayed on the new
            _remove(store.with_name(store.name + suffix))
        os.replace(incoming, store)
    return version


def check(path: Path) -> int:
    """The schema version of the database at `path`, once SQLite finds it sound."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise StoreError(f"{path} is not a readable SQLite database: {exc}") from exc
    try:
        verdict = db.execute("PRAGMA quick_check").fetchone()[0]
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.Error as exc:
        raise StoreError(f"{path} is not a sound SQLite database: {exc}") from exc
    finally:
        db.close()
    if verdict != "ok":
        raise StoreError(f"{path} is damaged: {verdict}")
    return version


async def snapshot_store(store: Path, dest: Path) -> int:
    """`snapshot`, off the event loop."""
    return await asyncio.to_thread(snapshot, store, dest)


async def restore_store(snapshot_file: Path, store: Path) -> int:
    """`restore`, off the event loop."""
    return await asyncio.to_thread(restore, snapshot_file, store)


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
