"""The mini-team coordinator: the engine's code, run as the agent of a task conversation.

A lead's `dispatch` opens a task conversation; this coordinator takes its turns. Each turn
is a pure function of the transcript (the lead's brief, the team_* step results, the
members' replies), so the task's progress is exactly what the store holds and a restart
carries on from it. The members are ordinary agents reached by Send: a fresh worker in the
task's worktree, then the reviewers the task's review level asks for, each given the
spec and the diff, never the worker's transcript. Changes requested go back to the worker
in its own conversation, up to the workgroup's review rounds; then the lead is told. Where
the project names check commands (`setup.test`, `setup.lint`), the engine runs them on each
commit the worker's reply made before anyone reviews it: a failure goes back to the worker
as a review round (the reviewers are not asked to read failing work), a pass or a check
that could not run is a fact in the reviewers' brief. An approved branch is merged by the
engine; after the last merge of a job the checks run on the job branch (a failure becomes a
task, within the phase rounds), then the phase reviewer, whose requested changes become new
tasks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from orchestrator.agents.ports import Agents, AgentSpec
from orchestrator.agents.tools import SEND
from orchestrator.core.messages import AssistantTurn, Message, ToolCall
from orchestrator.core.model import ModelRequest
from orchestrator.setup.checks import Checked
from orchestrator.teams import briefs
from orchestrator.teams.board import RESULT_MAX
from orchestrator.teams.briefs import APPROVE, REQUEST_REVIEW
from orchestrator.teams.conflict_gate import report
from orchestrator.teams.protocol import (
    CHECK,
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

BLOCKED = "blocked"


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


def _without_blocked(text: str) -> str:
    """A worker's `blocked: <reason>` as its reason (the report says "blocked" already)."""
    stripped = text.strip()
    if not stripped.lower().startswith(BLOCKED):
        return text
    return stripped[len(BLOCKED) :].lstrip(" :\t") or text


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
        brief = briefs.worker_brief(info, request)
        shared = briefs.task_brief(info)
        return AssistantTurn(
            tool_calls=(call(SEND, member=info.worker, message=brief, shared=shared),)
        )
    if name == REVIEW:
        return _to_reviewers(info, turns, call)
    if name == CHECK:
        return _after_checks(info, turns, last[0], call)
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
    if info.checks:
        return AssistantTurn(tool_calls=(call(CHECK, scope="task"),))
    return _review_sends(info, turns, review, None, call)


def _review_sends(
    info: Prepared,
    turns: list[list[Step]],
    review: Reviewed,
    checked: Checked | StepFailed | None,
    call: Call,
) -> AssistantTurn:
    rounds = _review_rounds(turns)
    reviewers = _reviewers(info, turns)
    if not reviewers:
        return AssistantTurn(tool_calls=(call(MERGE, result=_worker_reply(info, turns)),))
    sends = [
        call(
            SEND,
            member=r,
            message=briefs.review_brief(info, review, rounds, checked, r),
            **(_context(turns, r) or {"shared": briefs.task_brief(info)}),
        )
        for r in reviewers
    ]
    return AssistantTurn(tool_calls=tuple(sends))


def _after_checks(info: Prepared, turns: list[list[Step]], step: Step, call: Call) -> AssistantTurn:
    checked = _result(Checked, step)
    if step.call.args.get("scope") == "job":
        return _after_job_check(info, turns, checked, call)
    return _after_check(info, turns, checked, call)


def _after_check(
    info: Prepared, turns: list[list[Step]], checked: Checked | StepFailed, call: Call
) -> AssistantTurn:
    """The engine's checks on the worker's commit: failing, back to the worker as a review
    round (escalated once the rounds are spent); else on to review (or the merge)."""
    review = _last(Reviewed, turns, REVIEW)
    if isinstance(checked, Checked) and checked.status == "failed":
        rounds = _review_rounds(turns)
        if rounds >= info.rounds:
            reason = f"the project's checks still fail after {rounds} round(s).\n"
            return AssistantTurn(
                tool_calls=(call(FINISH, outcome="escalated", reason=reason + checked.report()),)
            )
        feedback = (
            f"Review round {rounds} of {info.rounds}: the project's checks fail on your "
            f"commit, so nobody reviews it yet.\n\n{checked.report()}\n\nMake them pass in "
            "your worktree (fix the code, not the checks) and reply as before; the engine "
            "commits your changes and runs the checks again when you reply."
        )
        worker = info.worker
        return AssistantTurn(
            tool_calls=(call(SEND, member=worker, message=feedback, **_context(turns, worker)),)
        )
    return _review_sends(info, turns, review, checked, call)


def _after_job_check(
    info: Prepared, turns: list[list[Step]], checked: Checked | StepFailed, call: Call
) -> AssistantTurn:
    """The engine's checks on the job branch after the last merge: failing, a task to fix
    them (within the phase rounds); else the phase review with the result, or the end."""
    merged = _last(Merged, turns, MERGE)
    failed = isinstance(checked, Checked) and checked.status == "failed"
    if isinstance(checked, Checked) and failed and merged.phase_reviews < info.rounds:
        return AssistantTurn(
            tool_calls=(call(PHASE, verdict=checked.report(), approved=False, checks=True),)
        )
    phase = info.phase_reviewer
    if phase and not merged.solo and merged.phase_reviews < info.rounds:
        brief = briefs.phase_brief(info, merged, checked)
        return AssistantTurn(tool_calls=(call(SEND, member=phase, message=brief),))
    return AssistantTurn(tool_calls=(call(FINISH, outcome="merged"),))


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
    if merged.last and info.checks:
        return AssistantTurn(tool_calls=(call(CHECK, scope="job"),))
    phase = info.phase_reviewer
    if merged.last and phase and not merged.solo and merged.phase_reviews < info.rounds:
        return AssistantTurn(
            tool_calls=(call(SEND, member=phase, message=briefs.phase_brief(info, merged, None)),)
        )
    return AssistantTurn(tool_calls=(call(FINISH, outcome="merged"),))


def _after_replies(
    info: Prepared, turns: list[list[Step]], last: list[Step], call: Any
) -> AssistantTurn:
    member = last[0].call.args.get("member")
    replies = [(step.call.args.get("member", ""), _reply_text(step)) for step in last]
    if member == info.phase_reviewer and len(turns) > 2 and _after_last_merge(turns[-2][0]):
        verdict = replies[0][1]
        approved = _first_line(verdict).startswith(APPROVE)
        return AssistantTurn(tool_calls=(call(PHASE, verdict=verdict, approved=approved),))
    if member == info.worker:
        text = replies[0][1]
        if last[0].results[0].get("is_error") or _first_line(text).startswith(BLOCKED):
            reason = _without_blocked(text)
            return AssistantTurn(tool_calls=(call(FINISH, outcome="blocked", reason=reason),))
        if _reviewers(info, turns) or info.checks:  # the commit, then its checks or review
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


def _last_check(turns: list[list[Step]], scope: str) -> Checked | StepFailed | None:
    found = [
        t[0] for t in turns if t[0].call.name == CHECK and t[0].call.args.get("scope") == scope
    ]
    return _result(Checked, found[-1]) if found else None


def _checks_of(turns: list[list[Step]], scope: str) -> str:
    """The last checks of `scope` as the lead reads them: one line per command."""
    checked = _last_check(turns, scope)
    if checked is None:
        return ""
    if isinstance(checked, StepFailed):
        return f"\nThe project's checks could not run: {checked.error}"
    return "\n" + checked.summary()


def _job_checks_said(turns: list[list[Step]], created: tuple[int, ...]) -> str:
    """What the lead hears of the checks on the job branch (when they made no task)."""
    checked = _last_check(turns, "job")
    if checked is None or created:
        return ""
    if isinstance(checked, StepFailed):
        return f"\nThe project's checks could not run on the job branch: {checked.error}"
    if checked.status == "failed":
        return (
            "\nThe project's checks FAIL on the job branch and no round is left to fix them: "
            "create a task for it, or finish saying so (the pull request will show it).\n"
            + checked.summary()
        )
    return "\n" + checked.summary()


def _after_last_merge(step: Step) -> bool:
    """Whether `step` is what comes right before the phase review: the last merge, or the
    checks of the job branch after it."""
    return step.call.name == MERGE or (
        step.call.name == CHECK and step.call.args.get("scope") == "job"
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
        text += _checks_of(turns, "task")
        phase = [t for t in turns if t[0].call.name == PHASE]
        found = _result(PhaseTasks, phase[-1][0]) if phase else PhaseTasks()
        created = () if isinstance(found, StepFailed) else found.created
        checks_failed = bool(phase) and bool(phase[-1][0].call.args.get("checks"))
        if created and checks_failed:
            text += (
                f"\nThis was the last task; the project's checks fail on the job branch, so "
                f"task #{created[0]} on the board makes them pass: dispatch it."
            )
        elif created:
            listed = ", ".join(f"#{c}" for c in created)
            text += (
                f"\nThis was the last task; the phase reviewer asked for changes, now tasks "
                f"{listed} on the board: dispatch them."
            )
        elif phase:
            text += "\nThis was the last task; the phase review approved the whole job."
        elif merge.last and merge.solo:
            text += "\nThis was the job's one task: its review was of the whole change, so no "
            text += "phase review read it again."
        elif merge.last:
            text += "\nThis was the last task; no phase review ran (none configured, or its "
            text += "rounds are spent)."
        return text + _job_checks_said(turns, created)
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
