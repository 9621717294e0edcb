"""A model outage is waited out in the store, up to a horizon; only past it does the job stop.

The model fails with ModelUnavailableError (what AnthropicModel raises once its own quick
retries are spent) for a while; an injected clock and sleep stand in for the half hour, so
nothing really waits.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fakes import CODING_LEAD, FunctionModel, StaticAgents, SteppingClock, org_router, say

from orchestrator.agents.engine import Engine
from orchestrator.agents.scheduler import Outages
from orchestrator.core.clock import Deadline
from orchestrator.core.errors import ModelUnavailableError
from orchestrator.core.model import ModelRequest

HORIZON = 1800.0


def overloaded_until(clock: SteppingClock, back_at: float) -> FunctionModel:
    """A model answering 529 until `back_at` (seconds after the clock's start)."""
    start = clock.now

    def reply(request: ModelRequest) -> object:
        if clock.now - start < back_at:
            raise ModelUnavailableError("model 'm' unavailable after 5 attempts: HTTP 529")
        return say("done at last")

    return FunctionModel(reply)  # type: ignore[arg-type]


async def run(tmp_path: Path, back_at: float) -> tuple[Engine, SteppingClock, str]:
    clock = SteppingClock(1_000_000.0)
    model = overloaded_until(clock, back_at)
    engine = await Engine.open(tmp_path / "s.db", agents=StaticAgents(model), router=org_router())
    engine.scheduler.outages = Outages(
        horizon_s=HORIZON, clock=clock, sleep=clock.sleep, jitter=lambda: 1.0
    )
    started = await engine.bus.start_job(
        job_key="k", project="widgets", title="t", agent=CODING_LEAD, brief="go"
    )
    await engine.scheduler.run_until_idle()
    return engine, clock, started.conversation_id


async def test_an_outage_that_clears_before_the_horizon_is_waited_out(tmp_path: Path) -> None:
    engine, clock, root = await run(tmp_path, back_at=HORIZON - 200)
    try:
        assert await engine.bus.failures() == []
        assert await engine.bus.waits() == [], "the wait ends when the model answers"
        conversation = (await engine.bus.snapshot(root)).conversation
        assert conversation.result == "done at last"
        assert clock.slept[:4] == [30.0, 60.0, 120.0, 240.0], "backoff doubles"
        assert max(clock.slept) == 300.0, "and is capped"
        assert sum(clock.slept) < HORIZON
    finally:
        await engine.close()


async def test_an_outage_past_the_horizon_stops_the_job_saying_why(tmp_path: Path) -> None:
    engine, clock, root = await run(tmp_path, back_at=HORIZON + 60)
    try:
        (failure,) = await engine.bus.failures()
        assert failure.failure_key == root
        assert failure.reason.startswith("the model stayed unavailable for 30 min: ")
        assert "HTTP 529" in failure.reason
        assert await engine.bus.waits() == []
        assert sum(clock.slept) == HORIZON, "the last wait ends at the horizon, not after"
    finally:
        await engine.close()


async def test_a_waiting_conversation_survives_a_restart_and_waits_on(tmp_path: Path) -> None:
    clock = SteppingClock(1_000_000.0)

    async def forever(seconds: float) -> None:  # the process is stopped while it waits
        await asyncio.Event().wait()

    model = overloaded_until(clock, back_at=100)
    engine = await Engine.open(tmp_path / "s.db", agents=StaticAgents(model), router=org_router())
    engine.scheduler.outages = Outages(clock=clock, sleep=forever, jitter=lambda: 1.0)
    started = await engine.bus.start_job(
        job_key="k", project="widgets", title="t", agent=CODING_LEAD, brief="go"
    )
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(engine.scheduler.run_until_idle(), 1.0)
    (wait,) = await engine.bus.waits()
    assert (wait.wait_key, wait.kind, wait.until) == (
        started.conversation_id,
        "model",
        clock.now + 30,
    )
    assert wait.job_id == started.job_id
    await engine.close()

    clock.now += 10  # ten seconds later, a new process
    engine = await Engine.open(tmp_path / "s.db", agents=StaticAgents(model), router=org_router())
    engine.scheduler.outages = Outages(clock=clock, sleep=clock.sleep, jitter=lambda: 1.0)
    try:
        await engine.scheduler.run_until_idle()
        assert clock.slept[0] == 20.0, "the new process waits what was left, no less"
        result = (await engine.bus.snapshot(started.conversation_id)).conversation.result
        assert result == "done at last"
    finally:
        await engine.close()


async def test_an_outage_that_lasts_past_the_runs_deadline_is_left_to_the_next_run(
    tmp_path: Path,
) -> None:
    clock = SteppingClock(1_000_000.0)
    model = overloaded_until(clock, back_at=400)
    engine = await Engine.open(tmp_path / "s.db", agents=StaticAgents(model), router=org_router())
    engine.scheduler.outages = Outages(clock=clock, sleep=clock.sleep, jitter=lambda: 1.0)
    started = await engine.bus.start_job(
        job_key="k", project="widgets", title="t", agent=CODING_LEAD, brief="go"
    )
    try:
        await engine.scheduler.run_until_idle(deadline=Deadline(clock.now + 100, clock))
        assert clock.slept == [30.0, 60.0], "the third wait (120 s) ends past the deadline"
        (wait,) = await engine.bus.waits()
        assert (wait.wait_key, wait.until) == (started.conversation_id, clock.now + 120)
        assert await engine.bus.failures() == []

        await engine.scheduler.run_until_idle()  # the next run waits what is left
        assert clock.slept[2] == 120.0
        result = (await engine.bus.snapshot(started.conversation_id)).conversation.result
        assert result == "done at last"
    finally:
        await engine.close()
