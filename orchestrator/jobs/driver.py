"""Jobs carried to their end through a Forge: status shown, gates asked, the branch delivered.

The engine's scheduler runs conversations on its own; the driver looks at one job at a
time, as the store has it, and makes the world outside agree: the status where the
requester reads it, each open gate asked, and once the office manager has replied, the
job branch published and its change request opened. Every Forge call is idempotent, so
`sync` may run any number of times, after any crash.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from orchestrator.bus.failures import Failure
from orchestrator.bus.messages import job_conversation_id
from orchestrator.errors import OrchestratorError
from orchestrator.jobs.office import JobHandle, Office
from orchestrator.ports import Forge, JobState, JobStatus
from orchestrator.store.sqlite import Tx
from orchestrator.teams.board import Task, list_tasks
from orchestrator.workspace.layout import JobSpace

log = logging.getLogger(__name__)

Forges = Callable[[int], Awaitable[Forge | None]]


class JobDriver:
    """Brings each job's outside world in line with the store, one sync at a time per job."""

    def __init__(self, office: Office, forges: Forges) -> None:
        self.office = office
        self.forges = forges
        self._locks: dict[int, asyncio.Lock] = {}

    async def status(self, job_id: int, *, link: str | None = None) -> JobStatus:
        """The job's status from the store."""
        row, tasks, gates, result = await self.office.engine.store.read(
            lambda tx: _job_facts(tx, job_id)
        )
        title, state, branch, project = row
        spent = await self.office.budget.spent(job_id)
        failed = await self.office.failures(job_id)
        failure = "; ".join(_describe(f) for f in failed) or None
        phase, step = _phase(state, tasks, gates, result, failure)
        sandbox = self.office.sandbox_summary(project)
        return JobStatus(
            job_id,
            title,
            phase,
            step,
            tasks,
            spent.usage,
            spent.usd,
            branch,
            result,
            link,
            failure,
            sandbox,
        )

    async def sync(self, job_id: int) -> JobState:
        """Make the outside agree with the store for one job; the state it is in."""
        lock = self._locks.setdefault(job_id, asyncio.Lock())
        async with lock:
            forge = await self.forges(job_id)
            if forge is None:
                return (await self.status(job_id)).state
            return await self._sync(job_id, forge)

    async def _sync(self, job_id: int, forge: Forge) -> JobState:
        status = await self.status(job_id)
        if status.state == "failed":
            await forge.fail(status, status.error or "unknown failure")
            return status.state
        await forge.show(status)
        if status.state == "done":
            return status.state
        space = await self._space(job_id, forge)
        if status.state == "waiting":
            for gate in await self.office.open_gates(job_id):
                await forge.ask(status, gate)
        if status.state != "delivering":
            return status.state
        job = JobHandle(job_id, job_conversation_id(job_id), space, created=False)
        try:
            link = await forge.deliver(status, job)
        except OrchestratorError as exc:  # ForgeError, GitError: said once, retried on request
            log.warning("job %d: delivery failed: %s", job_id, exc)
            await self.office.delivery_failed(job_id, f"delivering the work failed: {exc}")
            failed = await self.status(job_id)
            await forge.fail(failed, failed.error or str(exc))
            return "failed"
        await self.office.finish_job(job, status.result)
        done = await self.status(job_id, link=link)
        await forge.show(done)
        return done.state

    async def _space(self, job_id: int, forge: Forge) -> JobSpace:
        """The job's workspace; made here, in the job's own sync, the first time (a clone)."""
        space = await self.office.workspace.job(job_id)
        if space is not None:
            return space
        return await self.office.prepare(job_id, auth=await forge.credentials())

    async def retry(self, job_id: int) -> list[str]:
        """Forget the job's failures and run again what failed; what was retried."""
        return [f.failure_key for f in await self.office.retry(job_id)]


def _describe(failure: Failure) -> str:
    if failure.kind == "delivery":
        return failure.reason
    return f"{failure.failure_key}: {failure.reason}"


def _job_facts(
    tx: Tx, job_id: int
) -> tuple[tuple[str, str, str, str], tuple[Task, ...], list[int], str | None]:
    row = tx.execute(
        "SELECT j.title, j.state, coalesce(w.branch, ''), j.project FROM jobs j"
        " LEFT JOIN job_workspaces w USING (job_id) WHERE j.job_id = ?",
        (job_id,),
    ).fetchone()
    if row is None:
        raise OrchestratorError(f"no job {job_id}")
    gates = [
        g
        for (g,) in tx.execute(
            "SELECT gate_id FROM gates WHERE job_id = ? AND answer IS NULL", (job_id,)
        )
    ]
    (result,) = tx.execute(
        "SELECT result FROM conversations WHERE conversation_id = ?",
        (job_conversation_id(job_id),),
    ).fetchone()
    return (row[0], row[1], row[2], row[3]), tuple(list_tasks(tx, job_id)), gates, result


def _phase(
    state: str, tasks: tuple[Task, ...], gates: list[int], result: str | None, failure: str | None
) -> tuple[JobState, str]:
    if state == "complete":
        return "done", "done"
    if failure is not None:
        return "failed", "stopped by an error"
    if gates:
        return "waiting", f"waiting for an answer to {len(gates)} question(s)"
    if result is not None:
        return "delivering", "delivering the work: the job branch and its change request"
    if not tasks:
        return "planning", "planning the work"
    active = [t for t in tasks if t.state in ("in_progress", "in_review")]
    if active:
        names = ", ".join(f"#{t.number} {t.title}" for t in active)
        return "working", f"working on {names}"
    pending = sum(t.state in ("pending", "blocked") for t in tasks)
    return "working", f"{pending} task(s) to go" if pending else "reviewing the job"
