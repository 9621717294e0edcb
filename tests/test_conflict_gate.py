"""The merge-conflict gate on a real repository: two tasks retitle the README at once, the
second to merge conflicts, and the decider hears of it before the lead does."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import teams_script as script

from orchestrator.bus.events import Event, GateAsked
from orchestrator.bus.gates import Gate
from orchestrator.bus.transactions import conversation, inbox
from orchestrator.core.messages import AssistantTurn
from orchestrator.core.model import ModelRequest
from orchestrator.jobs import revisions
from orchestrator.jobs.handle import JobHandle
from orchestrator.jobs.office import Office
from orchestrator.models.scripted import FunctionModel
from orchestrator.teams import conflict_gate
from orchestrator.teams.board import list_tasks

GATED = "humans: {decider: alice}\nparallel: 3\ngates: {plan: never}\n"  # merge-conflict: always
UNGATED = "humans: {decider: alice}\nparallel: 3\ngates: {plan: never, merge-conflict: never}\n"
README = {1: "widgets: alpha\n", 2: "widgets: beta\n", 3: "widgets: alpha and beta\n"}
REPORT = "conflicts with the job branch"
HELD_ADVICE = "Create a resolution task (task_create with resolves="  # the ungated reply's
LEAD = "widgets/project-lead"


def lead(request: ModelRequest) -> AssistantTurn:
    """Plans two tasks that retitle the README, dispatches both at once; resolves the
    conflict when the decider wants it resolved, else reports."""
    done = script.results(request.messages)
    calls = {c.call_id for m in request.messages for c in m.tool_calls}
    if not done:
        return script.turn(
            *(
                script.call(f"c{n}", "task_create", title=f"Title {n}", spec="s", review="none")
                for n in (1, 2)
            )
        )
    if "d1" not in calls:
        return script.turn(*(script.call(f"d{n}", "dispatch", task=n, brief="go") for n in (1, 2)))
    wanted = next((t for t in done if "They want it resolved" in t), None)
    if wanted and "r" not in calls:
        number = int(re.search(r"resolves=(\d+)", wanted).group(1))  # type: ignore[union-attr]
        return script.turn(
            script.call("r", "task_create", title="Resolve", spec="both", resolves=number)
        )
    if "r" in calls and "d3" not in calls:
        return script.turn(script.call("d3", "dispatch", task=3, brief="resolve it"))
    return AssistantTurn(text="Lead done: " + " | ".join(done[2:]))


def worker(request: ModelRequest) -> AssistantTurn:
    number = script.task_number(request.messages[0].text)
    _, after = script.last_request(request.messages)
    if after == 0:
        return script.turn(script.call("w", "write_file", path="README.md", content=README[number]))
    return AssistantTurn(text=f"Task {number}: README retitled.")


def side_by_side() -> Callable[[ModelRequest], Awaitable[AssistantTurn]]:
    """`worker`, where tasks #1 and #2 start writing only once both have their worktrees
    (made from the same job branch), so however the two are scheduled, they conflict."""
    both, started = asyncio.Event(), set()

    async def work(request: ModelRequest) -> AssistantTurn:
        number = script.task_number(request.messages[0].text)
        if number in (1, 2):
            started.add(number)
            if started == {1, 2}:
                both.set()
            await both.wait()
        return worker(request)

    return work


ROLES: dict[str, Callable[[ModelRequest], Any]] = {
    **script.ROLES,
    "project-lead": lead,
    "phase-reviewer": lambda r: AssistantTurn(text="approve"),
}


def the_model(**roles: Callable[[ModelRequest], Any]) -> FunctionModel:
    table = {**ROLES, "implementer": side_by_side(), **roles}
    return FunctionModel(lambda r: table[r.agent.rsplit("/", 1)[-1]](r))


Answer = Callable[[Gate], Awaitable[str]]


class Watch:
    """What the decider sees when asked: the gate, and the lead's state at that moment."""

    def __init__(self, office: Office, model: FunctionModel, reply: str) -> None:
        self.office, self.model, self.reply = office, model, reply
        self.gates: list[Gate] = []
        self.lead: Any = None
        self.lead_inbox: list[Any] = []
        self.lead_calls = 0

    async def __call__(self, gate: Gate) -> str:
        self.gates.append(gate)
        store = self.office.engine.store
        self.lead = await store.read(lambda tx: conversation(tx, gate.conversation_id))
        self.lead_inbox = await store.read(lambda tx: inbox(tx, gate.conversation_id))
        self.lead_calls = len(lead_turns(self.model))
        return self.reply


async def run_job(
    tmp_path: Path, reply: str, *, project: str = GATED, model: FunctionModel | None = None
) -> dict[str, Any]:
    model = model or the_model()
    repo = script.make_repo(tmp_path / "widgets")
    office = await script.open_office(tmp_path / "home", model, project)
    watch = Watch(office, model, reply)
    try:
        job = await script.start(office, repo)
        await office.run(job, watch)
        facts = await facts_of(office, job)
    finally:
        await office.close()
    return {**facts, "watch": watch, "model": model}


async def facts_of(office: Office, job: JobHandle) -> dict[str, Any]:
    store = office.engine.store
    tasks = await store.read(lambda tx: list_tasks(tx, job.job_id))
    gates = await store.read(
        lambda tx: tx.execute(
            "SELECT gate_id, kind, answer FROM gates WHERE job_id = ?", (job.job_id,)
        ).fetchall()
    )
    readme = script.git(job.space.repo, "show", f"{job.space.branch}:README.md")
    return {"tasks": tasks, "gates": gates, "readme": readme, "space": job.space}


def lead_turns(model: FunctionModel) -> list[ModelRequest]:
    """The lead's requests for its turns (not the triage: jobs/flat_lead.py)."""
    return [r for r in model.requests_of(LEAD) if r.tools]


def dispatch_results(model: FunctionModel, call_id: str) -> list[str]:
    """Every result of the lead's dispatch `call_id` its model was shown, once per request
    that first showed it (a result seen again in a later request is the same result)."""
    seen: list[str] = []
    shown: set[int] = set()
    for request in model.requests_of(LEAD):
        for message in request.messages:
            if message.role == "tool" and message.call_id == call_id and message.seq not in shown:
                shown.add(message.seq)
                seen.append(message.text)
    return seen


async def test_approve_the_lead_hears_once_and_resolves(tmp_path: Path) -> None:
    out = await run_job(tmp_path, "yes")
    watch: Watch = out["watch"]
    (gate,) = watch.gates
    assert gate.kind == "merge-conflict"
    assert gate.engine_made
    number = int(gate.payload["task"])
    assert f"Task #{number} (Title {number}) was approved" in gate.question
    assert "README.md" in gate.question
    assert "<<<<<<<" in gate.question
    # parked, not woken: it had run twice (plan, dispatch) and the held reply waits in the gate
    assert watch.lead_calls == 2
    assert watch.lead.awaiting_input
    assert watch.lead.pending_count == 0
    assert [i.call_id for i in watch.lead_inbox] == [f"d{3 - number}"]  # the other's reply
    (result,) = dispatch_results(out["model"], f"d{number}")
    assert REPORT in result
    assert "<<<<<<<" in result
    assert 'The decider (alice) answered "yes". They want it resolved' in result
    assert HELD_ADVICE not in result
    # woken once for both replies: plan, dispatch, resolve, dispatch, report
    assert len(lead_turns(out["model"])) == 5
    assert [t.state for t in out["tasks"]] == ["done"] * 3
    assert out["tasks"][2].resolves == number
    assert out["readme"] == README[3]


async def test_reject_drops_the_task_and_says_so(tmp_path: Path) -> None:
    out = await run_job(tmp_path, "no (beta's title is wrong anyway)")
    (gate,) = out["watch"].gates
    number = int(gate.payload["task"])
    (result,) = dispatch_results(out["model"], f"d{number}")
    assert REPORT in result
    assert f"Task #{number} is dropped: it is cancelled" in result
    assert "beta's title is wrong anyway" in result
    states = {t.number: t.state for t in out["tasks"]}
    assert states == {number: "cancelled", 3 - number: "done"}
    assert len(lead_turns(out["model"])) == 3  # plan, dispatch, report
    assert out["readme"] == README[3 - number]


async def test_words_reach_the_lead_as_direction(tmp_path: Path) -> None:
    out = await run_job(tmp_path, "revise: keep alpha's title and put beta's in the body")
    (gate,) = out["watch"].gates
    number = int(gate.payload["task"])
    (result,) = dispatch_results(out["model"], f"d{number}")
    assert REPORT in result
    assert "answered \"revise: keep alpha's title and put beta's in the body\"." in result
    assert "That is their direction" in result
    assert {t.number: t.state for t in out["tasks"]}[number] == "blocked"
    assert len(lead_turns(out["model"])) == 3


async def test_mode_never_tells_the_lead_at_once_as_before(tmp_path: Path) -> None:
    out = await run_job(tmp_path, "unused", project=UNGATED)
    assert out["gates"] == []
    assert out["watch"].gates == []
    replies = {n: dispatch_results(out["model"], f"d{n}") for n in (1, 2)}
    ((number, (result,)),) = [(n, r) for n, r in replies.items() if REPORT in r[0]]
    assert result.endswith(f"{HELD_ADVICE}{number}) and dispatch it, or re-plan.")
    assert "answered" not in result
    assert {t.number: t.state for t in out["tasks"]}[number] == "blocked"


async def test_the_gate_and_its_held_reply_survive_a_restart(tmp_path: Path) -> None:
    repo = script.make_repo(tmp_path / "widgets")
    first = the_model()
    office = await script.open_office(tmp_path / "home", first, GATED)
    try:
        job = await script.start(office, repo)
        await office.run_until_idle(job.job_id)
        (gate,) = await office.open_gates(job.job_id)
    finally:
        await office.close()
    number = int(gate.payload["task"])
    assert len(lead_turns(first)) == 2
    assert not dispatch_results(first, f"d{number}")

    second = the_model()
    office = await script.open_office(tmp_path / "home", second, GATED)
    watch = Watch(office, second, "yes")
    try:
        again = await script.start(office, repo)
        assert (again.job_id, again.created) == (job.job_id, False)
        await office.run_until_idle(job.job_id)  # nothing runs: the lead waits for the answer
        assert second.requests == []
        lead_row = await office.engine.store.read(lambda tx: conversation(tx, gate.conversation_id))
        assert lead_row.awaiting_input
        assert lead_row.pending_count == 0
        await office.run(again, watch)
        out = await facts_of(office, again)
    finally:
        await office.close()
    assert [g.gate_id for g in watch.gates] == [gate.gate_id]
    assert watch.gates[0].payload == gate.payload
    (result,) = dispatch_results(second, f"d{number}")
    assert REPORT in result
    assert "They want it resolved" in result
    assert [t.state for t in out["tasks"]] == ["done"] * 3
    assert out["readme"] == README[3]


def lead_of_three(request: ModelRequest) -> AssistantTurn:
    """As `lead`, with a third task (another file) dispatched beside the two."""
    done = script.results(request.messages)
    if not done:
        return script.turn(
            *(
                script.call(f"c{n}", "task_create", title=f"Title {n}", spec="s", review="none")
                for n in (1, 2, 3)
            )
        )
    if len(done) == 3:
        return script.turn(
            *(script.call(f"d{n}", "dispatch", task=n, brief="go") for n in (1, 2, 3))
        )
    return AssistantTurn(text="Lead done: " + " | ".join(done[3:]))


async def test_the_job_branch_moving_restates_the_open_gate(tmp_path: Path) -> None:
    asked: list[Gate] = []
    opened = asyncio.Event()
    model: FunctionModel

    async def on_event(event: Event) -> None:
        if isinstance(event, GateAsked):
            asked.extend(await office.open_gates())  # as first asked
            opened.set()

    first_two = side_by_side()

    async def late_worker(request: ModelRequest) -> AssistantTurn:
        """Task #3 writes another file, once the conflict's gate is open."""
        number = script.task_number(request.messages[0].text)
        if number != 3:
            return await first_two(request)
        _, after = script.last_request(request.messages)
        if after == 0:
            await opened.wait()
            return script.turn(script.call("w", "write_file", path="notes.md", content="n\n"))
        return AssistantTurn(text="Task 3: notes.")

    model = the_model(**{"project-lead": lead_of_three, "implementer": late_worker})
    repo = script.make_repo(tmp_path / "widgets")
    office = await script.open_office(tmp_path / "home", model, GATED)
    office.subscribe(on_event)
    try:
        job = await script.start(office, repo)
        await office.run_until_idle(job.job_id)
        (gate,) = await office.open_gates(job.job_id)
        head = script.git(job.space.repo, "rev-parse", job.space.branch).strip()
        tasks = await office.engine.store.read(lambda tx: list_tasks(tx, job.job_id))
        again = await office.engine.store.write(
            lambda tx: conflict_gate.restate(
                tx,
                gate.gate_id,
                job_head=head,
                files=("README.md",),
                hunks=gate.payload["hunks"],
                content=revisions.job_content,
            )
        )
        await office.answer_gate(gate.gate_id, text="yes", answered_by="alice")
        await office.run_until_idle(job.job_id)
    finally:
        await office.close()
    (first,) = asked
    assert tasks[2].state == "done"  # merged after the gate was asked: the job branch moved
    assert first.payload["job_head"] != head
    assert gate.payload["job_head"] == head
    assert gate.payload["files"] == ["README.md"]
    assert first.content_hash != gate.content_hash  # `/approve <first hash>` names nothing now
    assert gate.hashed_at > gate.asked_at  # a bare approval written before the move is stale
    assert f"({head[:7]}) in: README.md" in gate.question
    assert again is False  # the same head again changes nothing
    number = int(gate.payload["task"])
    (result,) = dispatch_results(model, f"d{number}")
    assert REPORT in result
    assert "They want it resolved" in result
