"""The budget gate on GitHub: its comment, the decider's commands on it from real
`issue_comment` payloads, and `/budget <dollars>` answering it end to end through the App
and the local GitHub stand-in."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from app_harness import OWNER, app_settings, bodies, in_process, until, world
from conftest import Load
from fakes import FunctionModel
from local_repo import committed
from test_handler_decisions import COMMENT_ID, commented, gate, job, subject

from bot.github.outbound import Outbound
from bot.github.tracking import gate_body
from bot.handlers.actions import AnswerGate, Control, React, job_key
from bot.handlers.issue_comment import CommentFacts, comment_ref, decide_comment
from orchestrator.api import AssistantTurn, DemoModel, ModelRequest, Sandbox
from orchestrator.bus.gates import ENGINE
from orchestrator.core.messages import Usage
from orchestrator.jobs.budget_gate import OPTIONS, Overrun

DECIDER = "octocat"
OVER = Overrun(usd=10.02, tokens=91_000, max_usd=10.0, max_tokens=None)
BUDGET = replace(
    gate(4, digest="4c" * 32),
    kind="budget",
    question=OVER.question(),
    options=OPTIONS,
    asked_by=ENGINE,
)
TAKEN = React("+1", comment_id=COMMENT_ID)
REPO = "gadgets"
NOWHERE = Sandbox("unavailable", "not needed: the model here runs no shell")
pytestmark = pytest.mark.timeout(180)


def test_the_budget_gate_says_what_was_spent_the_cap_the_proposal_and_how_to_answer() -> None:
    body = gate_body(BUDGET, decider="alice", agent=Outbound(OWNER, REPO, 5))
    assert body == (
        "<!-- teaparty:gate:4 -->\n"
        "**Question 4** — the job has reached its budget (`budget 4c4c4c4`):\n\n"
        "> The job has reached its budget: it spent $10.02 of its $10.00 cap. No model call "
        "is made until you answer.\n>\n"
        "> Proposed: raise its cap to $20.02 (what it has used plus the cap it reached) and "
        "go on.\n\n"
        "@alice, `/approve 4c4c4c4` raises the cap as proposed, `/budget <dollars>` sets "
        "another, `/reject` stops the job here (on a line of its own)."
    )


def test_both_caps_reached_are_both_said_and_both_proposed() -> None:
    both = Overrun(usd=1.0, tokens=1_200, max_usd=0.5, max_tokens=1_000)
    assert "spent $1.00 of its $0.50 cap and used 1,200 of its 1,000 tokens" in both.question()
    assert "raise its cap to $1.50 and 2,200 tokens" in both.question()
    assert both.proposal() == (1.5, 2_200)
    assert Overrun(0.0041, 0, 0.004, None).proposal() == (0.01, None), "up to the cent"


def facts() -> CommentFacts:
    return CommentFacts(job("active"), subject(DECIDER), gates=(BUDGET,), author_access="write")


@pytest.mark.parametrize(
    ("body", "action"),
    [
        ("/budget 5", Control(7, "budget", "5.0", by=DECIDER, ref=comment_ref(COMMENT_ID))),
        ("/approve 4c4c4c4", AnswerGate(7, 4, "yes", DECIDER, ref=comment_ref(COMMENT_ID))),
        ("/reject enough", AnswerGate(7, 4, "no (enough)", DECIDER, ref=comment_ref(COMMENT_ID))),
    ],
)
def test_the_deciders_answers_to_a_budget_gate(payload: Load, body: str, action: Any) -> None:
    """`/budget <dollars>` is the job's order (the engine answers the open gate with it);
    `/approve` takes the proposal; `/reject` declines it."""
    assert decide_comment(commented(payload, body, login=DECIDER), facts()) == (action, TAKEN)


def source_repo(path: Path) -> Path:
    project = "humans: {decider: alice}\nbudget: {max_usd: 0.001}\ngates: {plan: never}\n"
    return committed(path, {".teaparty/project.yaml": project, "README.md": "gadgets\n"})


async def test_budget_dollars_on_the_issue_answer_the_gate_and_the_job_finishes(
    tmp_path: Path,
) -> None:
    hub, port, pem = world(tmp_path)
    hub.add_repo(OWNER, REPO, source=source_repo(tmp_path / "src"))
    demo = DemoModel()

    async def billed(request: ModelRequest) -> AssistantTurn:
        return replace(await demo.complete(request), usage=Usage(input_tokens=100))

    model = FunctionModel(billed)
    async with hub.serve() as api_url:
        settings = app_settings(hub, api_url, tmp_path / "home", pem)
        async with in_process(settings, lambda _: model, port=port, sandbox=NOWHERE) as runtime:
            number = hub.open_issue(OWNER, REPO, title="Add a note", body="Please.", author="alice")
            await hub.label_issue(OWNER, REPO, number, "teaparty", sender="alice")
            await until(lambda: bodies(hub, number, "gate:", REPO), what="the budget gate")
            (asked,) = bodies(hub, number, "gate:", REPO)
            assert "The job has reached its budget: it spent $0.00 of its $0.00 cap" in asked
            assert "`/budget <dollars>` sets another" in asked
            calls = len(model.requests)

            comment_id = await hub.comment_as(OWNER, REPO, number, "alice", "/budget 5")
            await until(lambda: hub.pulls(OWNER, REPO), what="the pull request")
            assert len(model.requests) > calls
            assert "+1" in hub.comment_reactions(OWNER, REPO, comment_id)
            (gate_row,) = await runtime.office.engine.store.read(
                lambda tx: tx.execute(
                    "SELECT answer, answered_by, answer_ref, kind FROM gates"
                ).fetchall()
            )
            assert gate_row == (
                "yes, with a cap of $5.00 (/budget)",
                "alice",
                comment_ref(comment_id),
                "budget",
            )
            job = await runtime.office.records.job_for_key(job_key(OWNER, REPO, number))
            assert job is not None
            assert (await runtime.office.budget.limits(job.job_id))[0] == 5.0
