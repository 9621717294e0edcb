"""Dispatching a task to a mini-team, and the bound on mini-teams running at once, as transactions.

A dispatch opens a `task` conversation whose agent is the workgroup's mini-team
(`{project}/{workgroup}/mini-team`, run by the engine's coordinator). Like a Send, it
parks the lead until the mini-team replies. A job runs at most `jobs.max_parallel`
mini-teams at once: one that has not started waits until another ends.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.agents.tools import string_arg
from orchestrator.bus import jobs as job_rows
from orchestrator.bus.dispatch import close
from orchestrator.bus.extensions import Extensions, TurnTool
from orchestrator.bus.routing import Team
from orchestrator.bus.transactions import (
    ConversationRow,
    Opened,
    Outcome,
    active_children,
    create_conversation,
    deliver,
    last_seq,
    not_started,
    started,
    working_on,
)
from orchestrator.config import Workgroup
from orchestrator.core.errors import ToolError
from orchestrator.core.messages import (
    ConversationKind,
    InboxKind,
    ToolCall,
    ToolResult,
    task_conversation_id,
)
from orchestrator.core.tools import object_spec
from orchestrator.store.sqlite import Tx
from orchestrator.teams.board import find, log_event, set_allowance, unfinished_blockers

MINI_TEAM = "mini-team"
DISPATCH = "dispatch"
DISPATCHABLE = ("pending", "blocked")


@dataclass(frozen=True)
class DispatchIntent:
    """A dispatch call: start a fresh mini-team on task `task` with the lead's spawn brief."""

    call_id: str
    task: int
    brief: str
    allowance_usd: float | None = None  # the lead's, else an even share (jobs/budget.py)


DISPATCH_SPEC = object_spec(
    DISPATCH,
    "Start a fresh mini-team on a task of the board: a worker in the task's own git worktree "
    "and the reviewers its review level asks for. The task must be pending (or blocked, to try "
    "again) with every task it waits for done. The engine gives the worker the task's spec; "
    "your brief adds what the spec does not say: relevant files, facts found, guidance after "
    "an escalation. You get one reply when the task ends: merged (with its result), blocked, "
    "escalated after its review rounds, or a merge conflict with the files and hunks. "
    "Dispatch independent tasks in the same turn so they run at once.",
    ["task", "brief"],
    task={"type": "integer", "description": "the task's number on the board"},
    brief={"type": "string", "description": "operational context for the mini-team"},
    allowance_usd={
        "type": "number",
        "description": "dollars the mini-team may spend (default: an even share of what is "
        "left of the job's budget among its unfinished tasks); past it, it stops and you "
        "decide",
    },
)


def register(extensions: Extensions) -> None:
    """Dispatch as a turn tool; a mini-team starts within its job's bound, and its members
    exit with it."""
    extensions.tool(TurnTool(DISPATCH_SPEC, dispatch_intent, dispatch_task))
    extensions.admit(may_start)
    extensions.on_end(ConversationKind.TASK, end_team)


def mini_teams(project: str, workgroup: Workgroup, members: tuple[str, ...]) -> list[Team]:
    """The workgroup's mini-team coordinator (the engine) reaches its members, who answer
    it only by their replies (the routes the bus adds for each workgroup)."""
    return [Team(f"{project}/{workgroup.name}/{MINI_TEAM}", members, answerable=False)]


def dispatch_intent(call: ToolCall) -> DispatchIntent:
    """A dispatch call as it intends; ToolError (read by the lead) when it cannot be."""
    task = call.args.get("task")
    if not isinstance(task, int) or isinstance(task, bool):
        raise ToolError(f"dispatch: task must be a task number (an integer), not {task!r}")
    allowance = call.args.get("allowance_usd")
    if allowance is not None and (
        not isinstance(allowance, int | float) or isinstance(allowance, bool) or allowance <= 0
    ):
        raise ToolError(f"dispatch: allowance_usd must be a positive number, not {allowance!r}")
    return DispatchIntent(
        call.call_id,
        task,
        string_arg(call, "brief"),
        None if allowance is None else float(allowance),
    )


def dispatch_task(
    tx: Tx, row: ConversationRow, intent: DispatchIntent, outcome: Outcome
) -> ToolResult | None:
    """Open the task's mini-team conversation, or return why not (an error the lead reads)."""
    refusal = _refusal(tx, row, intent)
    if isinstance(refusal, str):
        return ToolResult(intent.call_id, f"dispatch: {refusal}", is_error=True)
    task_id, workgroup, project = refusal
    conversation_id = task_conversation_id(row.job_id or 0, intent.task)
    agent = f"{project}/{workgroup}/{MINI_TEAM}"
    create_conversation(
        tx,
        conversation_id=conversation_id,
        kind=ConversationKind.TASK,
        agent=agent,
        initiator=row.agent,
        parent_id=row.conversation_id,
        job_id=row.job_id,
        request_call_id=intent.call_id,
        task_id=task_id,
    )
    deliver(
        tx,
        conversation_id,
        kind=InboxKind.REQUEST,
        sender=row.agent,
        content={"text": intent.brief, "task": intent.task},
        call_id=intent.call_id,
        source_conversation=row.conversation_id,
    )
    assert row.job_id is not None
    set_allowance(tx, task_id, intent.allowance_usd)
    log_event(tx, row.job_id, intent.task, "dispatched", row.agent)
    outcome.opened.append(Opened(conversation_id, agent, queued=False))
    outcome.woken.append(conversation_id)
    return None


def _refusal(tx: Tx, row: ConversationRow, intent: DispatchIntent) -> str | tuple[int, str, str]:
    if row.job_id is None:
        return "this conversation belongs to no job, so it has no tasks to dispatch"
    found = find(tx, row.job_id, intent.task)
    if found is None:
        return f"there is no task #{intent.task}; create it with task_create first"
    task_id, task = found
    state, workgroup, project = task.state, task.workgroup, job_rows.project_of(tx, row.job_id)
    if state not in DISPATCHABLE:
        return f"task #{intent.task} is {state}; only a pending or blocked task can be dispatched"
    if waits := unfinished_blockers(tx, task_id):
        return f"task #{intent.task} waits for {waits}; dispatch it once they are done"
    if working_on(tx, task_id, ConversationKind.TASK):
        return f"a mini-team is already working on task #{intent.task}"
    if workgroup is None:
        return f"task #{intent.task} names no workgroup"
    parts = row.agent.split("/")
    if len(parts) == 3 and parts[1] != workgroup:
        return (
            f"task #{intent.task} belongs to workgroup {workgroup!r}; you lead {parts[1]!r}. "
            "Ask your lead to dispatch it."
        )
    return int(task_id), str(workgroup), str(project)


def may_start(tx: Tx, row: ConversationRow) -> bool:
    """Whether a mini-team that has not started yet may start now, within its job's bound."""
    if row.kind != ConversationKind.TASK or row.job_id is None:
        return True
    if last_seq(tx, row.conversation_id) != 0:
        return True
    running = started(tx, row.job_id, ConversationKind.TASK)
    job = job_rows.get(tx, row.job_id)
    return job is not None and running < job.max_parallel


def waiting_teams(tx: Tx, job_id: int | None) -> list[str]:
    """Mini-teams of a job that were dispatched but have not started, oldest first."""
    return not_started(tx, job_id, ConversationKind.TASK)


def end_team(tx: Tx, row: ConversationRow, outcome: Outcome) -> None:
    """A mini-team's members exit with it, and a waiting mini-team of the job may start."""
    for member in active_children(tx, row.conversation_id):
        close(tx, member)
    close(tx, row.conversation_id)
    outcome.closed = True
    outcome.woken += waiting_teams(tx, row.job_id)
