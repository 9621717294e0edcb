"""The plan gate: a job's board put to its decider before any task runs.

A lead's first dispatch of a job (while the job's `plan` mode is not `never`) does not start
a mini-team: the engine asks the decider about the whole board as it stands, holding the
dispatches, and the lead parks. What is approved is pinned: the gate's hash covers the plan's
text, the base commit and the issue's title and text, and approving dispatches exactly the
held calls. Any other answer comes back to the lead as each dispatch's error, with the
decider's words, so it revises the board and dispatches again (a new plan gate). Once a plan
of the job is approved, later dispatches run at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from functools import partial

from orchestrator.bus import gates, held
from orchestrator.bus.extensions import Extensions
from orchestrator.bus.gates import AskIntent, Gate
from orchestrator.bus.transactions import ConversationRow
from orchestrator.core.gate_kinds import GateKind
from orchestrator.store.sqlite import Tx
from orchestrator.teams.board import Task, list_tasks
from orchestrator.teams.transactions import DISPATCH, DispatchIntent, dispatch_task

KIND = GateKind(
    "plan",
    "when_unsure",
    title="the plan, before any task runs",
    about="a plan of tasks, to approve before any task runs",
)
OPTIONS = ("yes", "no")
SPEC_SHOWN = 1500  # characters of each task's spec the gate shows


def register(extensions: Extensions) -> None:
    """The plan gate: its kind, its answer carried out, and the hold on a lead's dispatches."""
    extensions.gate_kind(KIND, settle=settle)
    extensions.hold(DISPATCH, partial(hold, extensions))


def plan_text(tasks: list[Task]) -> str:
    """The board as the decider reads it, a numbered list (Markdown, and plain at a
    terminal): each task's title, workgroup, review, what it waits for, and its spec."""
    lines = [f"The plan: {len(tasks)} task{'s' if len(tasks) != 1 else ''}.", ""]
    for task in tasks:
        after = f", after {', '.join(map(str, task.blocked_by))}" if task.blocked_by else ""
        lines.append(
            f"{task.number}. {task.title} (workgroup {task.workgroup or 'none'}, "
            f"review: {task.review}{after})"
        )
        spec = task.spec.strip()
        if len(spec) > SPEC_SHOWN:
            spec = spec[:SPEC_SHOWN].rstrip() + " …"
        lines += [f"   {line}" if line.strip() else "" for line in spec.splitlines()]
    return "\n".join(lines)


def approved(tx: Tx, job_id: int) -> bool:
    """Whether a plan of the job was approved."""
    return any(g.approved for g in gates.of_kind(tx, job_id, KIND.name, asked_by=gates.ENGINE))


def hold(
    extensions: Extensions, tx: Tx, row: ConversationRow, dispatches: Sequence[DispatchIntent]
) -> int | None:
    """Open the plan gate holding `dispatches` if the job's plan still needs approval;
    the gate's id, or None when they may run now (it pins what `extensions` say of the
    job)."""
    if row.job_id is None or not dispatches:
        return None
    if gates.mode(tx, row.job_id, KIND) == "never" or approved(tx, row.job_id):
        return None
    question = plan_text([t for t in list_tasks(tx, row.job_id) if t.state != "cancelled"])
    intent = AskIntent(f"plan:{dispatches[0].call_id}", question, OPTIONS, kind=KIND.name)
    return gates.ask_engine(
        tx,
        job_id=row.job_id,
        conversation_id=row.conversation_id,
        intent=intent,
        content=extensions.content,
        payload={"dispatches": [asdict(d) for d in dispatches]},
    )


# The error each held dispatch gets back when the decider does not approve the plan.
REPLAN = (
    "dispatch: the plan was not approved ({said}). Change the board as asked (task_update, "
    "task_create), then dispatch again; the new plan is put to them."
)


def settle(tx: Tx, gate: Gate) -> tuple[str, ...]:
    """Act on the plan gate's answer: approved, the held dispatches run; otherwise each
    comes back to the lead as an error with the decider's words. Who now has work."""
    dispatches = [DispatchIntent(**kept) for kept in gate.payload.get("dispatches", [])]
    return held.settle(tx, gate, dispatches, dispatch_task, REPLAN)
