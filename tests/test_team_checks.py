"""The coordinator with the engine's checks, step by step from its transcript alone: a
failing check is a review round for the worker and never reaches the reviewers, rounds
spent on failing checks escalate, and checks failing on the job branch after the last
merge become the one task that makes them pass (within the phase rounds)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from orchestrator.agents.tools import SEND
from orchestrator.core.messages import Message, ToolCall
from orchestrator.setup.checks import Checked, CommandRun
from orchestrator.teams.coordinator import next_turn
from orchestrator.teams.protocol import (
    CHECK,
    FINISH,
    MERGE,
    PHASE,
    PREPARE,
    REVIEW,
    Finished,
    Merged,
    PhaseTasks,
    Prepared,
    Reviewed,
    encode,
)

PREPARED = Prepared(
    task=1,
    title="Add mul",
    spec="calc.mul multiplies.",
    review="full",
    rounds=2,
    worker="implementer",
    reviewers=("spec-reviewer",),
    fallback_reviewers=("spec-reviewer",),
    phase_reviewer="phase-reviewer",
    branch="teaparty/job-1-calc--task-1",
    job_branch="teaparty/job-1-calc",
    checks=("python3 -m unittest -q",),
)
RED = Checked(
    "c" * 40,
    "failed",
    (CommandRun("test", "python3 -m unittest -q", "failed", 1, 0.4, "", "exit 1", "FAILED"),),
)
GREEN = Checked(
    "d" * 40,
    "passed",
    (CommandRun("test", "python3 -m unittest -q", "passed", 0, 0.3, "1 run", "", "OK"),),
)
Respond = Callable[[ToolCall], Mapping[str, Any]]


def play(respond: Respond, prepared: Prepared = PREPARED, *, limit: int = 40) -> list[ToolCall]:
    """Run the coordinator against `respond` (each step's or member's result) to its final
    reply; every call it made, in order."""
    messages = [Message("t", 1, "lead", "user", {"kind": "request", "text": "Do it."})]
    calls: list[ToolCall] = []
    for _ in range(limit):
        turn = next_turn(messages)
        if not turn.tool_calls:
            calls.append(ToolCall("end", "reply", {"text": turn.text}))
            return calls
        seq = messages[-1].seq
        content = {
            "tool_calls": [
                {"id": c.call_id, "name": c.name, "args": c.args} for c in turn.tool_calls
            ]
        }
        messages.append(Message("t", seq + 1, "coordinator", "assistant", content))
        for n, call in enumerate(turn.tool_calls):
            calls.append(call)
            result = {
                "call_id": call.call_id,
                **(prepared_result(prepared) if call.name == PREPARE else respond(call)),
            }
            messages.append(Message("t", seq + 2 + n, "engine", "tool", result))
    raise AssertionError(f"no final reply after {limit} turns: {[c.name for c in calls]}")


def prepared_result(prepared: Prepared) -> dict[str, Any]:
    return {"text": encode(prepared)}


def engine(checks: list[Checked], *, phase_reviews: int = 0) -> Respond:
    """The engine's steps, with `checks` the results of each team_check in turn; members
    approve and reply `done`."""
    left = iter(checks)

    def respond(call: ToolCall) -> Mapping[str, Any]:
        if call.name == REVIEW:
            return {"text": encode(Reviewed("b" * 40, "h" * 40, 1))}
        if call.name == CHECK:
            return {"text": encode(next(left))}
        if call.name == MERGE:
            merged = Merged(merged="m" * 40, last=True, base="b", phase_reviews=phase_reviews)
            return {"text": encode(merged)}
        if call.name == PHASE:
            return {"text": encode(PhaseTasks((2,) if call.args.get("checks") else ()))}
        if call.name == FINISH:
            return {"text": encode(Finished(str(call.args.get("outcome"))))}
        if call.name == SEND:
            return {
                "text": "approve" if "review" in call.args["member"] else "Done.",
                "conversation_id": "w",
            }
        raise AssertionError(call.name)

    return respond


def names(calls: list[ToolCall]) -> list[str]:
    return [c.name if c.name != SEND else f"send:{c.args['member']}" for c in calls]


def test_a_failing_check_goes_back_to_the_worker_before_any_review() -> None:
    calls = play(engine([RED, GREEN, GREEN]))
    assert names(calls) == [
        PREPARE, "send:implementer", REVIEW, CHECK,
        "send:implementer", REVIEW, CHECK,
        "send:spec-reviewer", MERGE, CHECK, "send:phase-reviewer", PHASE, FINISH, "reply",
    ]  # fmt: skip
    feedback = calls[4].args["message"]
    assert "Review round 1 of 2: the project's checks fail on your commit" in feedback
    assert "End of the output of `python3 -m unittest -q`:\nFAILED" in feedback
    review = calls[7].args["message"]
    assert "- test `python3 -m unittest -q` passed (1 run) in 0.3 s" in review
    assert "Do not run these commands again" in review
    assert calls[9].args == {"scope": "job"}
    assert "passed (1 run)" in calls[10].args["message"], "the phase reviewer reads it too"


def test_checks_failing_every_round_escalate_with_their_output() -> None:
    calls = play(engine([RED, RED]))
    assert names(calls)[-2:] == [FINISH, "reply"]
    assert calls[-2].args["outcome"] == "escalated"
    assert "the project's checks still fail after 2 round(s)" in calls[-2].args["reason"]
    assert not [c for c in calls if c.name == SEND and c.args["member"] == "spec-reviewer"]


def test_a_task_without_reviewers_is_checked_before_its_merge() -> None:
    alone = Prepared(**{**PREPARED.__dict__, "reviewers": (), "phase_reviewer": None})
    calls = play(engine([RED, GREEN, GREEN]), alone)
    assert names(calls) == [
        PREPARE, "send:implementer", REVIEW, CHECK, "send:implementer", REVIEW, CHECK,
        MERGE, CHECK, FINISH, "reply",
    ]  # fmt: skip


def test_checks_failing_on_the_job_branch_become_a_task_within_the_phase_rounds() -> None:
    calls = play(engine([GREEN, RED]))
    assert names(calls)[-4:] == [CHECK, PHASE, FINISH, "reply"]
    assert calls[-3].args["checks"] is True
    assert "the project's checks fail on the job branch, so task #2" in calls[-1].args["text"]

    spent = play(engine([GREEN, RED], phase_reviews=2))
    assert names(spent)[-3:] == [CHECK, FINISH, "reply"], "no rounds left: the lead decides"
    assert "checks FAIL on the job branch and no round is left" in spent[-1].args["text"]


def test_without_check_commands_the_steps_are_as_before() -> None:
    plain = Prepared(**{**PREPARED.__dict__, "checks": ()})
    calls = play(engine([]), plain)
    assert CHECK not in names(calls)
    assert names(calls)[:4] == [PREPARE, "send:implementer", REVIEW, "send:spec-reviewer"]


def test_every_member_is_sent_the_task_first_and_a_reviewer_its_diff() -> None:
    diff = "diff --git a/calc.py b/calc.py\n+def mul(a, b):\n"

    def respond(call: ToolCall) -> Mapping[str, Any]:
        if call.name == REVIEW:
            return {"text": encode(Reviewed("b" * 40, "h" * 40, 1, diff=diff))}
        return engine([])(call)

    calls = play(respond, replace(PREPARED, checks=()))
    worker, reviewer = (c for c in calls if c.name == SEND and "phase" not in c.args["member"])
    assert worker.args["shared"] == "Task #1: Add mul\n\nSpec:\ncalc.mul multiplies."
    assert reviewer.args["shared"] == worker.args["shared"], "one prefix for the mini-team"
    assert reviewer.args["message"].startswith("Review task #1 (round 1 of 2): your role is its")
    assert f"<diff>\n{diff.rstrip()}\n</diff>" in reviewer.args["message"]


def test_a_diff_too_long_for_the_brief_is_read_with_git() -> None:
    reviewed: list[ToolCall] = []

    def respond(call: ToolCall) -> Mapping[str, Any]:
        if call.name == SEND and "review" in call.args["member"]:
            reviewed.append(call)
            verdict = "request changes\n1. More." if len(reviewed) == 1 else "approve"
            return {"text": verdict, "conversation_id": "r"}
        return engine([])(call)

    calls = play(respond, replace(PREPARED, checks=()))
    reviews = [c for c in calls if c.name == SEND and c.args["member"] == "spec-reviewer"]
    assert len(reviews) == 2
    assert "Read it with `git diff " in reviews[0].args["message"]
    assert "<diff>" not in reviews[0].args["message"]
    assert "shared" in reviews[0].args
    assert reviews[1].args["context_id"] == "r"
    assert "shared" not in reviews[1].args, "a continued conversation has the task already"
