"""Calls an engine gate held (a plan's dispatches, a restatement's send): released as the
decider approved them, or each answered with an error the asking agent reads.

Each released call that opened a conversation awaits one reply (pending_count); one that
was refused, or not approved, gets its error result through the inbox, like any answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Protocol, TypeVar

from orchestrator.bus import gates
from orchestrator.bus.transactions import (
    ConversationRow,
    Outcome,
    await_replies,
    conversation,
    deliver,
)
from orchestrator.core.messages import InboxKind, ToolResult
from orchestrator.store.sqlite import Tx

Start = tuple[str, Callable[[Outcome], ToolResult | None]]  # (call id, start it: refusal?)


class _Held(Protocol):
    @property
    def call_id(self) -> str: ...


H = TypeVar("H", bound=_Held)


def settle(
    tx: Tx,
    gate: gates.Gate,
    held: Sequence[H],
    start: Callable[[Tx, ConversationRow, H, Outcome], ToolResult | None],
    refused: str,
) -> tuple[str, ...]:
    """Act on the answer of the gate that `held` the calls of its conversation: approved,
    each is started (`start`); otherwise each is answered with the error `refused`, whose
    `{said}` is what the decider said. Who now has work."""
    row = conversation(tx, gate.conversation_id)
    if gate.approved:
        return release(tx, row, [(h.call_id, partial(start, tx, row, h)) for h in held])
    said = f"{gate.answered_by} answered {gate.answer!r}"
    refuse(tx, row, [h.call_id for h in held], refused.format(said=said))
    return (row.conversation_id,)


def release(tx: Tx, row: ConversationRow, calls: Iterable[Start]) -> tuple[str, ...]:
    """Carry out the held calls of `row`'s conversation; who now has work."""
    outcome = Outcome()
    opened = 0
    for call_id, start in calls:
        refusal = start(outcome)
        if refusal is None:
            opened += 1
        else:
            refuse(tx, row, [call_id], refusal.output)
    if opened:
        await_replies(tx, row.conversation_id, opened)
    return (*outcome.woken, row.conversation_id)


def refuse(tx: Tx, row: ConversationRow, call_ids: Iterable[str], text: str) -> None:
    """Answer each held call with the error `text`."""
    for call_id in call_ids:
        deliver(
            tx,
            row.conversation_id,
            kind=InboxKind.HUMAN,
            sender=gates.ENGINE,
            content={"text": text, "is_error": True},
            call_id=call_id,
        )
