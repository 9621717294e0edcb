"""Compaction: what the model sees, when a summary replaces history, and that it persists."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fakes import CODING_LEAD, IMPLEMENTER, calls, org_router, say, send

from orchestrator.agents.context import COMPACT_INSTRUCTION, compaction_point, model_view
from orchestrator.agents.engine import Engine
from orchestrator.agents.ports import AgentSpec
from orchestrator.agents.tools import BUS_SPECS
from orchestrator.core.messages import Message, ToolCall, ToolResult
from orchestrator.core.model import Model, ModelRequest
from orchestrator.models.scripted import FunctionModel


def msg(seq: int, role: str, **content: Any) -> Message:
    return Message("c", seq, "x", role, content)  # type: ignore[arg-type]


BIG = "x" * 400  # 100 estimated tokens
HISTORY = (
    msg(1, "user", text="task", kind="request"),
    msg(2, "assistant", text="", tool_calls=[{"id": "a", "name": "read_file"}]),
    msg(3, "tool", call_id="a", text=BIG),
    msg(4, "assistant", text="", tool_calls=[{"id": "b", "name": "read_file"}]),
    msg(5, "tool", call_id="b", text=BIG),
)


def test_no_compaction_under_the_bound() -> None:
    assert compaction_point(HISTORY, bound=10_000) is None


def test_compaction_keeps_the_last_assistant_turn_with_its_results() -> None:
    assert compaction_point(HISTORY, bound=100) == 3
    summary = msg(6, "user", text="summary", kind="compaction", covers_through=3)
    view = model_view((*HISTORY, summary))
    assert [m.seq for m in view] == [6, 4, 5]


def test_after_a_finished_turn_the_new_request_is_kept() -> None:
    done = (*HISTORY, msg(6, "assistant", text="done"), msg(7, "user", text="more", kind="request"))
    assert compaction_point(done, bound=100) == 6
    summary = msg(8, "user", text="s", kind="compaction", covers_through=6)
    assert [m.seq for m in model_view((*done, summary))] == [8, 7]


def test_a_summary_alone_is_not_compacted_again() -> None:
    view = (
        msg(8, "user", text=BIG * 10, kind="compaction", covers_through=6),
        msg(9, "assistant", text="", tool_calls=[{"id": "z", "name": "x"}]),
        msg(10, "tool", call_id="z", text=BIG),
    )
    assert compaction_point(view, bound=10) is None


@dataclass
class Agents:
    model: Model

    def spec(self, address: str) -> AgentSpec:
        return AgentSpec(address, "sys", tuple(BUS_SPECS.values()), self.model, context_tokens=250)


class BigTools:
    async def run(self, agent: str, conversation_id: str, call: ToolCall) -> ToolResult:
        return ToolResult(call.call_id, f"{call.call_id}:" + BIG)


async def test_a_long_worker_turn_is_compacted_and_the_summary_persisted(tmp_path: Path) -> None:
    def fn(request: ModelRequest) -> object:
        if request.agent == CODING_LEAD:
            if len(request.messages) == 1:
                return calls(send("s", "implementer", "read everything"))
            return say("lead: " + request.messages[-1].text)
        last = request.messages[-1]
        if last.text == COMPACT_INSTRUCTION:
            assert request.tools == ()
            return say(f"summary of {len(request.messages) - 1} messages")
        reads = sum(1 for m in request.messages if m.role == "tool")
        if len(request.messages) > 1 and request.messages[0].content.get("kind") == "compaction":
            return say(f"finished after compaction; saw {reads} results")
        return calls(ToolCall(f"r{len(request.messages)}", "read_file", {"path": "f"}))

    model = FunctionModel(fn)  # type: ignore[arg-type]
    engine = await Engine.open(
        tmp_path / "s.db", agents=Agents(model), router=org_router(), tools=BigTools()
    )
    await engine.bus.start_job(job_key="k", project="w", title="t", agent=CODING_LEAD, brief="go")
    await engine.scheduler.run_until_idle()
    assert not await engine.scheduler.failures()
    worker = model.requests_of(IMPLEMENTER)
    compactions = [r for r in worker if r.messages[-1].text == COMPACT_INSTRUCTION]
    assert len(compactions) == 1
    after = worker[worker.index(compactions[0]) + 1]
    assert after.messages[0].text.startswith("summary of ")
    assert [m.role for m in after.messages] == ["user", "assistant", "tool"]
    result = (await engine.bus.snapshot("job:1")).conversation.result
    assert result == "lead: finished after compaction; saw 1 results"
    conversation = after.messages[0].conversation_id
    stored = await engine.bus.transcript(conversation)
    assert sum(m.content.get("kind") == "compaction" for m in stored) == 1
    await engine.close()
