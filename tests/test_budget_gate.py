"""The budget gate, on a real store and repository with the demo organisation billing every
model call: a job past its cap parks at one gate, makes no model call while it is open (a
restart included), and goes on when approved or stops, saying why, when not; with the gate
off it stops as before. The proxy's tokens are the job's too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import demo_office
from demo_office import start_job
from fakes import (
    CODING_LEAD,
    IMPLEMENTER,
    FakeForge,
    FunctionModel,
    StaticAgents,
    calls,
    one_forge,
    org_router,
    send,
)
from local_repo import make_repo as repository

from bot.local_forge import LocalForge
from orchestrator.agents.engine import Engine
from orchestrator.config import shipped_org_dir
from orchestrator.core.messages import AssistantTurn, ToolCall, ToolResult, Usage
from orchestrator.core.model import ModelRequest
from orchestrator.jobs.budget import JobBudget
from orchestrator.jobs.budget_gate import QUESTION_OPENING
from orchestrator.jobs.driver import JobDriver
from orchestrator.jobs.features import extensions
from orchestrator.jobs.office import Office
from orchestrator.jobs.offline import DemoModel
from orchestrator.jobs.ports import Forge, JobState
from orchestrator.jobs.views import JobViews
from orchestrator.store.sqlite import Store, Tx

TITLE = "Add a changelog"
TOKENS = 100  # what every model call is billed, the proxy's included
CAP = 250  # tokens: the demo job's fourth call is past it


def project(budget: str, gates: str = "plan: never") -> str:
    return f"humans: {{decider: carol}}\nbudget: {{{budget}}}\ngates: {{{gates}}}\n"


def billed() -> FunctionModel:
    """The demo organisation's replies, each billed TOKENS input tokens."""
    demo = DemoModel(title=TITLE, body="We need one.", path="docs/requests/changelog.md")

    async def reply(request: ModelRequest) -> AssistantTurn:
        return replace(await demo.complete(request), usage=Usage(input_tokens=TOKENS))

    return FunctionModel(reply)


async def open_office(home: Path, text: str, model: FunctionModel) -> Office:
    return await demo_office.open_office(home, text, model)


async def start(office: Office, repo: Path, text: str) -> int:
    return await start_job(office, repo, text, title=TITLE, body="We need one.")


@asynccontextmanager
async def capped(
    tmp_path: Path, budget: str
) -> AsyncIterator[tuple[Office, FunctionModel, Path, int]]:
    """An office under `tmp_path` whose project has `budget`, every reply billed (the
    model), and its job started on a fresh repository; the office closed after."""
    repo, text = repository(tmp_path / "widgets"), project(budget)
    model = billed()
    office = await open_office(tmp_path / "home", text, model)
    try:
        yield office, model, repo, await start(office, repo, text)
    finally:
        await office.close()


async def drive(office: Office, forge: Forge, job_id: int) -> JobState:
    """Sync and run the job until it is done or failed, or waits at a question nobody
    answers (a forge that leaves them open)."""

    driver = JobDriver(office, one_forge(forge))
    while (state := await driver.sync(job_id)) not in ("done", "failed"):
        if state == "waiting" and getattr(forge, "leave_open", False):
            return state
        await office.run_until_idle()
    return state


async def status(office: Office, job_id: int) -> str | None:
    async def nowhere(_: int) -> None:
        return None

    return (await JobDriver(office, nowhere).status(job_id)).result


async def test_a_spent_budget_parks_the_job_at_one_gate_and_nothing_runs_until_approved(
    tmp_path: Path,
) -> None:
    repo, home, text = (
        repository(tmp_path / "widgets"),
        tmp_path / "home",
        project(f"max_usd: null, max_tokens: {CAP}"),
    )
    model = billed()
    office = await open_office(home, text, model)
    try:
        job_id = await start(office, repo, text)
        parked = FakeForge(office, leave_open=True)
        assert await drive(office, parked, job_id) == "waiting"
        (gate,) = await office.open_gates(job_id)
        used = len(model.requests) * TOKENS
        assert (gate.kind, gate.engine_made, gate.conversation_id) == ("budget", True, "job:1")
        assert gate.question.startswith(f"{QUESTION_OPENING}: it used {used:,} of its {CAP:,}")
        assert f"raise its cap to {used + CAP:,} tokens" in gate.question
        assert parked.asked == [gate.gate_id]
        decision = await office.proxy.decision(gate.gate_id)
        assert decision is not None
        assert decision.why.startswith("no prediction: budget:")
        assert not [r for r in model.requests if r.agent == office.org.proxy.name]

        calls = len(model.requests)
        everyone = await office.engine.store.read(
            lambda tx: [c for (c,) in tx.execute("SELECT conversation_id FROM conversations")]
        )
        office.engine.scheduler.wake(everyone)  # a conversation woken anyway waits
        await office.run_until_idle()
        assert await drive(office, parked, job_id) == "waiting"
        assert len(model.requests) == calls, "no model call while the gate is open"
        assert [g.gate_id for g in await office.open_gates(job_id)] == [gate.gate_id]
        assert not await office.busy(job_id), "a runner's run has nothing to do for it"
    finally:
        await office.close()

    office = await open_office(home, text, model)  # a restart: still nothing runs
    try:
        await office.resume()
        await office.run_until_idle()
        assert len(model.requests) == calls
        await office.answer_gate(gate.gate_id, text="yes", answered_by="carol")
        assert await office.budget.limits(job_id) == (None, used + CAP)
        assert await office.busy(job_id)
        forge = FakeForge(office, answers={QUESTION_OPENING: "yes"})
        assert await drive(office, forge, job_id) == "done"
        assert forge.delivered == [f"teaparty/job-{job_id}-changelog"]
        assert len(model.requests) > calls, "approved, the job went on"
        answers = await office.engine.store.read(
            lambda tx: tx.execute("SELECT answer FROM gates WHERE kind = 'budget'").fetchall()
        )
        assert answers
        assert {a for (a,) in answers} == {"yes"}
        assert (await office.budget.spent(job_id)).tokens == len(model.requests) * TOKENS
    finally:
        await office.close()


async def test_a_decider_who_declines_stops_the_job_at_its_budget(tmp_path: Path) -> None:
    repo, text = repository(tmp_path / "widgets"), project(f"max_usd: null, max_tokens: {CAP}")
    model = billed()
    office = await open_office(tmp_path / "home", text, model)
    try:
        job_id = await start(office, repo, text)
        assert await drive(office, FakeForge(office, leave_open=True), job_id) == "waiting"
        (gate,) = await office.open_gates(job_id)
        calls, used = len(model.requests), len(model.requests) * TOKENS
        await office.answer_gate(gate.gate_id, text="no, that is enough", answered_by="carol")
        assert await drive(office, FakeForge(office), job_id) == "done"
        assert len(model.requests) == calls, "declined: no model call after"
        assert await office.budget.limits(job_id) == (None, CAP)
        assert await status(office, job_id) == (
            f"stopped before finishing (budget: the job used {used:,} of its {CAP:,} tokens; "
            "carol (the decider) chose to stop the job at its budget)"
        )
    finally:
        await office.close()


async def test_budget_dollars_from_the_decider_answer_the_open_gate(tmp_path: Path) -> None:
    """`/budget 5` while the gate is open: that cap, the gate approved, the job done."""
    async with capped(tmp_path, "max_usd: 0.001") as (office, model, repo, job_id):
        assert await drive(office, FakeForge(office, leave_open=True), job_id) == "waiting"
        (gate,) = await office.open_gates(job_id)
        assert "of its $0.00 cap" in gate.question  # $0.001, shown to the cent
        answered = await office.control.set_budget(job_id, 5.0, by="carol", ref="github:c:9")
        assert answered is not None
        assert answered.gate_id == gate.gate_id
        assert answered.approved
        assert answered.answer_ref == "github:c:9"
        assert await office.budget.limits(job_id) == (5.0, None)
        assert await office.open_gates(job_id) == []
        assert await office.control.set_budget(job_id, 5.0, by="carol") is None, "none open"
        assert await drive(office, FakeForge(office), job_id) == "done"


async def test_yes_at_the_terminal_does_not_raise_a_budget(tmp_path: Path) -> None:
    """`teaparty run --yes` answers every question but the budget's: the job stops at it."""
    budget = f"max_usd: null, max_tokens: {CAP}"
    async with capped(tmp_path, budget) as (office, model, repo, job_id):
        said: list[str] = []
        forge = LocalForge(office, repo, decider="carol", approve=None, say=said.append, auto="yes")
        assert await drive(office, forge, job_id) == "done"
        assert "  answered 'no' automatically: --yes does not raise a job's budget" in said
        assert await office.budget.limits(job_id) == (None, CAP)
        result = await status(office, job_id)
        assert result is not None
        assert result.endswith("carol (--yes) (the decider) chose to stop the job at its budget)")


async def test_with_the_budget_gate_off_a_spent_budget_stops_the_job(tmp_path: Path) -> None:
    repo = repository(tmp_path / "widgets")
    text = project(f"max_usd: null, max_tokens: {CAP}", gates="plan: never, budget: never")
    model = billed()
    office = await open_office(tmp_path / "home", text, model)
    try:
        job_id = await start(office, repo, text)
        forge = FakeForge(office)  # any question would fail the test
        assert await drive(office, forge, job_id) == "done"
        assert forge.asked == []
        result = await status(office, job_id)
        assert result is not None
        assert result.startswith("stopped before finishing (budget: the job used ")
        assert "chose" not in result
    finally:
        await office.close()


async def test_the_proxys_tokens_are_the_jobs_and_can_spend_its_budget(tmp_path: Path) -> None:
    """At a plan gate the proxy's prediction is billed to the job: in its budget, its status
    and `teaparty jobs`; with the cap one call above what the agents used, its call is the
    one that spends it."""
    text = project("max_usd: null, max_tokens: null", gates="plan: always")
    model = billed()
    office = await open_office(tmp_path / "home", text, model)
    try:
        job_id = await start(office, repository(tmp_path / "widgets"), text)
        assert await drive(office, FakeForge(office, answers={"The plan:": "yes"}), job_id) == (
            "done"
        )
        proxy = [r for r in model.requests if r.agent == office.org.proxy.name]
        assert len(proxy) == 1, "the proxy predicted the plan gate's answer"
        spent = await office.budget.spent(job_id)
        assert spent.tokens == len(model.requests) * TOKENS
        shown = await JobDriver(office, lambda _: _none()).status(job_id)
        assert (shown.usage, shown.cost_usd) == (spent.usage, spent.usd)
        priced = office.budget.price(office.org.proxy.name, Usage(input_tokens=TOKENS))
        without = await office.engine.store.read(
            lambda tx: tx.execute(
                "SELECT sum(input_tokens) FROM messages m JOIN conversations c"
                " USING (conversation_id) WHERE c.job_id = ?",
                (job_id,),
            ).fetchone()[0]
        )
        assert spent.tokens == without + TOKENS
        assert priced > 0
    finally:
        await office.close()
    async with JobViews.open(tmp_path / "home", org_dir=shipped_org_dir()) as views:
        summary = (await views.job(job_id)).summary
        assert summary.usage == spent.usage
        assert summary.cost_usd is not None
        assert abs(summary.cost_usd - spent.usd) < 1e-9

    # Before the plan gate the agents used three calls; the proxy's is the fourth.
    text = project(f"max_usd: null, max_tokens: {3 * TOKENS + 50}", "plan: always, budget: never")
    model = billed()
    office = await open_office(tmp_path / "again", text, model)
    try:
        job_id = await start(office, repository(tmp_path / "gadgets"), text)
        forge = FakeForge(office, answers={"The plan:": "yes"})
        assert await drive(office, forge, job_id) == "done"
        assert [r.agent for r in model.requests].count(office.org.proxy.name) == 1
        assert len(model.requests) == 4, "the proxy's call spent the budget"
        assert await status(office, job_id) == (
            "stopped before finishing (budget: the job used 400 of its 350 tokens)"
        )
    finally:
        await office.close()


async def _none() -> None:
    return None


# On the engine alone: two workers reach the cap together


class Echo:
    """Runs any tool other than the bus tools by echoing its name."""

    async def run(self, agent: str, conversation_id: str, call: ToolCall) -> ToolResult:
        return ToolResult(call.call_id, f"{call.name} ok")


def parallel(request: ModelRequest) -> AssistantTurn:
    """The coding lead sends two implementers at once; each searches twice, then reports."""
    used = Usage(input_tokens=300, output_tokens=100)
    n = len(request.messages)
    if request.agent == CODING_LEAD:
        if n == 1:
            turn = calls(send("a", "implementer", "part a"), send("b", "implementer", "part b"))
            return replace(turn, usage=used)
        return AssistantTurn(text="lead: both parts done", usage=used)
    if n >= 5:
        return AssistantTurn(text="part done", usage=used)
    return AssistantTurn(tool_calls=(ToolCall(f"t{n}", "search", {}),), usage=used)


async def engine_job(tmp_path: Path, model: FunctionModel) -> tuple[Engine, JobBudget]:
    store = await Store.open(tmp_path / "s.db")
    budget = JobBudget(store, max_usd=None, max_tokens=1_000, price=lambda agent, usage: 0.0)
    engine = Engine.over(
        store,
        agents=StaticAgents(model),
        router=org_router(),
        tools=Echo(),
        budget=budget,
        extensions=extensions(),  # the budget gate's answer is carried out
    )

    def gated(tx: Tx, job_id: int) -> None:
        tx.execute(
            "UPDATE jobs SET gate_modes = ? WHERE job_id = ?", ('{"budget": "always"}', job_id)
        )

    await engine.bus.start_job(
        job_key="k", project="widgets", title="t", agent=CODING_LEAD, brief="go", also=gated
    )
    await engine.scheduler.run_until_idle()
    return engine, budget


async def test_one_gate_for_the_job_however_many_turns_reach_the_cap(tmp_path: Path) -> None:
    model = FunctionModel(parallel)
    engine, budget = await engine_job(tmp_path, model)
    try:
        held = await engine.store.read(
            lambda tx: tx.execute(
                "SELECT count(*) FROM conversations WHERE agent = ? AND in_turn = 1",
                (IMPLEMENTER,),
            ).fetchone()[0]
        )
        assert held == 2, "both workers wait, mid-turn, at the one gate"
        asked = 0
        while (result := (await engine.bus.snapshot("job:1")).conversation.result) is None:
            (gate,) = await engine.bus.open_gates(1)
            asked += 1
            calls_then = len(model.requests)
            engine.scheduler.wake(await engine.bus.runnable(1))
            await engine.scheduler.run_until_idle()
            assert len(model.requests) == calls_then, "nothing runs while it is open"
            proposed = gate.payload["proposed"]["tokens"]
            await engine.bus.answer_gate(gate.gate_id, text="yes", answered_by="carol")
            assert await budget.limits(1) == (None, proposed)
            await engine.scheduler.run_until_idle()
        assert result == "lead: both parts done"
        assert asked >= 2, "the job reached its cap, then the one raised for it"
        assert len(model.requests) == 8  # 2 lead turns, 3 per implementer: none lost or repeated
        kinds = await engine.store.read(
            lambda tx: tx.execute("SELECT kind, count(*) FROM gates GROUP BY kind").fetchall()
        )
        assert kinds == [("budget", asked)]
    finally:
        await engine.close()


async def test_declined_every_turn_of_the_job_stops_saying_who_chose_it(tmp_path: Path) -> None:
    model = FunctionModel(parallel)
    engine, budget = await engine_job(tmp_path, model)
    try:
        (gate,) = await engine.bus.open_gates(1)
        calls_then = len(model.requests)
        await engine.bus.answer_gate(gate.gate_id, text="/reject", answered_by="carol")
        await engine.scheduler.run_until_idle()
        assert len(model.requests) == calls_then
        assert await engine.bus.open_gates(1) == []
        result = (await engine.bus.snapshot("job:1")).conversation.result
        spent = (await budget.spent(1)).tokens
        assert result == (
            f"stopped before finishing (budget: the job used {spent:,} of its 1,000 tokens; "
            "carol (the decider) chose to stop the job at its budget)"
        )
    finally:
        await engine.close()


async def test_a_mini_team_stops_at_its_allowance_and_shares_the_job_budget_by_default(
    tmp_path: Path,
) -> None:
    repo, home = repository(tmp_path / "widgets"), tmp_path / "home"
    text = project("max_usd: 1.0")
    office = await open_office(home, text, billed())
    try:
        job_id = await start(office, repo, text)
        assert await drive(office, FakeForge(office), job_id) == "done"
        store, budget = office.engine.store, office.budget
        (team,) = await store.read(
            lambda tx: [
                c
                for (c,) in tx.execute(
                    "SELECT conversation_id FROM conversations WHERE kind = 'task'"
                )
            ]
        )
        used = await store.read(lambda tx: budget._task_priced(tx, 1))
        assert used > 0
        assert await budget.admit(job_id, team) is None  # within its share of $1.00
        assert await budget.admit(job_id, "job:1") is None  # not a mini-team's
        await store.write(
            lambda tx: tx.execute("UPDATE tasks SET allowance_usd = ? WHERE number = 1", (used,))
        )
        refused = await budget.admit(job_id, team)
        assert refused is not None
        assert not refused.held
        assert refused.reason.startswith(f"budget: task #1's mini-team spent ${used:.4f} of its")
        assert "its lead decides" in refused.reason
        await store.write(
            lambda tx: tx.execute("UPDATE tasks SET allowance_usd = NULL, state = 'pending'")
        )
        await store.write(lambda tx: tx.execute("UPDATE jobs SET budget_usd = ?", (used / 2,)))
        refused = await budget.admit(job_id, team)  # the job's own cap is passed: its gate
        assert refused is not None
        assert refused.held
    finally:
        await office.close()
