"""A run's deadline bounds the work itself: past it no conversation starts a model or tool
call, it goes Idle where it stands with its state in the store, and the next run resumes it
there with nothing done twice. Model and tool calls take time on an injected clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fakes import (
    CODING_LEAD,
    IMPLEMENTER,
    FunctionModel,
    StaticAgents,
    SteppingClock,
    calls,
    org_router,
    say,
    send,
)

from orchestrator.agents.context import COMPACT_INSTRUCTION
from orchestrator.agents.engine import Engine
from orchestrator.agents.ports import AgentSpec
from orchestrator.core.clock import Deadline
from orchestrator.core.messages import AssistantTurn, ToolCall, ToolResult
from orchestrator.core.model import ModelRequest

MODEL_S, TOOL_S = 10.0, 1.0  # what each call takes on the clock


@dataclass
class TimedTools:
    """Echoes each call, taking TOOL_S on the clock; keeps when each started."""

    clock: SteppingClock
    started: list[tuple[str, float]] = field(default_factory=list)

    async def run(self, agent: str, conversation_id: str, call: ToolCall) -> ToolResult:
        self.started.append((call.call_id, self.clock.now))
        self.clock.now += TOOL_S
        return ToolResult(call.call_id, f"{call.name} ok")


def worker(clock: SteppingClock, turns: int = 3) -> FunctionModel:
    """The lead sends one brief; the implementer calls two tools a turn for `turns` turns,
    then replies. Each call takes MODEL_S on the clock."""

    def reply(request: ModelRequest) -> AssistantTurn:
        clock.now += MODEL_S
        if request.agent == CODING_LEAD:
            if len(request.messages) == 1:
                return calls(send("s", "implementer", "search twice a turn"))
            return say("lead: " + request.messages[-1].text)
        done = [m.call_id or "" for m in request.messages if m.role == "tool"]
        turn = int(done[-1][1:]) + 1 if done else 1  # read from what a compaction keeps
        if turn > turns:
            return say("searched")
        return calls(ToolCall(f"a{turn}", "search", {}), ToolCall(f"b{turn}", "search", {}))

    return FunctionModel(reply)


async def started_job(tmp_path: Path, model: FunctionModel, tools: TimedTools) -> Engine:
    agents = StaticAgents(model)
    engine = await Engine.open(tmp_path / "s.db", agents=agents, router=org_router(), tools=tools)
    await engine.bus.start_job(job_key="k", project="w", title="t", agent=CODING_LEAD, brief="go")
    return engine


# The clock: the lead's call 0-10; the implementer's first call 10-20, its tools a1 20-21
# and b1 21-22; its second call 22-32, then a2 and b2.
@pytest.mark.parametrize(
    ("deadline_at", "before", "in_flight"),
    [
        (25.0, ["a1", "b1"], "the implementer's second model call"),
        (20.5, ["a1"], "tool call a1: b1, of the same turn, waits"),
    ],
)
async def test_past_its_deadline_a_conversation_starts_nothing_and_resumes_in_the_next_run(
    tmp_path: Path, deadline_at: float, before: list[str], in_flight: str
) -> None:
    clock = SteppingClock()
    model, tools = worker(clock), TimedTools(clock)
    engine = await started_job(tmp_path, model, tools)
    try:
        await engine.scheduler.run_until_idle(deadline=Deadline(deadline_at, clock))
        assert [call_id for call_id, _ in tools.started] == before, in_flight
        assert all(at < deadline_at for _, at in tools.started)
        (waiting,) = await engine.bus.runnable()  # Idle mid-turn: the store says it has work
        snapshot = await engine.bus.snapshot(waiting)
        assert snapshot.conversation.agent == IMPLEMENTER
        assert snapshot.conversation.result is None

        await engine.scheduler.run_until_idle()  # the next run
        ran = [call_id for call_id, _ in tools.started]
        assert ran == ["a1", "b1", "a2", "b2", "a3", "b3"], "each tool once, in order"
        implementer = model.requests_of(IMPLEMENTER)
        assert [len(r.messages) for r in implementer] == [1, 4, 7, 10], "no call made twice"
        assert len(model.requests) == 2 + len(implementer)
        assert (await engine.bus.snapshot("job:1")).conversation.result == "lead: searched"
        assert not await engine.scheduler.failures()
    finally:
        await engine.close()


@dataclass
class SmallContext(StaticAgents):
    """Agents whose context holds little: a few tool results call for a compaction."""

    def spec(self, address: str) -> AgentSpec:
        return AgentSpec(address, "sys", self.tools, self.model, context_tokens=40)


async def test_a_compaction_that_ends_past_the_deadline_is_the_last_call_of_the_run(
    tmp_path: Path,
) -> None:
    clock = SteppingClock()
    inner = worker(clock, turns=2)

    def reply(request: ModelRequest) -> AssistantTurn:
        if request.messages[-1].text == COMPACT_INSTRUCTION:
            clock.now += MODEL_S
            return say("summary: searched a1 and b1")
        return inner.fn(request)  # type: ignore[return-value]

    model, tools = FunctionModel(reply), TimedTools(clock)
    agents = SmallContext(model)
    engine = await Engine.open(tmp_path / "s.db", agents=agents, router=org_router(), tools=tools)
    try:
        await engine.bus.start_job(
            job_key="k", project="w", title="t", agent=CODING_LEAD, brief="go"
        )
        # The implementer's third call needs a compaction first (34-44): past 40, the call
        # it made room for waits for the next run.
        await engine.scheduler.run_until_idle(deadline=Deadline(40.0, clock))
        texts = [r.messages[-1].text for r in model.requests_of(IMPLEMENTER)]
        assert texts[-1] == COMPACT_INSTRUCTION
        asked = len(model.requests)

        await engine.scheduler.run_until_idle()
        after = model.requests[asked]
        assert after.agent == IMPLEMENTER
        assert after.messages[0].text == "summary: searched a1 and b1", "compacted once"
        assert (await engine.bus.snapshot("job:1")).conversation.result == "lead: searched"
    finally:
        await engine.close()
