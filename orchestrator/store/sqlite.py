"""The embedded store: one SQLite file (WAL) opened through aiosqlite, migrated at open.

Every write is one synchronous function run whole in aiosqlite's connection thread:
one thread hand-off per transaction instead of one per statement, and writes that queue
up while a commit is under way share the next one. Measured here, a
five-statement transaction runs at ~740/s statement by statement and ~4,400/s whole
(docs/performance.md). aiosqlite has no public call for "run this callable in your thread",
so `_in_thread` uses its `_execute`; `Store.open` checks it exists and fails clearly if a
future aiosqlite drops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import logging
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, Self, TypeVar, cast

import aiosqlite

from orchestrator.core.errors import StoreError, StoreLockedError, StoreVersionError
from orchestrator.store.migrations import MIGRATIONS

log = logging.getLogger(__name__)

T = TypeVar("T")
Synchronous = Literal["NORMAL", "FULL"]
Tx = sqlite3.Connection
CHECKPOINT_INTERVAL_S = 0.5


def _in_thread(conn: aiosqlite.Connection, fn: Callable[[Tx], T]) -> asyncio.Future[T]:
    raw: Any = conn
    return raw._execute(lambda: fn(raw._conn))  # type: ignore[no-any-return]


# aiosqlite releases whose private Connection._execute the store was tested with (its
# signature is `_execute(fn, *args)` in each); pyproject.toml pins the same range.
AIOSQLITE_TESTED = ((0, 20), (0, 23))
AIOSQLITE_RANGE = ">=0.20,<0.23"


def check_aiosqlite(version: str, has_execute: bool) -> None:
    """Refuse an aiosqlite outside the tested range, naming it (StoreError)."""
    low, high = AIOSQLITE_TESTED
    found = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    if has_execute and low <= found < high:
        return
    raise StoreError(
        f"aiosqlite {version} is not in the tested range {AIOSQLITE_RANGE}: the store runs its "
        "transactions through aiosqlite's private Connection._execute; "
        f"install 'aiosqlite{AIOSQLITE_RANGE}'"
    )


class Store:
    """A migrated SQLite store; `write` runs one transaction, `read` one consistent read."""

    def __init__(self, conn: aiosqlite.Connection, path: Path, lock_fd: int | None) -> None:
        self._conn = conn
        self._checkpoint_conn: aiosqlite.Connection | None = None
        self.path = path
        self._lock_fd = lock_fd
        self._checkpointer: asyncio.Task[None] | None = None
        self._batch: list[tuple[Callable[[Tx], Any], asyncio.Future[Any]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._closed = False
        self._attached = False

    @classmethod
    async def open(
        cls, path: Path, *, synchronous: Synchronous = "FULL", exclusive: bool = True
    ) -> Self:
        """Open (creating if needed) and migrate the store at `path`.

        With `exclusive`, the caller becomes the one engine for this file: a second engine
        on the same store is refused, so nothing the store marks as running belongs to
        anyone but a dead predecessor or us.
        """
        check_aiosqlite(aiosqlite.__version__, hasattr(aiosqlite.Connection, "_execute"))
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _private(path)
        lock_fd = _lock(path) if exclusive else None
        conn: aiosqlite.Connection | None = None
        try:
            conn = await aiosqlite.connect(path, isolation_level=None)
            store = cls(conn, path, lock_fd)
            await store._configure(synchronous)
            await store._migrate()
        except BaseException:
            # A connection left open keeps aiosqlite's (non-daemon) thread alive.
            if conn is not None:
                await conn.close()
            if lock_fd is not None:
                os.close(lock_fd)
            raise
        if exclusive:
            store._checkpoint_conn = await aiosqlite.connect(path, isolation_level=None)
            store._checkpointer = asyncio.create_task(store._checkpoint_loop())
        return store

    @classmethod
    async def attach(cls, path: Path, *, readonly: bool = True) -> Self:
        """Open the store beside the process that may hold it: no lock, no migration.

        `readonly` opens the file read-only (`mode=ro`), so nothing here can change it;
        otherwise writes are allowed (SQLite serialises them with the holder's). A store of
        another schema version is refused (StoreVersionError): its holder, or a migration,
        must come first. A missing file is a StoreError.
        """
        check_aiosqlite(aiosqlite.__version__, hasattr(aiosqlite.Connection, "_execute"))
        uri = _uri(path, "ro" if readonly else "rw")
        conn = await aiosqlite.connect(uri, uri=True, isolation_level=None)
        store = cls(conn, path, None)
        store._attached = True
        try:
            version = await _in_thread(conn, _attach)
        except BaseException:
            await conn.close()
            raise
        if version != len(MIGRATIONS):
            await conn.close()
            raise StoreVersionError(
                f"{path} has schema version {version}; this teaparty reads version "
                f"{len(MIGRATIONS)}",
                found=version,
                expected=len(MIGRATIONS),
            )
        return store

    async def _configure(self, synchronous: Synchronous) -> None:
        def configure(tx: Tx) -> None:
            mode = tx.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode != "wal":
                raise StoreError(f"{self.path}: cannot enable WAL (journal_mode={mode!r})")
            tx.execute(f"PRAGMA synchronous={synchronous}")
            tx.execute("PRAGMA foreign_keys=ON")
            tx.execute("PRAGMA busy_timeout=5000")
            # Automatic checkpoints stall a commit for 8-20 ms every few hundred rows;
            # a background PASSIVE checkpoint does the same work off the write path.
            tx.execute("PRAGMA wal_autocheckpoint=0")

        await _in_thread(self._conn, configure)

    async def _migrate(self) -> None:
        def migrate(tx: Tx) -> None:
            version = tx.execute("PRAGMA user_version").fetchone()[0]
            if version > len(MIGRATIONS):
                raise StoreError(
                    f"{self.path}: schema version {version} is newer than this teaparty "
                    f"({len(MIGRATIONS)}); upgrade teaparty"
                )
            # A migration may rebuild a table others refer to (SQLite's way to change a
            # CHECK): foreign keys are off while it runs and checked before it commits.
            tx.execute("PRAGMA foreign_keys=OFF")
            try:
                for number in range(version + 1, len(MIGRATIONS) + 1):
                    _apply(tx, self.path, number)
                    log.info("store %s migrated to version %d", self.path, number)
            finally:
                tx.execute("PRAGMA foreign_keys=ON")

        await _in_thread(self._conn, migrate)

    async def write(self, fn: Callable[[Tx], T]) -> T:
        """Run `fn` atomically; when this returns, its writes are committed.

        Writes that arrive while a commit is under way share the next transaction (group
        commit: one fsync for all of them). Each runs in its own savepoint, so one that
        raises rolls back alone and its caller gets the exception.
        """
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._batch.append((fn, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        return cast(T, await future)

    async def _flush(self) -> None:
        while self._batch:
            batch, self._batch = self._batch, []
            try:
                outcomes = await _in_thread(
                    self._conn, functools.partial(_commit_group, batch=batch)
                )
            except BaseException as exc:  # the COMMIT itself failed: nothing of the group holds
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise
                continue
            for (_, future), (ok, value) in zip(batch, outcomes, strict=True):
                if future.done():
                    continue
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)

    async def read(self, fn: Callable[[Tx], T]) -> T:
        """Run `fn` inside one read transaction, so it sees a single snapshot."""

        def snapshot(tx: Tx) -> T:
            tx.execute("BEGIN")
            try:
                return fn(tx)
            finally:
                tx.execute("COMMIT")

        return await _in_thread(self._conn, snapshot)

    def claim(self, scope: str) -> None:
        """Say, in the lock file, what this engine carries on (`holder` reads it): a local
        run its one job. Nothing said means all the store's jobs."""
        if self._lock_fd is not None:
            os.ftruncate(self._lock_fd, 0)
            os.pwrite(self._lock_fd, scope.encode(), 0)

    async def checkpoint(self) -> None:
        """Copy the WAL into the database file on a second connection, off the write path."""
        conn = self._checkpoint_conn or self._conn
        await _in_thread(conn, lambda tx: tx.execute("PRAGMA wal_checkpoint(PASSIVE)"))

    async def _checkpoint_loop(self) -> None:
        while True:
            await asyncio.sleep(CHECKPOINT_INTERVAL_S)
            try:
                await self.checkpoint()
            except (sqlite3.Error, ValueError) as exc:
                log.warning("store %s: checkpoint failed: %s", self.path, exc)

    async def close(self) -> None:
        """Checkpoint, close the connection and release the engine lock."""
        if self._closed:
            return
        self._closed = True
        if self._flusher is not None:
            await self._flusher
        if self._checkpointer is not None:
            self._checkpointer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._checkpointer
        if not self._attached:  # the holder's to do: it may be writing
            with contextlib.suppress(sqlite3.Error):
                await _in_thread(
                    self._conn, lambda tx: tx.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                )
        await self._conn.close()
        if self._checkpoint_conn is not None:
            await self._checkpoint_conn.close()
        if self._lock_fd is not None:
            os.ftruncate(self._lock_fd, 0)  # what it carried on is nobody's now
            os.close(self._lock_fd)


Outcome = tuple[bool, Any]


def _commit_group(
    tx: Tx, *, batch: list[tuple[Callable[[Tx], Any], asyncio.Future[Any]]]
) -> list[Outcome]:
    """One transaction for a group of writes, each isolated in a savepoint."""
    tx.execute("BEGIN IMMEDIATE")
    outcomes: list[Outcome] = []
    try:
        for fn, _ in batch:
            tx.execute("SAVEPOINT step")
            try:
                value = fn(tx)
            except Exception as exc:  # handed to this write's caller; the others go on
                tx.execute("ROLLBACK TO step")
                outcomes.append((False, exc))
            else:
                outcomes.append((True, value))
            tx.execute("RELEASE step")
        tx.execute("COMMIT")
    except BaseException:
        if tx.in_transaction:
            tx.execute("ROLLBACK")
        raise
    return outcomes


def _uri(path: Path, mode: str) -> str:
    """The URI that opens the store at `path` in `mode` (ro, rw), never creating it."""
    if not path.is_file():
        raise StoreError(f"no store at {path}")
    return f"{path.resolve().as_uri()}?mode={mode}"


def _attach(tx: Tx) -> int:
    """Settings of a connection beside the holder's; the schema version it finds."""
    tx.execute("PRAGMA foreign_keys=ON")
    tx.execute("PRAGMA busy_timeout=5000")
    return int(tx.execute("PRAGMA user_version").fetchone()[0])


def _private(path: Path) -> None:
    """The store file exists and only its owner may read it (SQLite gives -wal/-shm its mode)."""
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    os.chmod(path, 0o600)


# A reader's probe (`held`) takes the lock shared for an instant; an engine that meets one
# tries again for this long before it calls the store in use.
LOCK_PATIENCE_S = 0.5
LOCK_RETRY_S = 0.01


def _lock(path: Path, *, sleep: Callable[[float], None] = time.sleep) -> int:
    lock_path = _lock_path(path)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    for _ in range(round(LOCK_PATIENCE_S / LOCK_RETRY_S)):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            sleep(LOCK_RETRY_S)
        else:
            os.ftruncate(fd, 0)  # what a holder before this one said it carried on
            return fd
    os.close(fd)
    raise StoreLockedError(f"{path} is in use by another teaparty process (lock {lock_path})")


def _lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def holder(path: Path) -> str | None:
    """What the engine holding the store at `path` carries on, as it said (`Store.claim`;
    "" when it said nothing: every job); None when no engine holds it.

    The probe takes the lock shared and lets it go at once, without creating anything; an
    engine starting in that instant waits for it (`_lock` tries again for a moment). The lock
    itself is the same flock every teaparty takes, so the answer is right beside an older one.
    """
    try:
        fd = os.open(_lock_path(path), os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return os.pread(fd, 200, 0).decode(errors="replace")
    finally:
        os.close(fd)  # closing the descriptor lets go of a shared lock it took
    return None


@contextlib.contextmanager
def engine_lock(path: Path) -> Iterator[None]:
    """Hold the engine lock of the store at `path` while replacing its file from outside;
    StoreLockedError when an engine has the store open."""
    fd = _lock(path)
    try:
        yield
    finally:
        os.close(fd)


def now() -> float:
    """Wall-clock seconds for created_at columns."""
    return time.time()


def _apply(tx: Tx, path: Path | str, number: int) -> None:
    """Run migration `number` in one transaction; nothing of it stays if it fails or leaves
    a row referring to one that is not there."""
    try:
        tx.executescript(f"BEGIN IMMEDIATE;{MIGRATIONS[number - 1]};PRAGMA user_version={number};")
        broken = tx.execute("PRAGMA foreign_key_check").fetchall()
        if broken:
            table, rowid, parent, _ = broken[0]
            raise sqlite3.IntegrityError(
                f"{len(broken)} row(s) refer to missing rows: {table} rowid {rowid} -> {parent}"
            )
        tx.execute("COMMIT")
    except sqlite3.Error as exc:
        if tx.in_transaction:
            tx.execute("ROLLBACK")
        raise StoreError(f"{path}: migration {number} failed: {exc}") from exc


async def attach_beside(path: Path) -> Store:
    """The store read-only; one of an older version migrated first, when nobody holds it."""
    try:
        return await Store.attach(path)
    except StoreVersionError as exc:
        if exc.found > exc.expected:
            raise
        try:
            await (await Store.open(path)).close()  # migrates it
        except StoreLockedError:
            raise StoreVersionError(
                f"{exc}: the teaparty holding it is older; read it with that one, or stop it",
                found=exc.found,
                expected=exc.expected,
            ) from None
        return await Store.attach(path)
