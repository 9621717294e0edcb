"""Cancelling a job: it ends as cancelled in one transaction, its questions closed, its
conversations stopped (a turn under way included), its worktree left for a look."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from jobs_harness import Parking, drive, open_office, start
from local_repo import make_repo

from orchestrator.core.errors import GateClosedError, JobNotFoundError, JobStateError
from orchestrator.core.messages import AssistantTurn
from orchestrator.core.model import ModelRequest
from orchestrator.jobs.driver import JobDriver
from orchestrator.jobs.withdraw import withdraw
from orchestrator.teams.board import task_log


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "widgets")


async def test_a_parked_job_is_cancelled_whole(repo: Path, tmp_path: Path) -> None:
    office = await open_office(tmp_path / "home")
    try:
        forge = Parking(office)
        job_id = await start(office, repo, "Add docs")
        assert await drive(office, forge, job_id) == "waiting"
        [gate] = await office.open_gates(job_id)
        assert await office.control.pause(job_id, by="carol")

        withdrawn = await withdraw(office, job_id, by="alice")
        assert (withdrawn.gates, withdrawn.conversations, withdrawn.tasks) == (
            (gate.gate_id,),
            2,
            (1,),  # the plan's task, never started
        )
        assert withdrawn.describe() == (
            f"job {job_id} cancelled: 1 open gate closed, 2 conversations stopped, 1 task cancelled"
        )
        record = await office.records.job(job_id)
        assert record is not None
        assert record.state == "withdrawn"
        assert await office.control.paused_by(job_id) is None, "a cancelled job is not held"
        assert await office.open_gates() == []
        assert await office.engine.bus.runnable() == []
        with pytest.raises(GateClosedError, match="its job was cancelled"):
            await office.answer_gate(gate.gate_id, text="yes", answered_by="carol")
        log = await office.engine.store.read(lambda tx: task_log(tx, job_id))
        assert log[-1] == (None, "job cancelled", "by alice")

        assert await drive(office, forge, job_id) == "cancelled"
        status = await JobDriver(office, lambda _: _none()).status(job_id)
        assert (status.state, status.step) == ("cancelled", "cancelled")
        again = await withdraw(office, job_id, by="bob")
        assert again.already
        assert again.describe() == f"job {job_id} was already cancelled"
        space = await office.workspace.job(job_id)
        assert space is not None
    finally:
        await office.close()
    reopened = await open_office(tmp_path / "home")
    try:
        assert space.path.is_dir(), "a cancelled job's worktree stays until jobs clean"
    finally:
        await reopened.close()


async def test_a_job_that_ended_cannot_be_cancelled(repo: Path, tmp_path: Path) -> None:
    office = await open_office(tmp_path / "home")
    try:
        job_id = await start(office, repo, "Add docs")
        forge = Parking(office, answers={"The plan:": "yes"})
        assert await drive(office, forge, job_id) == "waiting"
        [gate] = await office.open_gates(job_id)
        await office.answer_gate(gate.gate_id, text="yes", answered_by="carol")
        assert await drive(office, forge, job_id) == "done"
        with pytest.raises(JobStateError, match=f"job {job_id} has already ended \\(done\\)"):
            await withdraw(office, job_id, by="alice")
        with pytest.raises(JobNotFoundError, match="no job 99"):
            await withdraw(office, 99, by="alice")
    finally:
        await office.close()


async def test_a_turn_under_way_is_stopped_and_writes_nothing(repo: Path, tmp_path: Path) -> None:
    """The project lead's model call hangs (the office manager's hand-over is the engine's,
    jobs/flat_manager.py); the cancel ends it, and no failure is left."""
    called = asyncio.Event()

    class Hanging:
        async def complete(self, request: ModelRequest) -> AssistantTurn:
            called.set()
            await asyncio.Event().wait()
            raise AssertionError("never answers")

    office = await open_office(tmp_path / "home", models=lambda _: Hanging())
    try:
        job_id = await start(office, repo, "Add docs")
        running = asyncio.create_task(office.run_until_idle())
        await asyncio.wait_for(called.wait(), 10)
        withdrawn = await withdraw(office, job_id, by="alice")
        assert withdrawn.conversations == 2, "the office manager's and the lead's"
        await asyncio.wait_for(running, 10)  # the scheduler is idle: nothing else to run
        assert await office.failures(job_id) == []
        transcript = await office.engine.bus.transcript(f"job:{job_id}")
        assert [m.role for m in transcript] == ["user", "assistant"], "the brief, handed over"
        [lead] = await office.engine.store.read(
            lambda tx: [
                c
                for (c,) in tx.execute(
                    "SELECT conversation_id FROM conversations WHERE agent LIKE '%/project-lead'"
                )
            ]
        )
        lead_said = await office.engine.bus.transcript(lead)
        assert [m.role for m in lead_said] == ["user"], "the brief, and no turn after it"
        office.engine.scheduler.wake([f"job:{job_id}"])  # a stray wake runs nothing
        await office.run_until_idle()
    finally:
        await office.close()


async def _none() -> None:
    return None
