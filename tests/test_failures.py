"""A failed conversation is a row: it survives a restart, never re-runs unasked; a retry runs it."""

from __future__ import annotations

from pathlib import Path

from fakes import (
    CODING_LEAD,
    IMPLEMENTER,
    FunctionModel,
    StaticAgents,
    calls,
    org_router,
    say,
    send,
)

from orchestrator.agents.engine import Engine
from orchestrator.core.messages import AssistantTurn
from orchestrator.core.model import ModelRequest


def lead_sends_then(fn_for_worker: FunctionModel) -> FunctionModel:
    def reply(request: ModelRequest) -> AssistantTurn:
        if request.agent == CODING_LEAD:
            if any(m.role == "tool" for m in request.messages):
                return say("lead: done")
            return calls(send("s1", "implementer", "work"))
        return fn_for_worker.fn(request)  # type: ignore[return-value]

    return FunctionModel(reply)


async def engine(path: Path, model: FunctionModel) -> Engine:
    return await Engine.open(path, agents=StaticAgents(model), router=org_router())


async def test_a_failed_conversation_waits_for_a_retry_across_a_restart(tmp_path: Path) -> None:
    def broken(request: ModelRequest) -> AssistantTurn:
        raise RuntimeError("the worker's model broke")

    first = await engine(tmp_path / "s.db", lead_sends_then(FunctionModel(broken)))
    job = await first.bus.start_job(
        job_key="k", project="w", title="t", agent=CODING_LEAD, brief="go"
    )
    await first.scheduler.run_until_idle()
    (failure,) = await first.scheduler.failures(job.job_id)
    assert failure.kind == "conversation"
    assert failure.reason == "RuntimeError: the worker's model broke"
    await first.close()

    working = lead_sends_then(FunctionModel(lambda request: say("worker: done")))
    second = await engine(tmp_path / "s.db", working)
    await second.scheduler.run_until_idle()
    assert working.requests == [], "a restart does not re-run a failed conversation"
    assert [f.failure_key for f in await second.scheduler.failures(job.job_id)] == [
        failure.failure_key
    ]
    second.scheduler.wake([failure.failure_key])  # a stray wake does not run it either
    await second.scheduler.run_until_idle()
    assert working.requests == []

    retried = await second.scheduler.retry(job.job_id)
    assert [f.failure_key for f in retried] == [failure.failure_key]
    await second.scheduler.run_until_idle()
    assert [r.agent for r in working.requests] == [IMPLEMENTER, CODING_LEAD]
    assert await second.scheduler.failures() == []
    snapshot = await second.bus.snapshot(job.conversation_id)
    assert snapshot.conversation.result == "lead: done"
    await second.close()
