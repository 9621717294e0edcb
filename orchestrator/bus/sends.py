"""Send: a brief that opens a conversation with a teammate, or continues one, as rows.

Called from a turn's transaction (dispatch.record_turn), or later when a gate that held the
send is approved (intent_gate.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator.bus.transactions import (
    ConversationRow,
    Opened,
    Outcome,
    continuation,
    create_conversation,
    deliver,
    reopen_context,
)
from orchestrator.core.messages import ConversationKind, InboxKind, ToolResult, dispatch_id
from orchestrator.store.sqlite import Tx


@dataclass(frozen=True)
class SendIntent:
    """A routed Send: open a new conversation with `recipient`, or continue `context_id`."""

    call_id: str
    recipient: str
    brief: str
    context_id: str | None = None
    # What every member of a mini-team is sent first (the task): one cached prefix for all.
    shared: str | None = None


def send(tx: Tx, row: ConversationRow, intent: SendIntent, outcome: Outcome) -> ToolResult | None:
    """Carry out one Send of `row`'s turn: open a conversation with its recipient, or queue
    the brief into the one it continues; an error result when it cannot be continued."""
    brief = {"text": intent.brief}
    if intent.context_id is None:
        if intent.shared:
            brief = {"shared": intent.shared, **brief}
        child = dispatch_id(row.agent, intent.recipient)
        create_conversation(
            tx,
            conversation_id=child,
            kind=ConversationKind.DISPATCH,
            agent=intent.recipient,
            initiator=row.agent,
            parent_id=row.conversation_id,
            job_id=row.job_id,
            request_call_id=intent.call_id,
        )
        deliver(
            tx,
            child,
            kind=InboxKind.REQUEST,
            sender=row.agent,
            content=brief,
            call_id=intent.call_id,
            source_conversation=row.conversation_id,
        )
        outcome.opened.append(Opened(child, intent.recipient, queued=False))
        outcome.woken.append(child)
        return None
    target = continuation(tx, intent.context_id)
    problem = _continuation_problem(row, intent, target)
    if problem:
        return ToolResult(intent.call_id, problem, is_error=True)
    assert target is not None  # no conversation is a problem
    state, _, _, in_turn, _, pending_count, has_inbox = target
    reopen_context(tx, intent.context_id, intent.call_id)
    deliver(
        tx,
        intent.context_id,
        kind=InboxKind.REQUEST,
        sender=row.agent,
        content=brief,
        call_id=intent.call_id,
        source_conversation=row.conversation_id,
    )
    busy = bool(in_turn or pending_count or has_inbox)
    outcome.opened.append(Opened(intent.context_id, intent.recipient, queued=busy))
    outcome.woken.append(intent.context_id)
    return None


def _continuation_problem(row: ConversationRow, intent: SendIntent, target: Any) -> str | None:
    if target is None:
        return f"no conversation {intent.context_id!r}; omit context_id to open a new one"
    state, initiator, parent_id, _, status, _, _ = target
    if initiator != row.agent or parent_id != row.conversation_id:
        return (
            f"conversation {intent.context_id!r} was not opened by you here; you cannot continue it"
        )
    if state != "active":
        return f"conversation {intent.context_id!r} is closed; omit context_id to open a new one"
    if status == "open":
        return f"conversation {intent.context_id!r} has not answered your last Send yet"
    return None
