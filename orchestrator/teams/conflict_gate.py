"""The merge-conflict gate: a task whose approved branch conflicts with the job branch is
put to the job's decider before its lead hears of it.

While the job's `merge-conflict` mode is not `never`, a mini-team that ends in a conflict
does not reply to the lead's dispatch: in the same transaction as its final turn the reply
is held and the gate opens, parking the lead (which was already parked waiting for that
reply: the dispatch stops counting in its pending_count and the gate counts in its
awaiting_input, so it runs again once, after the answer and its other replies). The gate
shows the task, the conflicting files and hunks, and pins the job branch's head, the task
branch's head and the files. The answer becomes the dispatch's one result: the conflict
report, then the decision in words the lead acts on. Approve: the lead makes a resolution
task. Reject: the task is cancelled. Anything else: the decider's direction.

When another task merges while the gate is open, the job branch has moved and the conflict
may have changed: the engine `restate`s the gate with the conflict as it now stands and a
new hash, so an approval written before then is stale (the edge says so and asks again).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from typing import Any, TypeVar

from orchestrator.bus import gates
from orchestrator.bus.extensions import Extensions
from orchestrator.bus.gates import AskIntent, Gate, JobContent
from orchestrator.bus.transactions import ConversationRow, deliver, transcript
from orchestrator.core.gate_kinds import GateKind
from orchestrator.core.messages import ConversationKind, InboxKind, Message
from orchestrator.store.sqlite import Tx
from orchestrator.teams.board import get_task, list_tasks, log_event, update_task
from orchestrator.teams.protocol import FINISH, MERGE, PREPARE, Merged, Prepared, StepFailed, decode

KIND = GateKind(
    "merge-conflict",
    "always",
    title="a task's work conflicts with the job's",
    about="a task's approved work conflicts with the job's",
)
OPTIONS = ("yes", "no")
HUNKS_SHOWN = 1_500  # characters of the hunks the gate shows (the lead reads them all)
_NO = ("no", "reject", "rejected", "drop", "stop")
T = TypeVar("T")


@dataclass(frozen=True)
class Conflict:
    """A task's branch that does not merge into the job branch: what the gate shows and pins."""

    task: int
    title: str
    branch: str
    job_branch: str
    files: tuple[str, ...]
    hunks: str
    job_head: str
    task_head: str


def register(extensions: Extensions) -> None:
    """The merge-conflict gate: its kind, its answer carried out, and the hold on a
    mini-team's reply."""
    extensions.gate_kind(KIND, settle=settle)
    extensions.hold_reply(partial(hold, extensions))


def report(*, task: int, job_branch: str, branch: str, files: Sequence[str], hunks: str) -> str:
    """The conflict as the lead reads it, before what to do about it."""
    return (
        f"Task #{task} was approved but conflicts with the job branch {job_branch} "
        f"in: {', '.join(files)}. It is marked blocked; its branch {branch} is kept. "
        f"The conflicting hunks:\n{hunks}\n"
    )


def question(conflict: Conflict) -> str:
    """The gate's question: the task, its branch and the job's (at their heads), the files,
    the hunks (trimmed), and what each answer does."""
    hunks = conflict.hunks.strip()
    if len(hunks) > HUNKS_SHOWN:
        hunks = hunks[:HUNKS_SHOWN].rstrip() + "\n… (trimmed)"
    files = ", ".join(conflict.files) or "no file now (it would merge cleanly)"
    return (
        f"Task #{conflict.task} ({conflict.title}) was approved, but its branch "
        f"{conflict.branch} ({conflict.task_head[:7]}) conflicts with the job branch "
        f"{conflict.job_branch} ({conflict.job_head[:7]}) in: {files}.\n\n{hunks}\n\n"
        f"Approve to have it resolved (the lead makes a task that merges both sides), reject "
        f"to drop task #{conflict.task} (cancelled; its branch is kept), or tell the lead what "
        "to do instead."
    )


def hold(extensions: Extensions, tx: Tx, row: ConversationRow) -> int | None:
    """Open the gate for a mini-team ending in a conflict, holding its reply to the lead's
    dispatch; the gate's id, or None when the reply goes to the lead now (it pins what
    `extensions` say of the job)."""
    if row.kind != ConversationKind.TASK or row.job_id is None or row.parent_id is None:
        return None
    call_id = row.serving_call_id or row.request_call_id
    if call_id is None or gates.mode(tx, row.job_id, KIND) == "never":
        return None
    conflict = _conflict(transcript(tx, row.conversation_id))
    if conflict is None:
        return None
    held = {"call_id": call_id, "team": row.conversation_id, "agent": row.agent}
    intent = AskIntent(f"{KIND.name}:{call_id}", question(conflict), OPTIONS, kind=KIND.name)
    return gates.ask_engine(
        tx,
        job_id=row.job_id,
        conversation_id=row.parent_id,
        intent=intent,
        content=extensions.content,
        payload={**asdict(conflict), **held},
        pinned=_pinned(conflict),
    )


def settle(tx: Tx, gate: Gate) -> tuple[str, ...]:
    """Act on the answer: the held reply goes to the lead as its dispatch's result, with
    the decision (a rejected task is cancelled first). Who now has work: the lead, woken by
    the answer itself."""
    conflict = _of(gate.payload)
    if gate.approved:
        decision = (
            f"They want it resolved: create a resolution task (task_create with "
            f"resolves={conflict.task}) and dispatch it."
        )
    elif rejects(gate.answer or ""):
        decision = _drop(tx, gate, conflict.task)
    else:
        decision = (
            "That is their direction: act on it, by a resolution task (task_create with "
            f"resolves={conflict.task}, then dispatch it), a re-plan, or dropping the task "
            "(task_update with state cancelled)."
        )
    text = report(
        task=conflict.task,
        job_branch=conflict.job_branch,
        branch=conflict.branch,
        files=conflict.files,
        hunks=conflict.hunks,
    )
    deliver(
        tx,
        gate.conversation_id,
        kind=InboxKind.REPLY,
        sender=str(gate.payload["agent"]),
        content={"text": f'{text}\n{_who(gate)} answered "{gate.answer}". {decision}'},
        call_id=str(gate.payload["call_id"]),
        source_conversation=str(gate.payload["team"]),
    )
    return ()


def rejects(text: str) -> bool:
    """Whether an answer rejects: it starts with no, reject(ed), drop or stop."""
    said = " ".join(text.casefold().split()).lstrip(" *_`'\"/")
    return any(said == w or (said.startswith(w) and not said[len(w)].isalnum()) for w in _NO)


def open_conflicts(tx: Tx, job_id: int) -> list[Gate]:
    """The job's open merge-conflict gates."""
    return [g for g in gates.open_gates(tx, job_id) if g.kind == KIND.name and g.engine_made]


def restate(
    tx: Tx,
    gate_id: int,
    *,
    job_head: str,
    files: Sequence[str],
    hunks: str,
    content: JobContent,
) -> bool:
    """The job branch moved to `job_head` while the gate was open: show and pin the conflict
    as it now stands, with the job's `content` (a new hash, so an earlier approval is
    stale). Whether it changed."""
    gate = gates.get(tx, gate_id)
    if gate.answer is not None or gate.closed_at is not None:
        return False
    before = _of(gate.payload)
    now = replace(before, job_head=job_head, files=tuple(files), hunks=hunks)
    if now == before:
        return False
    gates.rehash(
        tx,
        gate_id,
        question=question(now),
        payload={**gate.payload, **asdict(now)},
        pinned=_pinned(now),
        content=content,
    )
    return True


def _pinned(conflict: Conflict) -> dict[str, Any]:
    return {
        "job_head": conflict.job_head,
        "task_head": conflict.task_head,
        "files": list(conflict.files),
    }


def _of(payload: Mapping[str, Any]) -> Conflict:
    return Conflict(
        task=int(payload["task"]),
        title=str(payload["title"]),
        branch=str(payload["branch"]),
        job_branch=str(payload["job_branch"]),
        files=tuple(str(f) for f in payload["files"]),
        hunks=str(payload["hunks"]),
        job_head=str(payload["job_head"]),
        task_head=str(payload["task_head"]),
    )


def _who(gate: Gate) -> str:
    if gate.answered_via == "proxy":
        return f"The proxy for the decider ({gate.answered_by})"
    return f"The decider ({gate.answered_by})"


def _drop(tx: Tx, gate: Gate, number: int) -> str:
    """Cancel the rejected task; what the lead is told."""
    assert gate.job_id is not None  # an engine gate belongs to a job
    if get_task(tx, gate.job_id, number).state not in ("done", "cancelled"):
        update_task(tx, gate.job_id, number, state="cancelled")
        log_event(tx, gate.job_id, number, "cancelled", f"{KIND.name} gate {gate.gate_id}")
    waiting = [
        f"#{t.number}"
        for t in list_tasks(tx, gate.job_id)
        if number in t.blocked_by and t.state not in ("done", "cancelled")
    ]
    text = (
        f"Task #{number} is dropped: it is cancelled, not to be dispatched again (its branch "
        "is kept)."
    )
    if waiting:
        text += (
            f" {', '.join(waiting)} wait for it and cannot start: re-plan them (cancel them, "
            "or create tasks that do not wait for it)."
        )
    return text


def _conflict(messages: Sequence[Message]) -> Conflict | None:
    """The conflict a mini-team's transcript ends in (its last step `team_finish` with
    outcome `conflict`), from its prepare and merge results; None if it ended otherwise."""
    steps = [m for m in messages if m.role == "assistant" and m.tool_calls]
    if not steps:
        return None
    last = steps[-1].tool_calls[0]
    if last.name != FINISH or last.args.get("outcome") != "conflict":
        return None
    names = {call.call_id: call.name for step in steps for call in step.tool_calls}
    results = [(names.get(m.call_id or ""), m) for m in messages if m.role == "tool"]
    prepared = _result(Prepared, PREPARE, results[:1])
    merged = _result(Merged, MERGE, results[::-1])
    if prepared is None or merged is None or merged.conflicts is None:
        return None
    return Conflict(
        task=prepared.task,
        title=prepared.title,
        branch=prepared.branch,
        job_branch=prepared.job_branch,
        files=merged.conflicts,
        hunks=merged.hunks or "",
        job_head=merged.job_head or "",
        task_head=merged.task_head or "",
    )


def _result(kind: type[T], name: str, results: Sequence[tuple[str | None, Message]]) -> T | None:
    """The first of `results` from step `name`, read as `kind`, if it reads."""
    for step, message in results:
        if step == name:
            found = decode(kind, message.text, is_error=bool(message.content.get("is_error")))
            return None if isinstance(found, StepFailed) else found
    return None
