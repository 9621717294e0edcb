"""The turn loop: pure step decisions, multi-turn runs with tools, limits, scripted models."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fakes import CODING_LEAD, IMPLEMENTER, calls, org_router, say, send

from orchestrator.agents.engine import Engine
from orchestrator.agents.loop import CallModel, Consume, Idle, Park, RunTools, Stop, next_step
from orchestrator.agents.ports import AgentSpec
from orchestrator.agents.tools import BUS_SPECS
from orchestrator.bus.conversations import Tail
from orchestrator.core.errors import BusError
from orchestrator.core.messages import AssistantTurn, Message, ToolCall, ToolResult
from orchestrator.core.model import Model, ModelRequest
from orchestrator.core.tools import ToolSpec
from orchestrator.models.scripted import FunctionModel, ScriptedModel, ScriptError
from orchestrator.store.sqlite import Store


def msg(seq: int, role: str, **content: Any) -> Message:
    return Message("c", seq, "x", role, content)  # type: ignore[arg-type]


REQUEST = msg(1, "user", text="do it", kind="request")
TOOLS = msg(
    2,
    "assistant",
    text="",
    tool_calls=[
        {"id": "a", "name": "read_file", "args": {}},
        {"id": "b", "name": "send", "args": {}},
    ],
)
IDLE = Tail(0, 0, False, True)


@pytest.mark.parametrize(
    ("transcript", "tail", "expected"),
    [
        ((), Tail(1, 0, False, True), Consume()),
        ((), IDLE, Idle()),
        ((REQUEST,), IDLE, CallModel()),
        ((REQUEST, TOOLS), Tail(0, 1, False, True), RunTools((ToolCall("a", "read_file", {}),))),
        ((REQUEST, TOOLS, msg(3, "tool", call_id="a", text="x")), Tail(0, 1, False, True), Park()),
        (
            (REQUEST, TOOLS, msg(3, "tool", call_id="a", text="x")),
            Tail(1, 0, False, True),
            Consume(),
        ),
        ((REQUEST, TOOLS, msg(3, "tool", call_id="a", text="x")), Tail(1, 0, True, True), Park()),
        ((REQUEST, msg(2, "assistant", text="done")), IDLE, Idle()),
        ((REQUEST, msg(2, "assistant", text="done")), Tail(1, 0, False, True), Consume()),
        ((REQUEST,), Tail(1, 0, False, False), Idle()),
    ],
)
def test_next_step_reads_only_the_persisted_state(
    transcript: tuple[Message, ...], tail: Tail, expected: object
) -> None:
    assert next_step(transcript, tail, max_turns=10) == expected


def test_waiting_on_replies_with_nothing_pending_is_a_broken_invariant() -> None:
    transcript = (REQUEST, TOOLS, msg(3, "tool", call_id="a", text="x"))
    with pytest.raises(BusError, match="waits on"):
        next_step(transcript, IDLE, max_turns=10)


def test_max_turns_counts_only_turns_since_the_request() -> None:
    earlier = (REQUEST, msg(2, "assistant", text="done"))
    again = (*earlier, msg(3, "user", text="more", kind="request"))
    assert next_step(again, IDLE, max_turns=1) == CallModel()
    working = (
        *again,
        msg(4, "assistant", text="", tool_calls=[{"id": "t", "name": "x"}]),
        msg(5, "tool", call_id="t", text="ok"),
    )
    assert isinstance(next_step(working, IDLE, max_turns=1), Stop)


@dataclass
class RecordingTools:
    """Runs any tool by echoing it; `fail` names tools that return an error."""

    fail: set[str] = field(default_factory=set)
    stop: set[str] = field(default_factory=set)
    ran: list[ToolCall] = field(default_factory=list)

    async def run(self, agent: str, conversation_id: str, call: ToolCall) -> ToolResult:
        self.ran.append(call)
        if call.name in self.stop:
            return ToolResult(call.call_id, "wrote\n[sandbox: disk: full]", True, "disk: full")
        if call.name in self.fail:
            return ToolResult(call.call_id, f"{call.name} failed: no such file", is_error=True)
        return ToolResult(call.call_id, f"{call.name} ok {dict(call.args)}")


@dataclass
class Agents:
    model: Model
    max_turns: int = 40
    tools: tuple[ToolSpec, ...] = tuple(BUS_SPECS.values())

    def spec(self, address: str) -> AgentSpec:
        return AgentSpec(address, f"You are {address}.", self.tools, self.model, self.max_turns)


async def run_job(tmp_path: Path, agents: Agents, tools: RecordingTools) -> Engine:
    engine = await Engine.open(tmp_path / "s.db", agents=agents, router=org_router(), tools=tools)
    await engine.bus.start_job(job_key="k", project="w", title="t", agent=CODING_LEAD, brief="go")
    await engine.scheduler.run_until_idle()
    return engine


async def test_multi_turn_with_several_tools_per_turn_and_a_tool_error_fed_back(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        {
            "coding-lead": [calls(send("s", "implementer", "fix the bug")), say("lead: shipped")],
            "implementer": [
                calls(
                    ToolCall("r1", "read_file", {"path": "a.py"}),
                    ToolCall("r2", "read_file", {"path": "missing.py"}),
                    ToolCall("l1", "list_files", {}),
                ),
                calls(ToolCall("w1", "write_file", {"path": "a.py", "content": "x"})),
                say("fixed a.py"),
            ],
        }
    )
    tools = RecordingTools(fail={"list_files"})
    engine = await run_job(tmp_path, Agents(model), tools)
    model.assert_done()
    assert [c.call_id for c in tools.ran] == ["r1", "r2", "l1", "w1"]
    second = [r for r in model.requests if r.agent == IMPLEMENTER][1]
    results = {m.call_id: m for m in second.messages if m.role == "tool"}
    assert results["l1"].content["is_error"] is True
    assert results["l1"].text == "list_files failed: no such file"
    assert results["r1"].text == "read_file ok {'path': 'a.py'}"
    assert (await engine.bus.snapshot("job:1")).conversation.result == "lead: shipped"
    await engine.close()


async def test_max_turns_ends_the_turn_with_an_error_reply_the_lead_reads(tmp_path: Path) -> None:
    def fn(request: Any) -> Any:
        if request.agent == CODING_LEAD:
            if len(request.messages) == 1:
                return calls(send("s", "implementer", "loop forever"))
            reply = request.messages[-1]
            return say(f"lead saw error={reply.content['is_error']}: {reply.text}")
        return calls(ToolCall(f"t{len(request.messages)}", "search", {"pattern": "x"}))

    tools = RecordingTools()
    engine = await run_job(tmp_path, Agents(FunctionModel(fn), max_turns=3), tools)
    assert len(tools.ran) == 3
    result = (await engine.bus.snapshot("job:1")).conversation.result
    assert result == (
        "lead saw error=True: stopped before finishing (max_turns: 3 model turns without finishing)"
    )
    assert not await engine.scheduler.failures()
    await engine.close()


async def test_an_unscripted_call_fails_loudly(tmp_path: Path) -> None:
    model = ScriptedModel({"coding-lead": [calls(send("s", "implementer", "go"))]})
    engine = await run_job(tmp_path, Agents(model), RecordingTools())
    (failure,) = await engine.scheduler.failures()
    assert failure.kind == "conversation"
    assert failure.reason.startswith("ScriptError: ")
    assert "no scripted turn left for 'widgets/coding/implementer'" in failure.reason
    await engine.close()


def test_unplayed_scripted_turns_are_reported() -> None:
    model = ScriptedModel({"implementer": [say("a"), say("b")]})
    with pytest.raises(ScriptError, match="never played: {'implementer': 2}"):
        model.assert_done()


async def test_a_spent_budget_stops_every_turn_of_the_job_with_an_error_reply(
    tmp_path: Path,
) -> None:
    from orchestrator.core.messages import AssistantTurn, Usage
    from orchestrator.jobs.budget import JobBudget

    def fn(request: Any) -> AssistantTurn:
        used = Usage(input_tokens=300, output_tokens=100)
        if request.agent == CODING_LEAD and len(request.messages) == 1:
            return AssistantTurn(tool_calls=(send("s", "implementer", "work"),), usage=used)
        n = len(request.messages)
        return AssistantTurn(tool_calls=(ToolCall(f"t{n}", "search", {}),), usage=used)

    tools = RecordingTools()
    store = await Store.open(tmp_path / "s.db")
    budget = JobBudget(store, max_usd=None, max_tokens=1_000, price=lambda agent, usage: 0.0)
    engine = Engine.over(
        store, agents=Agents(FunctionModel(fn)), router=org_router(), tools=tools, budget=budget
    )
    await engine.bus.start_job(job_key="k", project="w", title="t", agent=CODING_LEAD, brief="go")
    await engine.scheduler.run_until_idle()
    assert len(tools.ran) == 2, "the worker stopped once the job had used its tokens"
    result = (await engine.bus.snapshot("job:1")).conversation.result
    assert result == ("stopped before finishing (budget: the job used 1,200 of its 1,000 tokens)")
    assert (await budget.spent(1)).tokens == 1_200
    priced = JobBudget(
        engine.store,
        max_usd=0.5,
        max_tokens=None,
        price=lambda agent, usage: usage.output_tokens / 100,
    )
    assert await priced.exhausted(1) == "budget: the job spent $3.00 of its $0.50"
    await engine.close()


async def test_a_turn_that_runs_past_its_wall_time_stops(tmp_path: Path) -> None:
    from orchestrator.agents.loop import Runner
    from orchestrator.agents.scheduler import Scheduler

    now = [0.0]

    def clock() -> float:
        return now[0]

    @dataclass
    class Slow(Agents):
        def spec(self, address: str) -> AgentSpec:
            return AgentSpec(address, "s", tuple(BUS_SPECS.values()), self.model, wall_time_s=250)

    def slow(request: ModelRequest) -> AssistantTurn:
        now[0] += 100.0  # each model call takes 100 s
        return calls(ToolCall(f"t{len(request.messages)}", "search", {}))

    model = FunctionModel(slow)
    engine = await Engine.open(tmp_path / "s.db", agents=Slow(model), router=org_router())
    engine.scheduler = Scheduler(
        engine.bus,
        Runner(engine.bus, Slow(model), org_router(), tools=RecordingTools(), clock=clock),
    )
    await engine.bus.start_job(job_key="k", project="w", title="t", agent=CODING_LEAD, brief="go")
    await engine.scheduler.run_until_idle()
    result = (await engine.bus.snapshot("job:1")).conversation.result
    assert result == "stopped before finishing (wall_time: over 250 s in one turn)"
    assert len(model.requests) == 3, "at 0, 100 and 200 s; at 300 s the turn is over"
    await engine.close()


async def test_a_tool_call_is_bounded_by_what_is_left_of_the_turn(tmp_path: Path) -> None:
    """A tool call that never returns (a hung open, say) is stopped when the turn's wall time
    runs out, while it runs: the model reads why, and the turn then stops."""
    from orchestrator.agents.loop import Runner
    from orchestrator.agents.scheduler import Scheduler

    @dataclass
    class Hung:
        started: asyncio.Event = field(default_factory=asyncio.Event)

        async def run(self, agent: str, conversation_id: str, call: ToolCall) -> ToolResult:
            self.started.set()
            await asyncio.Event().wait()  # never set
            raise AssertionError("unreachable")

    @dataclass
    class Brief(Agents):
        def spec(self, address: str) -> AgentSpec:
            return AgentSpec(address, "s", tuple(BUS_SPECS.values()), self.model, wall_time_s=0.3)

    model = FunctionModel(lambda r: calls(ToolCall(f"t{len(r.messages)}", "read_file", {})))
    engine = await Engine.open(tmp_path / "s.db", agents=Brief(model), router=org_router())
    tools = Hung()
    engine.scheduler = Scheduler(
        engine.bus, Runner(engine.bus, Brief(model), org_router(), tools=tools)
    )
    await engine.bus.start_job(job_key="k", project="w", title="t", agent=CODING_LEAD, brief="go")
    await engine.scheduler.run_until_idle()
    assert tools.started.is_set()
    snapshot = await engine.bus.snapshot("job:1")
    said = [m.text for m in snapshot.transcript if m.role == "tool"]
    assert said == ["read_file: not finished, the turn's wall time ran out"]
    assert snapshot.conversation.result == (
        "stopped before finishing (wall_time: over 0.3 s in one turn)"
    )
    await engine.close()


def test_the_same_tool_error_again_and_again_ends_the_turn() -> None:
    def failing(seq: int, text: str = "job 2 has no workspace yet") -> tuple[Message, ...]:
        call = msg(seq, "assistant", text="", tool_calls=[{"id": f"r{seq}", "name": "read_file"}])
        return call, msg(seq + 1, "tool", call_id=f"r{seq}", text=text, is_error=True)

    three = (REQUEST, *failing(2), *failing(4), *failing(6))
    assert next_step(three, IDLE, max_turns=40) == CallModel(), "three may be bad luck"
    four = (*three, *failing(8))
    stop = next_step(four, IDLE, max_turns=40)
    assert isinstance(stop, Stop)
    assert "the same tool error 4 times running: job 2 has no workspace yet" in stop.reason
    varied = (*three, *failing(8, "another error"))
    assert next_step(varied, IDLE, max_turns=40) == CallModel(), "a different error is news"
    ok = msg(10, "tool", call_id="r8", text="contents")
    progress = (*three, msg(8, "assistant", text="", tool_calls=[{"id": "r8", "name": "x"}]), ok)
    assert next_step((*progress, *failing(11)), IDLE, max_turns=40) == CallModel()


def test_a_call_that_ran_into_a_limit_ends_the_turn_where_it_stands() -> None:
    both = msg(
        2,
        "assistant",
        text="",
        tool_calls=[{"id": "a", "name": "shell"}, {"id": "b", "name": "read_file"}],
    )
    stopped = msg(3, "tool", call_id="a", text="[sandbox: disk: full]", is_error=True, stop="x")
    assert next_step((REQUEST, both, stopped), IDLE, max_turns=40) == Stop("x"), "b never runs"
    later = (REQUEST, both, stopped, msg(4, "assistant", text="stopped"))
    assert next_step(later, Tail(1, 0, False, True), max_turns=40) == Consume(), "a new turn"


async def test_a_limit_stops_the_worker_and_its_lead_reads_why(tmp_path: Path) -> None:
    def fn(request: Any) -> Any:
        if request.agent == CODING_LEAD:
            if len(request.messages) == 1:
                return calls(send("s", "implementer", "fill the disk"))
            reply = request.messages[-1]
            return say(f"lead saw error={reply.content['is_error']}: {reply.text}")
        if len(request.messages) == 1:
            return calls(ToolCall("a", "shell", {}), ToolCall("b", "write_file", {}))
        return say("done")

    tools = RecordingTools(stop={"shell"})
    engine = await run_job(tmp_path, Agents(FunctionModel(fn)), tools)
    assert [call.call_id for call in tools.ran] == ["a"], "the call after the limit did not run"
    result = (await engine.bus.snapshot("job:1")).conversation.result
    assert result == "lead saw error=True: stopped before finishing (disk: full)"
    lead = await engine.bus.transcript("job:1")
    (worker,) = [m.content["conversation_id"] for m in lead if m.call_id == "s"]
    results = {m.call_id: m for m in await engine.bus.transcript(worker)}
    assert results["a"].content == {
        "call_id": "a",
        "text": "wrote\n[sandbox: disk: full]",
        "is_error": True,
        "stop": "disk: full",
    }
    assert results["b"].text == "not run: disk: full"
    assert not await engine.scheduler.failures()
    await engine.close()
