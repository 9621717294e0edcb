"""What `teaparty jobs` changes: a cancel, an answer, a clean-up, each through the engine.

A change takes the store as any engine does (its lock), through an Office that runs no
agent (`managing`). When another process holds the store (`teaparty serve`, a `teaparty
run`), a cancel is a command row instead, which that process carries out on its next pass
(jobs/commands.py); an answer or a clean-up is refused (StoreLockedError), as a question
being asked at that run's terminal is answered there.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.bus import jobs as job_rows
from orchestrator.bus.gates import Gate
from orchestrator.config import load_organisation, load_project
from orchestrator.core.errors import JobNotFoundError, JobStateError, StoreLockedError
from orchestrator.jobs import commands
from orchestrator.jobs.commands import JobCommand
from orchestrator.jobs.office import Office
from orchestrator.jobs.offline import DemoModel
from orchestrator.jobs.views import JobOrigin
from orchestrator.jobs.withdraw import ENDED
from orchestrator.sandbox.confine import Sandbox
from orchestrator.store.sqlite import Store

NO_AGENTS = Sandbox("unavailable", "no agent runs here: the store is open to manage its jobs")
CANCEL_WAIT_S = 10.0
Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class Cancel:
    """A cancel as it stands: its command row, and whether this process carried it out."""

    command: JobCommand
    here: bool


@contextlib.asynccontextmanager
async def managing(home: Path, *, org_dir: Path) -> AsyncIterator[Office]:
    """The store under `home`, held, in an Office that runs no agent (StoreLockedError when
    another process holds it; JobNotFoundError-free: a missing store is simply empty)."""
    office = await Office.open(
        home,
        org=load_organisation(org_dir),
        projects=[],
        models=lambda _: DemoModel(),  # nothing runs: the scheduler is never started
        env={},
        sandbox=NO_AGENTS,
        scripted=True,
    )
    try:
        yield office
    finally:
        await office.close()


async def cancel_job(
    home: Path,
    job_id: int,
    *,
    org_dir: Path,
    by: str,
    wait_s: float = CANCEL_WAIT_S,
    sleep: Sleep = asyncio.sleep,
) -> Cancel:
    """Cancel the job here, or, when another process holds the store, ask it to and wait
    up to `wait_s` for it to (the row stays pending after: it is carried out later)."""
    if not _exists(home / "teaparty.db"):
        raise JobNotFoundError(job_id)
    try:
        async with managing(home, org_dir=org_dir) as office:
            await _cancellable(office.engine.store, job_id)
            row = await commands.request(office.engine.store, job_id, "cancel", by=by)
            [done] = await commands.carry_out(office, [row])
            return Cancel(done, here=True)
    except StoreLockedError:
        pass
    store = await Store.attach(home / "teaparty.db", readonly=False)
    try:
        await _cancellable(store, job_id)
        row = await commands.request(store, job_id, "cancel", by=by)
        deadline = time.monotonic() + wait_s
        while row.state == "pending" and time.monotonic() < deadline:
            await sleep(commands.POLL_S / 2)
            row = await commands.command(store, row.command_id) or row
        return Cancel(row, here=False)
    finally:
        await store.close()


async def _cancellable(store: Store, job_id: int) -> None:
    """JobNotFoundError when there is no such job, JobStateError when it has ended: a cancel
    of it would change nothing, so none is recorded."""
    row = await store.read(lambda tx: job_rows.get(tx, job_id))
    if row is None:
        raise JobNotFoundError(job_id)
    if row.state != "active":
        ended = ENDED.get(row.state, row.state)
        raise JobStateError(f"job {job_id} has already ended ({ended}): nothing to cancel")


async def answer_job(home: Path, job_id: int, gate_id: int, *, text: str, org_dir: Path) -> Gate:
    """Answer an open gate of a local job as its project's decider (Office.answer_gate)."""
    if not _exists(home / "teaparty.db"):
        raise JobNotFoundError(job_id)
    async with managing(home, org_dir=org_dir) as office:
        record = await office.records.job(job_id)
        if record is None:
            raise JobNotFoundError(job_id)
        origin = JobOrigin.of_key(record.job_key)
        if origin.forge == "github":
            raise JobStateError(
                f"job {job_id} is a GitHub job: its questions are answered on the issue, "
                f"{origin.repository}#{origin.issue}, by the decider's reply"
            )
        if record.state != "active":
            raise JobStateError(f"job {job_id} has ended ({ENDED.get(record.state)})")
        if gate_id not in {g.gate_id for g in await office.open_gates(job_id)}:
            raise JobStateError(f"gate {gate_id} is not an open question of job {job_id}")
        decider = await _decider(office, job_id, record.project)
        return await office.answer_gate(gate_id, text=text, answered_by=decider)


async def _decider(office: Office, job_id: int, project: str) -> str:
    """Who answers the job's questions: the decider of the project it runs under."""
    kept = await office.engine.store.read(lambda tx: job_rows.stored_project(tx, job_id))
    text = (kept.text if kept is not None else None) or ""
    where = f"job {job_id}"
    kinds = office.engine.bus.extensions.kinds
    loaded = load_project(text, org=office.org, source=where, default_name=project, kinds=kinds)
    return loaded.humans.decider


def _exists(path: Path) -> bool:
    return path.is_file()
