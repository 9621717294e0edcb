"""The plan gate: the lead's first dispatch waits for the decider's approval of the board.

Real jobs on a real repository and store, the demo organisation (one task), the FakeForge
as the decider; and the bare engine for what the gate modes do.
"""

from __future__ import annotations

import json
from pathlib import Path

from fakes import CODING_LEAD, FakeForge, FunctionModel, StaticAgents, calls, org_router, say
from proxy_support import drive, start, widgets

from orchestrator.agents.engine import Engine
from orchestrator.bus import gates
from orchestrator.bus.dispatch import NOBODY_ASKED
from orchestrator.core.messages import AssistantTurn, ToolCall
from orchestrator.core.model import ModelRequest
from orchestrator.jobs import revisions
from orchestrator.jobs.features import extensions
from orchestrator.teams.board import Task
from orchestrator.teams.plan_gate import plan_text

ALWAYS = "humans: {decider: carol}\ngates: {plan: always}\n"
NEVER = "humans: {decider: carol}\ngates: {plan: never}\n"


def unsure(_: ModelRequest) -> AssistantTurn:
    return AssistantTurn(text="answer: yes\nconfidence: 0.5\nreasons: no history yet.")


async def test_the_first_dispatch_waits_for_the_plan_and_runs_as_approved(tmp_path: Path) -> None:
    async with widgets(tmp_path, FunctionModel(unsure), project=ALWAYS) as (office, repo):
        job_id = await start(office, repo, 1, project=ALWAYS)
        parked = FakeForge(office, leave_open=True)
        assert await drive_until_waiting(office, parked, job_id) == "waiting"
        (gate,) = await office.open_gates(job_id)
        assert (gate.kind, gate.asked_by, gate.engine_made) == ("plan", "engine", True)
        assert gate.question.startswith(
            "The plan: 1 task.\n\n1. Add a changelog (workgroup coding, "
        )
        assert gate.payload == {
            "dispatches": [
                {
                    "call_id": "run1",
                    "task": 1,
                    "brief": "Write docs/requests/changelog.md.",
                    "allowance_usd": None,
                }
            ]
        }
        assert await task_conversations(office) == 0, "no task runs before the plan is approved"

        forge = FakeForge(office, answers={"The plan:": "yes"})
        assert await drive(office, forge, job_id) == "done"
        answered = await office.engine.store.read(lambda tx: gates.get(tx, gate.gate_id))
        assert (answered.answer, answered.approved) == ("yes", True)
        assert await task_conversations(office) == 1
        assert forge.delivered, "the approved plan's work was delivered"


async def test_a_rejected_plan_goes_back_to_the_lead_and_nothing_runs(tmp_path: Path) -> None:
    async with widgets(tmp_path, FunctionModel(unsure), project=ALWAYS) as (office, repo):
        job_id = await start(office, repo, 1, project=ALWAYS)
        forge = FakeForge(office, answers={"The plan:": "no: split it in two"})
        assert await drive(office, forge, job_id) == "done"
        assert await task_conversations(office) == 0
        assert forge.delivered == []
        final = forge.statuses[-1]
        assert final.result == (
            "The plan was rejected (decider answered 'no: split it in two'), so nothing was done."
        )
        assert [t.state for t in final.tasks] == ["cancelled"], "the lead took its plan back"


async def test_with_plan_never_tasks_run_at_once(tmp_path: Path) -> None:
    async with widgets(tmp_path, FunctionModel(unsure), project=NEVER) as (office, repo):
        job_id = await start(office, repo, 1, project=NEVER)
        forge = FakeForge(office)  # any gate would fail the test: it knows no answers
        assert await drive(office, forge, job_id) == "done"
        assert forge.asked == []
        assert await task_conversations(office) == 1


def test_the_hash_pins_the_plan() -> None:
    """The gate's hash covers the plan's text: another board, another hash."""
    one = Task(1, "Add a flag", "Add --verbose.", "coding", "full", "pending", None, None, (), "l")
    two = Task(2, "Docs", "Document it.", "coding", "none", "pending", None, None, (1,), "l")
    text = plan_text([one, two])
    assert text.startswith("The plan: 2 tasks.\n\n1. Add a flag (workgroup coding, review: full)")
    assert "\n2. Docs (workgroup coding, review: none, after 1)\n   Document it." in text

    def digest(plan: str) -> str:
        return gates.content_hash(
            kind="plan", question=plan, options=("yes", "no"), title="t", brief="b", base="abc"
        )

    assert digest(text) == digest(plan_text([one, two]))
    assert digest(text) != digest(plan_text([one]))
    assert digest(text) != gates.content_hash(
        kind="plan", question=text, options=("yes", "no"), title="t", brief="b", base="abd"
    )


def test_answers_that_approve() -> None:
    for said in ("yes", "Yes, go ahead", "approve", "OK.", "proceed", "**yes**"):
        assert gates.approves(said), said
    for said in ("no", "yesterday", "not yet", "revise: smaller", "okay-ish? no", ""):
        assert not gates.approves(said), said


async def test_a_project_that_asks_no_questions_tells_the_agent_to_decide(
    tmp_path: Path,
) -> None:
    def fn(request: ModelRequest) -> object:
        if len(request.messages) == 1:
            return calls(ToolCall("q1", "ask_human", {"question": "Drop Python 3.10?"}))
        return say(request.messages[-1].text)

    model = FunctionModel(fn)  # type: ignore[arg-type]
    engine = await Engine.open(
        tmp_path / "store.db", agents=StaticAgents(model), router=org_router()
    )
    try:
        started = await engine.bus.start_job(
            job_key="widgets#1", project="widgets", title="t", agent=CODING_LEAD, brief="go"
        )
        modes = json.dumps({"question": "never"})
        await engine.store.write(lambda tx: tx.execute("UPDATE jobs SET gate_modes = ?", (modes,)))
        await engine.scheduler.run_until_idle()
        assert await engine.bus.open_gates() == []
        result = (await engine.bus.snapshot(started.conversation_id)).conversation.result
        assert result == NOBODY_ASKED
    finally:
        await engine.close()


async def drive_until_waiting(office: object, forge: FakeForge, job_id: int) -> str:
    from orchestrator.jobs.driver import JobDriver

    async def forges(_: int) -> FakeForge:
        return forge

    driver = JobDriver(office, forges)  # type: ignore[arg-type]
    for _ in range(20):
        state = await driver.sync(job_id)
        if state == "waiting":
            return state
        await office.run_until_idle()  # type: ignore[attr-defined]
    return state


async def task_conversations(office: object) -> int:
    store = office.engine.store  # type: ignore[attr-defined]
    (count,) = await store.read(
        lambda tx: tx.execute("SELECT count(*) FROM conversations WHERE kind = 'task'").fetchone()
    )
    return int(count)


async def test_advice_on_a_gate_no_agent_waits_on_wakes_nobody(tmp_path: Path) -> None:
    """A budget or protected-path gate parks the job's own conversation: an advisor's reply
    to it is not handed to the office manager (which would spend a model call on it)."""
    from orchestrator.bus.gates import AskIntent

    engine = await Engine.open(
        tmp_path / "store.db",
        agents=StaticAgents(FunctionModel(lambda _: say("ok"))),
        router=org_router(),
        extensions=extensions(),  # the kinds say which gates an agent waits on
    )
    try:
        started = await engine.bus.start_job(
            job_key="widgets#1", project="widgets", title="t", agent=CODING_LEAD, brief="go"
        )
        await engine.scheduler.run_until_idle()
        root = started.conversation_id

        def ask(tx: object, kind: str) -> int:
            intent = AskIntent(f"{kind}:1", "Go on?", ("yes", "no"), kind=kind)  # type: ignore[arg-type]
            return gates.ask_engine(
                tx,
                job_id=started.job_id,
                conversation_id=root,
                intent=intent,
                content=revisions.job_content,
            )  # type: ignore[arg-type]

        for kind in ("budget", "protected-path", "plan"):
            gate_id = await engine.store.write(lambda tx, kind=kind: ask(tx, kind))
            await engine.bus.advise(gate_id, text="careful", advisor="bob")
        inbox = await engine.store.read(
            lambda tx: tx.execute(
                "SELECT content FROM inbox WHERE conversation_id = ?", (root,)
            ).fetchall()
        )
        assert [json.loads(c)["text"] for (c,) in inbox] == [
            "bob (an advisor, not the decider) on question 3: careful"
        ], "only the plan gate's advice reaches its conversation"
    finally:
        await engine.close()
