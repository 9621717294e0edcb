"""Commands for a job, as rows the process that holds the store carries out.

One engine holds a store at a time (its lock). `teaparty jobs cancel` run beside
`teaparty serve` or a `teaparty run` cannot take it: it writes a `job_commands` row instead,
and the holder carries the row out on its next pass (`watch`, every `POLL_S`), with the
same `withdraw` a cancel that took the store itself uses. A cancel that took the store
writes its row too and carries it out at once, so every cancel is on record. A row is
carried out once; its state then says done or failed, and its outcome why.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from orchestrator.bus import jobs as job_rows
from orchestrator.core.errors import JobNotFoundError, JobStateError, OrchestratorError
from orchestrator.jobs.office import Office
from orchestrator.jobs.withdraw import withdraw
from orchestrator.store.sqlite import Store, Tx, now

log = logging.getLogger(__name__)

POLL_S = 0.5
CommandKind = Literal["cancel"]
CommandState = Literal["pending", "done", "failed"]
Sleep = Callable[[float], Awaitable[None]]
T = TypeVar("T")


class JobCancelledError(OrchestratorError):
    """The job was cancelled (`teaparty jobs cancel`) while this process drove it."""

    def __init__(self, job_id: int, cancel: JobCommand) -> None:
        super().__init__(f"job {job_id} was cancelled (by {cancel.requested_by})")
        self.job_id = job_id
        self.command = cancel


@dataclass(frozen=True)
class JobCommand:
    """One command for a job, as stored: who asked when, and what came of it."""

    command_id: int
    job_id: int
    kind: CommandKind
    requested_by: str
    requested_at: float
    state: CommandState
    outcome: str | None
    finished_at: float | None


_COLUMNS = "command_id, job_id, kind, requested_by, requested_at, state, outcome, finished_at"


async def request(store: Store, job_id: int, kind: CommandKind, *, by: str) -> JobCommand:
    """Record a command for the job, pending (JobNotFoundError: there is no such job)."""
    return await store.write(lambda tx: _insert(tx, job_id, kind, by))


def _insert(tx: Tx, job_id: int, kind: CommandKind, by: str) -> JobCommand:
    if job_rows.get(tx, job_id) is None:
        raise JobNotFoundError(job_id)
    row = tx.execute(
        "INSERT INTO job_commands (job_id, kind, requested_by, requested_at)"
        f" VALUES (?, ?, ?, ?) RETURNING {_COLUMNS}",
        (job_id, kind, by, now()),
    ).fetchone()
    return JobCommand(*row)


async def command(store: Store, command_id: int) -> JobCommand | None:
    """The command with this id, as it stands now."""
    row = await store.read(
        lambda tx: tx.execute(
            f"SELECT {_COLUMNS} FROM job_commands WHERE command_id = ?", (command_id,)
        ).fetchone()
    )
    return None if row is None else JobCommand(*row)


def of_job(tx: Tx, job_id: int) -> list[JobCommand]:
    """The job's commands, oldest first."""
    rows = tx.execute(
        f"SELECT {_COLUMNS} FROM job_commands WHERE job_id = ? ORDER BY command_id", (job_id,)
    )
    return [JobCommand(*row) for row in rows]


async def pending(store: Store) -> list[JobCommand]:
    """Every command not carried out yet, oldest first."""
    rows = await store.read(
        lambda tx: tx.execute(
            f"SELECT {_COLUMNS} FROM job_commands WHERE state = 'pending' ORDER BY command_id"
        ).fetchall()
    )
    return [JobCommand(*row) for row in rows]


async def carry_out(office: Office, commands: list[JobCommand]) -> list[JobCommand]:
    """Carry out each command here, in order; each as it stands after."""
    done: list[JobCommand] = []
    for pending_command in commands:
        state: CommandState
        try:
            withdrawn = await withdraw(
                office, pending_command.job_id, by=pending_command.requested_by
            )
        except (JobNotFoundError, JobStateError) as exc:
            state, outcome = "failed", str(exc)
        else:
            state, outcome = "done", withdrawn.describe()
        log.info("command %d: %s", pending_command.command_id, outcome)
        done.append(await _finish(office.engine.store, pending_command, state, outcome))
    return done


async def _finish(
    store: Store, pending_command: JobCommand, state: CommandState, outcome: str
) -> JobCommand:
    at = now()
    await store.write(
        lambda tx: tx.execute(
            "UPDATE job_commands SET state = ?, outcome = ?, finished_at = ? WHERE command_id = ?",
            (state, outcome, at, pending_command.command_id),
        )
    )
    found = await command(store, pending_command.command_id)
    assert found is not None
    return found


async def watch(
    office: Office, *, driving: int, interval: float = POLL_S, sleep: Sleep = asyncio.sleep
) -> JobCommand:
    """Carry out commands as they come until one is for the job this process is `driving`:
    that one is returned, pending, for the caller to stop driving the job first, then carry
    it out (`teaparty run`)."""
    while True:
        found = await pending(office.engine.store)
        await carry_out(office, [c for c in found if c.job_id != driving])
        mine = [c for c in found if c.job_id == driving]
        if mine:
            return mine[0]
        await sleep(interval)


async def serve(office: Office, *, interval: float = POLL_S, sleep: Sleep = asyncio.sleep) -> None:
    """Carry out every command as it comes, until cancelled (`teaparty serve`)."""
    while True:
        await carry_out(office, await pending(office.engine.store))
        await sleep(interval)


async def driving(office: Office, job_id: int, drive: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """`drive()` the job, carrying out commands meanwhile (`watch`); a cancel of this job
    stops the drive, then is carried out: JobCancelledError. A command that came as the job
    ended is carried out before this returns."""
    drove = asyncio.create_task(drive())
    watcher = asyncio.create_task(watch(office, driving=job_id))
    try:
        await asyncio.wait({drove, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if drove.done():
            watcher.cancel()
            await carry_out(office, await pending(office.engine.store))
            return drove.result()
        drove.cancel()
        await asyncio.wait({drove})
        [cancel] = await carry_out(office, [watcher.result()])
        if cancel.state == "done":
            raise JobCancelledError(job_id, cancel)
        return await drive()  # it ended before the cancel could: as it ended, then
    finally:
        for task in (drove, watcher):
            task.cancel()
        await asyncio.wait({drove, watcher})
