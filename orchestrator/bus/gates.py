"""Gates: questions an agent puts to a person (ask_human), as rows, and their answers.

Asking parks the conversation (awaiting_input counts its open gates); an answer is
recorded on the gate and delivered as the ask_human call's result, which wakes it.
Who may answer is the edge's decision (the decider of the project or workgroup); the
engine records who did, and whether a human or the proxy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from orchestrator.bus.messages import InboxKind
from orchestrator.bus.transactions import ConversationRow, deliver
from orchestrator.errors import BusError, GateClosedError
from orchestrator.store.sqlite import Tx, now

GateKindName = Literal["plan", "question", "escalation", "pull_request"]
AnsweredVia = Literal["human", "proxy"]


@dataclass(frozen=True)
class AskIntent:
    """An ask_human call: the question, the options offered, and what kind of gate it is."""

    call_id: str
    question: str
    options: tuple[str, ...] = ()
    kind: GateKindName = "question"


@dataclass(frozen=True)
class Gate:
    """A gate as stored."""

    gate_id: int
    job_id: int | None
    conversation_id: str
    call_id: str
    kind: str
    question: str
    options: tuple[str, ...]
    asked_by: str
    answer: str | None
    answered_by: str | None
    answered_via: str | None
    comment_ref: str | None = None  # where the forge asked it (a comment's id)
    answer_ref: str | None = None  # where the answer came from (a comment's id), if anywhere
    asked_at: float = 0.0


def ask(tx: Tx, row: ConversationRow, intent: AskIntent) -> int:
    """Record a gate and park its conversation until it is answered; returns the gate id."""
    (gate_id,) = tx.execute(
        "INSERT INTO gates (job_id, conversation_id, call_id, kind, question, options, asked_by,"
        " asked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING gate_id",
        (
            row.job_id,
            row.conversation_id,
            intent.call_id,
            intent.kind,
            intent.question,
            json.dumps(list(intent.options)),
            row.agent,
            now(),
        ),
    ).fetchone()
    tx.execute(
        "UPDATE conversations SET awaiting_input = awaiting_input + 1 WHERE conversation_id = ?",
        (row.conversation_id,),
    )
    return int(gate_id)


def answer(
    tx: Tx,
    gate_id: int,
    *,
    text: str,
    answered_by: str,
    via: AnsweredVia,
    ref: str | None = None,
) -> Gate:
    """Record the answer to an open gate and deliver it to the asking conversation.

    `ref` names where the answer came from (a comment's id): a source answers one gate,
    once, however often it is seen.
    """
    gate = get(tx, gate_id)
    if gate.answer is not None:
        raise GateClosedError(f"gate {gate_id} was already answered by {gate.answered_by!r}")
    if ref is not None and (used := answered_from(tx, ref)) is not None:
        raise GateClosedError(f"{ref} already answered gate {used}")
    tx.execute(
        "UPDATE gates SET answer = ?, answered_by = ?, answered_via = ?, answered_at = ?,"
        " answer_ref = ? WHERE gate_id = ?",
        (text, answered_by, via, now(), ref, gate_id),
    )
    tx.execute(
        "UPDATE conversations SET awaiting_input = max(awaiting_input - 1, 0)"
        " WHERE conversation_id = ?",
        (gate.conversation_id,),
    )
    label = "the proxy for the decider" if via == "proxy" else answered_by
    deliver(
        tx,
        gate.conversation_id,
        kind=InboxKind.HUMAN,
        sender=answered_by,
        content={"text": f"{label} answered: {text}"},
        call_id=gate.call_id,
    )
    return get(tx, gate_id)


def posted(tx: Tx, gate_id: int, *, comment_ref: str, decider: str) -> None:
    """Record where the gate was asked (the comment's id) and who may answer it."""
    tx.execute(
        "UPDATE gates SET comment_ref = ?, decider = ? WHERE gate_id = ?",
        (comment_ref, decider, gate_id),
    )


def answered_from(tx: Tx, ref: str) -> int | None:
    """The gate the source `ref` (a comment's id) answered, if it answered one."""
    row = tx.execute("SELECT gate_id FROM gates WHERE answer_ref = ?", (ref,)).fetchone()
    return None if row is None else int(row[0])


def get(tx: Tx, gate_id: int) -> Gate:
    """One gate."""
    row = tx.execute(
        "SELECT gate_id, job_id, conversation_id, call_id, kind, question, options, asked_by,"
        " answer, answered_by, answered_via, comment_ref, answer_ref, asked_at"
        " FROM gates WHERE gate_id = ?",
        (gate_id,),
    ).fetchone()
    if row is None:
        raise BusError(f"no gate {gate_id}")
    gate_id, job_id, conversation_id, call_id, kind, question, options, *answered = row
    asked_by, answer_text, answered_by, answered_via, comment_ref, answer_ref, asked_at = answered
    return Gate(
        gate_id,
        job_id,
        conversation_id,
        call_id,
        kind,
        question,
        tuple(json.loads(options or "[]")),
        asked_by,
        answer_text,
        answered_by,
        answered_via,
        comment_ref,
        answer_ref,
        float(asked_at),
    )


def open_gates(tx: Tx, job_id: int | None = None) -> list[Gate]:
    """Unanswered gates, oldest first (of one job, or all)."""
    ids = tx.execute(
        "SELECT gate_id FROM gates WHERE answer IS NULL AND (? IS NULL OR job_id = ?)"
        " ORDER BY gate_id",
        (job_id, job_id),
    ).fetchall()
    return [get(tx, gate_id) for (gate_id,) in ids]
