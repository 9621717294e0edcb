"""Commands for a job from beside the process holding the store: a row, carried out by the
holder on its next pass; and the store opened beside its holder, read-only or to add a row."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from jobs_harness import Parking, drive, open_office, start
from local_repo import make_repo

from orchestrator.core.errors import (
    JobNotFoundError,
    StoreError,
    StoreLockedError,
    StoreVersionError,
)
from orchestrator.jobs import commands
from orchestrator.store.sqlite import Store


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "widgets")


async def test_the_store_opens_beside_its_holder_read_only_or_to_add_a_row(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    with pytest.raises(StoreError, match="no store at"):
        await Store.attach(path)
    holder = await Store.open(path)
    try:
        with pytest.raises(StoreLockedError):
            await Store.open(path)
        await holder.write(
            lambda tx: tx.execute(
                "INSERT INTO jobs (job_key, project, title, created_at, updated_at)"
                " VALUES ('k', 'p', 't', 0, 0)"
            )
        )
        reader = await Store.attach(path)
        try:
            count = await reader.read(lambda tx: tx.execute("SELECT count(*) FROM jobs").fetchone())
            assert count == (1,)
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                await reader.write(lambda tx: tx.execute("DELETE FROM jobs"))
        finally:
            await reader.close()
        writer = await Store.attach(path, readonly=False)
        try:
            cancel = await commands.request(writer, 1, "cancel", by="alice")
            with pytest.raises(JobNotFoundError, match="no job 2"):
                await commands.request(writer, 2, "cancel", by="alice")
        finally:
            await writer.close()
        assert await commands.pending(holder) == [cancel], "the holder sees the row"
        assert (cancel.state, cancel.requested_by, cancel.outcome) == ("pending", "alice", None)
    finally:
        await holder.close()


async def test_a_store_of_another_version_is_not_read_beside_its_holder(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    await (await Store.open(path)).close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version=3")
    with pytest.raises(StoreVersionError, match="schema version 3") as raised:
        await Store.attach(path)
    assert (raised.value.found, raised.value.expected) == (3, raised.value.expected)


async def test_the_holder_carries_out_commands_on_its_next_pass(repo: Path, tmp_path: Path) -> None:
    office = await open_office(tmp_path / "home")
    try:
        parked, other = [await start(office, repo, title) for title in ("Add docs", "Fix typo")]
        for job_id in (parked, other):
            assert await drive(office, Parking(office), job_id) == "waiting"
        beside = await Store.attach(office.engine.store.path, readonly=False)
        try:
            first = await commands.request(beside, parked, "cancel", by="alice")
            second = await commands.request(beside, parked, "cancel", by="bob")
        finally:
            await beside.close()

        slept: list[float] = []

        async def one_pass(seconds: float) -> None:
            slept.append(seconds)
            raise asyncio.CancelledError

        with pytest.raises(asyncio.CancelledError):
            await commands.serve(office, sleep=one_pass)
        assert slept == [commands.POLL_S]
        done = [await commands.command(office.engine.store, c.command_id) for c in (first, second)]
        assert [(c.state, c.outcome) for c in done if c is not None] == [
            (
                "done",
                f"job {parked} cancelled: 1 open gate closed, 2 conversations stopped, "
                "1 task cancelled",
            ),
            ("done", f"job {parked} was already cancelled"),
        ]
        assert await commands.pending(office.engine.store) == []
        record = await office.records.job(other)
        assert record is not None
        assert record.state == "active", "other jobs go on"
    finally:
        await office.close()


async def test_a_run_driving_its_job_stops_when_it_is_cancelled(repo: Path, tmp_path: Path) -> None:
    office = await open_office(tmp_path / "home")
    try:
        mine, other = [await start(office, repo, title) for title in ("Add docs", "Fix typo")]
        asked = asyncio.Event()

        async def drive_mine() -> str:
            asked.set()
            await asyncio.Event().wait()  # the question, asked at a terminal nobody answers
            return "never"

        running = asyncio.create_task(commands.driving(office, mine, drive_mine))
        await asyncio.wait_for(asked.wait(), 10)
        for job_id in (other, mine):
            await commands.request(office.engine.store, job_id, "cancel", by="alice")
        with pytest.raises(commands.JobCancelledError, match=f"job {mine} was cancelled"):
            await asyncio.wait_for(running, 10)
        states = [await office.records.job(j) for j in (mine, other)]
        assert [r.state for r in states if r is not None] == ["withdrawn", "withdrawn"]

        finished = await start(office, repo, "Rename it")

        late: list[commands.JobCommand] = []

        async def drive_to_the_end() -> str:
            late.append(await commands.request(office.engine.store, other, "cancel", by="carl"))
            return "ended"

        assert await commands.driving(office, finished, drive_to_the_end) == "ended"
        carried = await commands.command(office.engine.store, late[0].command_id)
        assert carried is not None, "carried out as the drive ended"
        assert (carried.state, carried.outcome) == ("done", f"job {other} was already cancelled")
    finally:
        await office.close()
