"""The mini-team coordinator: the engine's code, run as the agent of a task conversation.

A lead's `dispatch` opens a task conversation; this coordinator takes its turns. Each turn
is a pure function of the transcript (the lead's brief, the team_* step results, the
members' replies), so the task's progress is exactly what the store holds and a restart
carries on from it. The members are ordinary agents reached by Send: a fresh worker in the
task's worktree, then the reviewers the task's review level asks for, each given the
spec and the diff, never the worker's transcript. Changes requested go back to the worker
in its own conversation, up to the workgroup's review rounds; then the lead is told. An
approved branch is merged by the engine; the last merge of a job brings in the phase
reviewer, whose requested changes become new tasks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from orchestrator.agents.ports import Agents, AgentSpec
from orchestrator.agents.tools import SEND
from orchestrator.core.messages import AssistantTurn, Message, ToolCall
from orchestrator.core.model import ModelRequest
from orchestrator.teams.board import RESULT_MAX
from orchestrator.teams.conflict_gate import report
from orchestrator.teams.protocol import (
    FINISH,
    MERGE,
    PHASE,
    PREPARE,
    REVIEW,
    Merged,
    PhaseTasks,
    Prepared,
    Reviewed,
    StepFailed,
    decode,
)
from orchestrator.teams.transactions import MINI_TEAM

T = TypeVar("T")

APPROVE = "approve"
BLOCKED = "blocked"
REQUEST_REVIEW = "request review"


@dataclass
class Step:
    """One tool call of the coordinator and what came back."""

    call: ToolCall
    results: list[Mapping[str, Any]] = field(default_factory=list)


def _steps(messages: Sequence[Message]) -> tuple[Mapping[str, Any], list[list[Step]]]:
    """The request, and the coordinator's turns as lists of steps with their results."""
    request: Mapping[str, Any] = {}
    turns: list[list[Step]] = []
    by_id: dict[str, Step] = {}
    for message in messages:
        if message.role == "user" and message.content.get("kind") == "request" and not request:
            request = message.content
        elif message.role == "assistant" and message.tool_calls:
            turn = [Step(call) for call in message.tool_calls]
            by_id |= {step.call.call_id: step for step in turn}
            turns.append(turn)
        elif message.role == "tool" and message.call_id in by_id:
            by_id[message.call_id].results.append(message.content)
    return request, turns


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0].strip().lower() if text.strip() else ""


def _result(kind: type[T], step: Step) -> T | StepFailed:
    """A step's stored result, read as its record."""
    result = step.results[0]
    return decode(kind, str(result.get("text", "")), is_error=bool(result.get("is_error")))


def _commits(step: Step) -> int:
    reviewed = _result(Reviewed, step)
    return 0 if isinstance(reviewed, StepFailed) else reviewed.commits


def _last(kind: type[T], turns: list[list[Step]], name: str) -> T:
    """The last result of the step `name`, which the transcript shows succeeded."""
    found = _result(kind, next(t for t in reversed(turns) if t[0].call.name == name)[0])
    if isinstance(found, StepFailed):
        raise ValueError(f"{name}: {found.error}")
    return found


class Coordinator:
    """The Model of every mini-team: decides the next step of a task from its transcript."""

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        """The next turn: a step to take, or the final reply to the lead."""
        return next_turn(request.messages)


def next_turn(messages: Sequence[Message]) -> AssistantTurn:
    """The coordinator's decision, from the transcript alone."""
    request, turns = _steps(messages)
    seq = messages[-1].seq if messages else 0
    ids = iter(f"team-{seq}-{n}" for n in range(100))

    def call(name: str, **args: Any) -> ToolCall:
        return ToolCall(next(ids), name, args)

    if not turns:
        return AssistantTurn(tool_calls=(call(PREPARE),))
    info = _result(Prepared, turns[0][0])
    if isinstance(info, StepFailed):
        return AssistantTurn(text=f"The mini-team could not start: {info.error}")
    last = turns[-1]
    name = last[0].call.name
    if name == FINISH:
        return AssistantTurn(text=_final_reply(info, turns))
    if name == PREPARE:
        brief = _worker_brief(info, request)
        return AssistantTurn(tool_calls=(call(SEND, member=info.worker, message=brief),))
    if name == REVIEW:
        return _to_reviewers(info, turns, call)
    if name == MERGE:
        return _after_merge(info, _result(Merged, last[0]), call)
    if name == PHASE:
        return AssistantTurn(tool_calls=(call(FINISH, outcome="merged"),))
    return _after_replies(info, turns, last, call)


Call = Callable[..., ToolCall]


def _to_reviewers(info: Prepared, turns: list[list[Step]], call: Call) -> AssistantTurn:
    review = _result(Reviewed, turns[-1][0])
    if isinstance(review, StepFailed) or not review.commits:
        return _nothing_committed(info, turns, call)
    rounds = _review_rounds(turns)
    sends = [
        call(SEND, member=r, message=_review_brief(info, review, rounds), **_context(turns, r))
        for r in _reviewers(info, turns)
    ]
    return AssistantTurn(tool_calls=tuple(sends))


def _nothing_committed(info: Prepared, turns: list[list[Step]], call: Call) -> AssistantTurn:
    """A worker that says it is done but committed nothing is sent back, then escalated."""
    empty = sum(turn[0].call.name == REVIEW and not _commits(turn[0]) for turn in turns)
    if empty >= info.rounds:
        reason = f"the worker committed nothing on {info.branch} after {empty} reminder(s)"
        return AssistantTurn(tool_calls=(call(FINISH, outcome="no commits", reason=reason),))
    worker = info.worker
    message = (
        f"Your worktree has no changes beyond the job branch ({info.branch} has no "
        "commits), so there is nothing to review or merge. Make the change in your "
        "worktree and reply when it is done (the engine commits what you leave there); if "
        "it cannot be done, reply `blocked: <reason>`."
    )
    return AssistantTurn(
        tool_calls=(call(SEND, member=worker, message=message, **_context(turns, worker)),)
    )


def _after_merge(info: Prepared, merged: Merged | StepFailed, call: Call) -> AssistantTurn:
    if isinstance(merged, StepFailed):
        reason = f"the merge failed: {merged.error}"
        return AssistantTurn(tool_calls=(call(FINISH, outcome="blocked", reason=reason),))
    if merged.conflicts is not None:
        reason = "merge conflict in " + ", ".join(merged.conflicts)
        return AssistantTurn(tool_calls=(call(FINISH, outcome="conflict", reason=reason),))
    phase = info.phase_reviewer
    if merged.last and phase and merged.phase_reviews < info.rounds:
        return AssistantTurn(
            tool_calls=(call(SEND, member=phase, message=_phase_brief(info, merged)),)
        )
    return AssistantTurn(tool_calls=(call(FINISH, outcome="merged"),))


def _after_replies(
    info: Prepared, turns: list[list[Step]], last: list[Step], call: Any
) -> AssistantTurn:
    member = last[0].call.args.get("member")
    replies = [(step.call.args.get("member", ""), _reply_text(step)) for step in last]
    if member == info.phase_reviewer and len(turns) > 2 and turns[-2][0].call.name == MERGE:
        verdict = replies[0][1]
        approved = _first_line(verdict).startswith(APPROVE)
        return AssistantTurn(tool_calls=(call(PHASE, verdict=verdict, approved=approved),))
    if member == info.worker:
        text = replies[0][1]
        if last[0].results[0].get("is_error") or _first_line(text).startswith(BLOCKED):
            return AssistantTurn(tool_calls=(call(FINISH, outcome="blocked", reason=text),))
        if _reviewers(info, turns):
            return AssistantTurn(tool_calls=(call(REVIEW, result=text),))
        return AssistantTurn(tool_calls=(call(MERGE, result=text),))
    objections = [(who, text) for who, text in replies if not _first_line(text).startswith(APPROVE)]
    if not objections:
        return AssistantTurn(tool_calls=(call(MERGE, result=_worker_reply(info, turns)),))
    points = "\n\n".join(f"{who}:\n{text}" for who, text in objections)
    rounds = _review_rounds(turns)
    if rounds >= info.rounds:
        return AssistantTurn(tool_calls=(call(FINISH, outcome="escalated", reason=points),))
    feedback = (
        f"Review round {rounds} of {info.rounds}: changes requested.\n\n{points}\n\n"
        "Address every point (or say why not) in your worktree, and reply as before; the "
        "engine commits your changes when you reply."
    )
    return AssistantTurn(
        tool_calls=(
            call(SEND, member=info.worker, message=feedback, **_context(turns, info.worker)),
        )
    )


def _reply_text(step: Step) -> str:
    return str(step.results[0].get("text", "")) if step.results else ""


def _context(turns: list[list[Step]], member: str) -> dict[str, str]:
    """context_id of the conversation already open with `member`, to continue it."""
    for turn in turns:
        for step in turn:
            if step.call.name == SEND and step.call.args.get("member") == member and step.results:
                conversation = step.results[0].get("conversation_id")
                if conversation:
                    return {"context_id": str(conversation)}
    return {}


def _worker_replies(info: Prepared, turns: list[list[Step]]) -> list[str]:
    return [
        _reply_text(step)
        for turn in turns
        for step in turn
        if step.call.name == SEND and step.call.args.get("member") == info.worker
    ]


def _worker_reply(info: Prepared, turns: list[list[Step]]) -> str:
    replies = _worker_replies(info, turns)
    return replies[-1] if replies else ""


def _reviewers(info: Prepared, turns: list[list[Step]]) -> list[str]:
    """The task's reviewers; a worker may ask for review of a task planned without it."""
    if info.reviewers:
        return list(info.reviewers)
    asked = any(_first_line(r).startswith(REQUEST_REVIEW) for r in _worker_replies(info, turns))
    return list(info.fallback_reviewers) if asked else []


def _review_rounds(turns: list[list[Step]]) -> int:
    return sum(turn[0].call.name == REVIEW for turn in turns)


def _worker_brief(info: Prepared, request: Mapping[str, Any]) -> str:
    lines = [
        f"Task #{info.task}: {info.title}",
        "",
        "You are the worker of a fresh mini-team on this task. Your current directory is the "
        f"task's own git worktree, on branch {info.branch}, made from the job branch "
        f"{info.job_branch}. Leave your changes there: the engine commits them when you "
        "reply (your git is read-only: status, diff and log work, commit does not) and "
        "merges your branch into the job branch once review approves.",
        "",
        "Spec:",
        info.spec,
    ]
    if request.get("text"):
        lines += ["", f"From your lead ({request.get('from', 'the lead')}):", str(request["text"])]
    if info.merges_base is not None:
        files = ", ".join(info.conflicts) or "(none left: check git status)"
        lines += [
            "",
            f"This task merges the base branch (at {info.merges_base[:12]}) into the job: "
            "git is merging it into your worktree and left conflict markers in: "
            f"{files}. Resolve each conflict keeping the intent of both sides and run the "
            "tests; the engine concludes the merge with your changes when you reply.",
        ]
    elif info.resolves is not None:
        files = ", ".join(info.conflicts) or "(none left: check git status)"
        lines += [
            "",
            f"This task resolves a merge conflict: the branch of task #{info.resolves} is "
            "being merged into your worktree and git left conflict markers in: "
            f"{files}. Resolve each conflict keeping the intent of both sides and run the "
            "tests; the engine concludes the merge with your changes when you reply.",
        ]
    review = ", ".join(info.reviewers) or "none"
    lines += [
        "",
        f"Review: {review}. Reviewers read the spec and your diff, not this conversation.",
    ]
    if not info.reviewers:
        lines.append(
            f'If the task proves harder than planned, begin your reply with "{REQUEST_REVIEW}".'
        )
    lines.append(
        "Reply with what changed and the tests you ran (your reply becomes the commit "
        "message); begin with "
        '"blocked:" and the reason if the task cannot be done as specified.'
    )
    return "\n".join(lines)


def _review_brief(info: Prepared, review: Reviewed, round_number: int) -> str:
    span = f"{review.base}..{review.head}"
    return "\n".join(
        [
            f"Review task #{info.task}: {info.title} (round {round_number} of {info.rounds}).",
            "",
            "Spec:",
            info.spec,
            "",
            f"The change is {review.commits} commit(s), {span}, on branch {info.branch}; "
            f"your current directory is its worktree. Read it with `git diff {span}` and "
            f"`git log {span}`. You do not edit files.",
            "",
            f"The first line of your reply is exactly `{APPROVE}` or `request changes`; after "
            "`request changes`, a numbered list of specific changes.",
        ]
    )


def _phase_brief(info: Prepared, merged: Merged) -> str:
    span = f"{merged.base}..{info.job_branch}"
    return "\n".join(
        [
            "Every task of this job is merged. Review the job as a whole before it becomes a "
            "pull request. Your current directory is a checkout of the job branch "
            f"{info.job_branch}; the job's change is `git diff {span}`.",
            "",
            "The job's request:",
            merged.request,
            "",
            "The tasks:",
            merged.board,
            "",
            f"The first line of your reply is exactly `{APPROVE}` or `request changes`; after "
            "`request changes`, a numbered list: each point becomes a new task.",
        ]
    )


def _final_reply(info: Prepared, turns: list[list[Step]]) -> str:
    outcome = turns[-1][0].call.args.get("outcome", "merged")
    reason = str(turns[-1][0].call.args.get("reason", ""))
    n = info.task
    if outcome == "merged":
        merge = _last(Merged, turns, MERGE)
        text = f"Task #{n} merged into {info.job_branch} ({str(merge.merged)[:12]}). "
        text += _clip(_worker_reply(info, turns), RESULT_MAX)
        rounds = _review_rounds(turns)
        if rounds:
            text += f"\nReview: approved after {rounds} round(s)."
        phase = [t for t in turns if t[0].call.name == PHASE]
        found = _result(PhaseTasks, phase[-1][0]) if phase else PhaseTasks()
        created = () if isinstance(found, StepFailed) else found.created
        if created:
            listed = ", ".join(f"#{c}" for c in created)
            text += (
                f"\nThis was the last task; the phase reviewer asked for changes, now tasks "
                f"{listed} on the board: dispatch them."
            )
        elif phase:
            text += "\nThis was the last task; the phase review approved the whole job."
        elif merge.last:
            text += "\nThis was the last task; no phase review ran (none configured, or its "
            text += "rounds are spent)."
        return text
    if outcome == "escalated":
        return (
            f"Task #{n} escalated: no approval after {info.rounds} review round(s). It is "
            f"marked blocked. Open points:\n{reason}\nDecide: dispatch it again with guidance "
            "in the brief, re-plan it, or leave it blocked."
        )
    if outcome == "conflict":
        merge = _last(Merged, turns, MERGE)
        files = merge.conflicts or ()
        text = report(
            task=n,
            job_branch=info.job_branch,
            branch=info.branch,
            files=files,
            hunks=merge.hunks or "",
        )
        return (
            f"{text}Create a resolution task (task_create with resolves={n}) and dispatch it, "
            "or re-plan."
        )
    return f"Task #{n} blocked: {reason}"


class TeamAgents:
    """Agents with the coordinator at every workgroup's `mini-team` address."""

    def __init__(self, inner: Agents) -> None:
        self.inner = inner
        self.coordinator = Coordinator()

    def spec(self, address: str) -> AgentSpec:
        """The coordinator for a mini-team address, else the configured agent."""
        if address.rsplit("/", 1)[-1] == MINI_TEAM:
            return AgentSpec(
                address, "", (), self.coordinator, max_turns=10_000, context_tokens=10**9
            )
        return self.inner.spec(address)
