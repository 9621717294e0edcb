"""Send, fan-out and fan-in, queued Sends, refusals and mailboxes on a real SQLite file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fakes import (
    CODING_LEAD,
    FunctionModel,
    StaticAgents,
    calls,
    org_router,
    replies,
    say,
    send,
)

from orchestrator.agents.engine import Engine
from orchestrator.bus.events import DispatchCompleted, DispatchStarted, Event, StateChanged
from orchestrator.core.messages import InboxKind, Message, ToolCall
from orchestrator.core.model import ModelRequest


@pytest.fixture
def events() -> list[Event]:
    return []


async def open_engine(tmp_path: Path, model: FunctionModel, events: list[Event]) -> Engine:
    engine = await Engine.open(
        tmp_path / "store.db", agents=StaticAgents(model), router=org_router()
    )

    async def record(event: Event) -> None:
        events.append(event)

    engine.events.subscribe(record)
    return engine


async def start(engine: Engine, agent: str = CODING_LEAD, brief: str = "do it") -> str:
    started = await engine.bus.start_job(
        job_key="widgets#1", project="widgets", title="t", agent=agent, brief=brief
    )
    return started.conversation_id


async def test_fan_out_of_100_wakes_the_parent_once_with_every_reply(
    tmp_path: Path, events: list[Event]
) -> None:
    def fn(request: ModelRequest) -> object:
        if request.agent == CODING_LEAD:
            if len(request.messages) == 1:
                return calls(*(send(f"c{i}", "implementer", f"part {i}") for i in range(100)))
            return say(f"merged {len(replies(request.messages))}")
        return say("done " + request.messages[0].text)

    model = FunctionModel(fn)  # type: ignore[arg-type]
    engine = await open_engine(tmp_path, model, events)
    root = await start(engine)
    await engine.scheduler.run_until_idle()
    await engine.events.drain()

    lead = model.requests_of(CODING_LEAD)
    assert len(lead) == 2, "the parent runs once to fan out and once when every reply is in"
    got = replies(lead[1].messages)
    assert sorted(m.call_id or "" for m in got) == sorted(f"c{i}" for i in range(100))
    assert {m.text for m in got} == {f"done part {i}" for i in range(100)}
    assert len({m.content["conversation_id"] for m in got}) == 100
    assert (await engine.bus.snapshot(root)).conversation.result == "merged 100"
    assert sum(isinstance(e, DispatchStarted) for e in events) == 100
    assert sum(isinstance(e, DispatchCompleted) for e in events) == 100
    running = [e for e in events if e == StateChanged(root, "running")]
    assert len(running) == 2
    assert not await engine.scheduler.failures()
    await engine.close()


async def test_send_to_a_busy_conversation_is_queued_and_answered_after_its_turn(
    tmp_path: Path, events: list[Event]
) -> None:
    """The lead continues a worker's conversation while a person's message keeps it busy."""
    worker_busy = asyncio.Event()
    release_worker = asyncio.Event()
    worker_known = asyncio.Event()
    continuation_queued = asyncio.Event()
    worker_id: list[str] = []

    async def fn(request: ModelRequest) -> object:
        last = request.messages[-1]
        if request.agent == CODING_LEAD:
            if len(request.messages) == 1:
                return calls(send("s1", "implementer", "write it"))
            if last.call_id == "s1":
                worker_id.append(last.content["conversation_id"])
                worker_known.set()
                await worker_busy.wait()
                return calls(send("s2", "implementer", "also test it", worker_id[0]))
            return say("lead done: " + last.text)
        if last.content.get("kind") == "message":
            worker_busy.set()
            await release_worker.wait()
            return say("noted " + last.text)
        return say("worker: " + last.text)

    model = FunctionModel(fn)  # type: ignore[arg-type]
    engine = await open_engine(tmp_path, model, events)

    async def watch(event: Event) -> None:
        if isinstance(event, DispatchStarted) and event.queued:
            continuation_queued.set()

    engine.events.subscribe(watch)
    root = await start(engine)

    async def person_messages_worker_then_releases_it() -> None:
        await worker_known.wait()
        await engine.bus.post(worker_id[0], kind=InboxKind.MESSAGE, sender="alice", text="ping")
        await continuation_queued.wait()
        release_worker.set()

    person = asyncio.create_task(person_messages_worker_then_releases_it())
    await engine.scheduler.run_until_idle()
    await person
    await engine.events.drain()

    queued = [e for e in events if isinstance(e, DispatchStarted) and e.queued]
    assert [e.conversation_id for e in queued] == worker_id
    worker = await engine.bus.transcript(worker_id[0])
    assert [m.text for m in worker] == [
        "write it",
        "worker: write it",
        "ping",
        "noted ping",
        "also test it",
        "worker: also test it",
    ]
    assert model.max_parallel_per_conversation == 1
    result = (await engine.bus.snapshot(root)).conversation.result
    assert result == "lead done: worker: also test it"
    await engine.close()


async def test_a_refused_route_comes_back_to_the_sender_as_an_error_it_can_act_on(
    tmp_path: Path, events: list[Event]
) -> None:
    def fn(request: ModelRequest) -> object:
        last = request.messages[-1]
        if request.agent == CODING_LEAD:
            if len(request.messages) == 1:
                return calls(send("s1", "implementer", "go"))
            return say("lead: " + last.text)
        if len(request.messages) == 1:
            return calls(send("x", "researcher", "find it"))
        assert last.role == "tool"
        assert last.content["is_error"]
        return say("refused: " + last.text)

    model = FunctionModel(fn)  # type: ignore[arg-type]
    engine = await open_engine(tmp_path, model, events)
    root = await start(engine)
    await engine.scheduler.run_until_idle()
    result = (await engine.bus.snapshot(root)).conversation.result
    assert result is not None
    assert "route refused: implementer cannot send to 'researcher'" in result
    assert "You can reach: coding-lead, spec-reviewer." in result
    assert "goes through your lead, coding-lead" in result
    assert not await engine.scheduler.failures()
    await engine.close()


async def test_continuing_a_conversation_the_sender_does_not_own_is_refused(
    tmp_path: Path, events: list[Event]
) -> None:
    def fn(request: ModelRequest) -> object:
        if len(request.messages) == 1:
            return calls(
                send("a", "implementer", "go", "agent:nobody:x:1"),
                send("b", "implementer", "go", "job:1"),
            )
        return say(" | ".join(m.text for m in replies(request.messages)))

    model = FunctionModel(fn)  # type: ignore[arg-type]
    engine = await open_engine(tmp_path, model, events)
    root = await start(engine)
    await engine.scheduler.run_until_idle()
    result = (await engine.bus.snapshot(root)).conversation.result
    assert result == (
        "no conversation 'agent:nobody:x:1'; omit context_id to open a new one | "
        "conversation 'job:1' was not opened by you here; you cannot continue it"
    )
    await engine.close()


async def test_team_mailbox_message_broadcast_plan_approval_and_shutdown(
    tmp_path: Path, events: list[Event]
) -> None:
    """Teammate messages are inbox items on the same bus; shutdown ends the member."""
    seen: dict[str, list[str]] = {}

    def fn(request: ModelRequest) -> object:
        last = request.messages[-1]
        name = request.agent.rsplit("/", 1)[-1]
        fresh = replies_and_notes(request.messages)
        seen.setdefault(name, []).extend(str(m.content.get("kind", m.role)) for m in fresh)
        if request.agent == CODING_LEAD:
            if len(request.messages) == 1:
                return calls(send("w", "implementer", "build"), send("r", "spec-reviewer", "check"))
            if last.call_id in {"w", "r"}:
                return calls(
                    ToolCall(
                        "p",
                        "message",
                        {
                            "to": "implementer",
                            "content": "plan ok",
                            "type": "plan_approval_response",
                            "approve": True,
                        },
                    ),
                    ToolCall("b", "message", {"to": "*", "content": "schema final"}),
                    ToolCall(
                        "q",
                        "message",
                        {"to": "spec-reviewer", "content": "wrap up", "type": "shutdown_request"},
                    ),
                    ToolCall("z", "message", {"to": "nobody", "content": "?"}),
                )
            if last.content.get("kind") == "shutdown_response":
                return say("lead saw shutdown: " + last.text)
            return say("lead idle")
        if len(request.messages) == 1 and name == "implementer":
            return calls(ToolCall("m", "message", {"to": "spec-reviewer", "content": "hi"}))
        return say(f"{name} handled {last.content.get('kind', last.role)}")

    model = FunctionModel(fn)  # type: ignore[arg-type]
    engine = await open_engine(tmp_path, model, events)
    root = await start(engine)
    await engine.scheduler.run_until_idle()

    lead_turn = await engine.bus.transcript(root)
    results = {m.call_id: m for m in lead_turn if m.role == "tool"}
    assert results["p"].text == "plan_approval_response delivered to 1 teammate(s)"
    assert results["b"].text == "broadcast delivered to 2 teammate(s)"
    assert results["z"].content["is_error"]
    team = "no active teammate 'nobody'; your team: implementer, spec-reviewer"
    assert team in results["z"].text
    assert "shutdown_request" in seen["spec-reviewer"]
    assert "plan_approval_response" in seen["implementer"]
    assert "broadcast" in seen["implementer"]
    assert "broadcast" in seen["spec-reviewer"]
    reviewer = results["r"].content["conversation_id"]
    snap = await engine.bus.snapshot(reviewer)
    assert snap.conversation.state == "closed", "a teammate that answered shutdown is stopped"
    assert (await engine.bus.snapshot(root)).conversation.result is not None
    assert any(m.content.get("kind") == "shutdown_response" for m in lead_turn)
    await engine.close()


def replies_and_notes(messages: tuple[Message, ...]) -> list[Message]:
    """Everything after the last assistant message."""
    index = max((n for n, m in enumerate(messages) if m.role == "assistant"), default=-1)
    return list(messages[index + 1 :])


async def test_peek_leaves_the_inbox_and_a_closed_conversation_takes_nothing(
    tmp_path: Path, events: list[Event]
) -> None:
    model = FunctionModel(lambda r: say("never"))
    engine = await open_engine(tmp_path, model, events)
    root = await start(engine)
    await engine.bus.post(root, kind=InboxKind.MESSAGE, sender="alice", text="note")
    assert [i.kind for i in await engine.bus.peek(root)] == [InboxKind.REQUEST, InboxKind.MESSAGE]
    assert len(await engine.bus.peek(root)) == 2
    await engine.bus.close(root)
    from orchestrator.core.errors import BusError

    with pytest.raises(BusError, match="is closed"):
        await engine.bus.post(root, kind=InboxKind.MESSAGE, sender="alice", text="late")
    await engine.scheduler.run_until_idle()
    assert model.requests == []
    await engine.close()


async def test_closing_a_conversation_with_an_unanswered_send_answers_it_with_an_error(
    tmp_path: Path, events: list[Event]
) -> None:
    child: list[str] = []

    def fn(request: ModelRequest) -> object:
        if request.agent == CODING_LEAD:
            if len(request.messages) == 1:
                return calls(send("s", "implementer", "go"))
            return say("lead got: " + request.messages[-1].text)
        child.append(request.messages[0].conversation_id)
        raise RuntimeError("worker crashed")

    model = FunctionModel(fn)  # type: ignore[arg-type]
    engine = await open_engine(tmp_path, model, events)
    root = await start(engine)
    await engine.scheduler.run_until_idle()
    assert [f.failure_key for f in await engine.scheduler.failures()] == child
    await engine.bus.close(child[0])
    await engine.scheduler.run_until_idle()
    result = (await engine.bus.snapshot(root)).conversation.result
    assert result == f"lead got: conversation {child[0]!r} was closed before it replied"
    await engine.close()


async def test_a_job_key_starts_one_job_however_often_it_is_started(
    tmp_path: Path, events: list[Event]
) -> None:
    engine = await open_engine(tmp_path, FunctionModel(lambda r: say("ok")), events)
    first = await engine.bus.start_job(
        job_key="k", project="widgets", title="t", agent=CODING_LEAD, brief="b"
    )
    again = await asyncio.gather(
        *(
            engine.bus.start_job(
                job_key="k", project="widgets", title="t", agent=CODING_LEAD, brief="b"
            )
            for _ in range(10)
        )
    )
    assert first.created
    assert not any(a.created for a in again)
    assert {a.job_id for a in again} == {first.job_id}
    await engine.scheduler.run_until_idle()
    assert [m.text for m in await engine.bus.transcript(first.conversation_id)] == ["b", "ok"]
    await engine.close()


async def test_ask_human_parks_until_answered_and_the_answer_is_the_tool_result(
    tmp_path: Path, events: list[Event]
) -> None:
    def fn(request: ModelRequest) -> object:
        last = request.messages[-1]
        if len(request.messages) == 1:
            return calls(
                ToolCall(
                    "q1", "ask_human", {"question": "Drop Python 3.10?", "options": ["yes", "no"]}
                ),
                ToolCall("q2", "ask_human", {"question": "Rename the flag?"}),
            )
        answers = [m.text for m in replies(request.messages)]
        return say(f"{last.role}: " + " | ".join(answers))

    model = FunctionModel(fn)  # type: ignore[arg-type]
    engine = await open_engine(tmp_path, model, events)
    root = await start(engine)
    await engine.scheduler.run_until_idle()
    asked = await engine.bus.open_gates()
    assert [(g.question, g.options, g.kind) for g in asked] == [
        ("Drop Python 3.10?", ("yes", "no"), "question"),
        ("Rename the flag?", (), "question"),
    ]
    assert len(model.requests) == 1
    await engine.bus.answer_gate(asked[0].gate_id, text="yes", answered_by="alice")
    await engine.scheduler.run_until_idle()
    assert len(model.requests) == 1, "one answer of two does not wake the agent"
    await engine.bus.answer_gate(asked[1].gate_id, text="no", answered_by="proxy", via="proxy")
    await engine.scheduler.run_until_idle()
    result = (await engine.bus.snapshot(root)).conversation.result
    assert result == "tool: alice answered: yes | the proxy for the decider answered: no"
    assert await engine.bus.open_gates() == []
    from orchestrator.core.errors import BusError

    with pytest.raises(BusError, match="already answered by 'alice'"):
        await engine.bus.answer_gate(asked[0].gate_id, text="no", answered_by="bob")
    await engine.events.drain()
    assert StateChanged(root, "awaiting_input") in events
    await engine.close()


async def test_a_source_answers_one_gate_once(tmp_path: Path, events: list[Event]) -> None:
    """A comment seen twice (a webhook and a catch-up pass) does not answer the next gate."""
    from orchestrator.core.errors import GateClosedError

    questions = [ToolCall(f"q{n}", "ask_human", {"question": f"Q{n}?"}) for n in (1, 2)]
    model = FunctionModel(lambda request: calls(*questions))  # type: ignore[arg-type]
    engine = await open_engine(tmp_path, model, events)
    root = await start(engine)
    await engine.scheduler.run_until_idle()
    first, second = await engine.bus.open_gates()
    assert await engine.bus.answered_from("github:comment:9") is None
    gate = await engine.bus.answer_gate(
        first.gate_id, text="yes", answered_by="alice", ref="github:comment:9"
    )
    assert gate.answer_ref == "github:comment:9"
    assert await engine.bus.answered_from("github:comment:9") == first.gate_id
    with pytest.raises(
        GateClosedError, match=f"github:comment:9 already answered gate {first.gate_id}"
    ):
        await engine.bus.answer_gate(
            second.gate_id, text="yes", answered_by="alice", ref="github:comment:9"
        )
    assert [g.gate_id for g in await engine.bus.open_gates()] == [second.gate_id]
    await engine.bus.gate_posted(second.gate_id, comment_ref="12", decider="alice")
    (reopened,) = await engine.bus.open_gates()
    assert (reopened.comment_ref, reopened.answer_ref) == ("12", None)
    assert reopened.asked_at > 0
    await engine.events.drain()
    assert StateChanged(root, "awaiting_input") in events
    await engine.close()


async def test_what_a_caller_keeps_with_a_job_is_written_with_it_or_not_at_all(
    tmp_path: Path,
) -> None:
    engine = await open_engine(tmp_path, FunctionModel(lambda request: say("x")), [])
    kept: list[int] = []

    def broken(tx: object, job_id: int) -> None:
        raise RuntimeError("the caller's row failed")

    with pytest.raises(RuntimeError, match="the caller's row failed"):
        await engine.bus.start_job(
            job_key="k",
            project="w",
            title="t",
            agent=CODING_LEAD,
            brief="b",
            wake=False,
            also=broken,
        )
    started = await engine.bus.start_job(
        job_key="k",
        project="w",
        title="t",
        agent=CODING_LEAD,
        brief="b",
        also=lambda tx, job_id: kept.append(job_id),
    )
    assert started.created, "the failed start left no job behind"
    assert kept == [started.job_id]
    await engine.close()


async def test_a_gate_is_hashed_advised_and_handed_over(
    tmp_path: Path, events: list[Event]
) -> None:
    """A gate's hash covers what it asks; an advisor's words reach the agent with the
    decider's answer; a gate handed to another decider says so."""
    import json

    from orchestrator.bus.gates import content_hash
    from orchestrator.core.errors import GateClosedError

    questions = [ToolCall(f"q{n}", "ask_human", {"question": f"Q{n}?"}) for n in (1, 2)]
    model = FunctionModel(
        lambda request: say("done") if model.requests[1:] else calls(*questions)  # type: ignore[arg-type]
    )
    engine = await open_engine(tmp_path, model, events)
    await start(engine)
    await engine.scheduler.run_until_idle()
    first, second = await engine.bus.open_gates()
    assert len(first.content_hash) == 64
    assert first.short_hash == first.content_hash[:7]
    assert first.content_hash != second.content_hash  # another question, another hash
    assert first.hashed_at == first.asked_at
    facts = {"kind": "question", "options": (), "title": "t", "brief": "b", "base": "c1"}
    same = content_hash(question="Q?", **facts)  # type: ignore[arg-type]
    assert same == content_hash(question="Q?", **facts)  # type: ignore[arg-type]
    assert same != content_hash(question="Q?", **{**facts, "base": "c2"})  # type: ignore[arg-type]

    handed = await engine.bus.reassign_gate(second.gate_id, decider="bob")
    assert handed.decider == "bob"
    await engine.bus.advise(first.gate_id, text="mind the API", advisor="carol")
    await engine.bus.answer_gate(first.gate_id, text="yes", answered_by="alice")
    await engine.bus.answer_gate(second.gate_id, text="no", answered_by="bob")
    with pytest.raises(GateClosedError, match="already answered"):
        await engine.bus.advise(first.gate_id, text="late", advisor="carol")
    with pytest.raises(GateClosedError, match="already answered"):
        await engine.bus.reassign_gate(second.gate_id, decider="dave")
    await engine.scheduler.run_until_idle()
    seen = json.dumps([m.content for m in model.requests[-1].messages])
    assert "carol (an advisor, not the decider) on question" in seen
    assert "mind the API" in seen
    await engine.close()
