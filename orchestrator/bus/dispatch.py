"""Send, replies, teammate messages and closing: a turn's effects on the bus, as transactions.

Like everything in transactions.py, each public function here commits as one step. What a
feature adds to a turn or to a conversation's end (its turn tools, holds, reply holds and
end hooks) runs here, inside the step (orchestrator/bus/extensions.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.bus import gates
from orchestrator.bus.extensions import Extensions
from orchestrator.bus.gates import QUESTION, AskIntent
from orchestrator.bus.sends import SendIntent, send
from orchestrator.bus.transactions import (
    ConversationRow,
    Outcome,
    append,
    await_replies,
    close_context,
    conversation,
    deliver,
    end_turn,
    keep_result,
    listed,
    mark_closed,
    neighbours,
    reply_arrived,
)
from orchestrator.core.errors import BusError
from orchestrator.core.messages import (
    AssistantTurn,
    InboxKind,
    Role,
    ToolResult,
    Usage,
    assistant_content,
    tool_content,
)
from orchestrator.store.sqlite import Tx, now

SEND = "send"  # the bus's own tool whose call opens (or resumes) a conversation


@dataclass(frozen=True)
class MessageIntent:
    """A teammate message: `to` is a teammate's name, a conversation id, or '*' for all."""

    call_id: str
    to: str
    kind: InboxKind
    text: str
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class BusCalls:
    """The bus tool calls of one assistant turn, resolved into intents or refusals;
    `effects` are the calls of features' turn tools, (tool, intent), in the order made."""

    sends: list[SendIntent] = field(default_factory=list)
    messages: list[MessageIntent] = field(default_factory=list)
    asks: list[AskIntent] = field(default_factory=list)
    refusals: list[ToolResult] = field(default_factory=list)
    effects: list[tuple[str, Any]] = field(default_factory=list)


NOBODY_ASKED = (
    "ask_human: this project asks nobody questions (its gates.question is never): decide "
    "yourself, and say in your result what you assumed and why."
)


def record_turn(
    tx: Tx,
    conversation_id: str,
    turn: AssistantTurn,
    calls: BusCalls,
    *,
    extensions: Extensions,
) -> Outcome:
    """Persist an assistant turn that called tools, and carry out its bus tools at once.

    Sends open child conversations (or queue into open ones) and raise this context's
    pending_count, as do features' turn tools that open one (a dispatch); a hold may keep
    all of a tool's calls back at a gate instead; ask_human opens gates and parks the turn
    until they are answered; teammate messages land in inboxes; refusals become error
    results the agent reads on its next step. All of it commits together with the turn.
    """
    row = conversation(tx, conversation_id)
    outcome = Outcome()
    results: list[ToolResult] = list(calls.refusals)
    entries: list[tuple[str, Role, dict[str, Any], Usage | None]] = [
        (row.agent, "assistant", assistant_content(turn), turn.usage)
    ]
    opened = _carry_out(tx, row, SEND, calls.sends, outcome, extensions, start=send)
    for tool, intents in _by_tool(calls.effects).items():
        carry_out = extensions.tools[tool].carry_out
        opened += _carry_out(tx, row, tool, intents, outcome, extensions, start=carry_out)
    results += [refusal for refusal in opened if refusal is not None]
    pending = opened.count(None)  # each Send or dispatch that opened awaits one reply
    for message in calls.messages:
        results.append(_message(tx, row, message, outcome))
    asks = list(calls.asks)
    if asks and gates.mode(tx, row.job_id, QUESTION) == "never":
        results += [ToolResult(i.call_id, NOBODY_ASKED, is_error=True) for i in asks]
        asks = []
    outcome.gates += [
        (gates.ask(tx, row, i, content=extensions.content), i.kind, i.question) for i in asks
    ]
    order = {c.call_id: n for n, c in enumerate(turn.tool_calls)}
    results.sort(key=lambda r: order.get(r.call_id, len(order)))
    entries += [(row.agent, "tool", tool_content(r), None) for r in results]
    outcome.appended = append(tx, conversation_id, entries)
    if pending:
        await_replies(tx, conversation_id, pending)
    return outcome


def _carry_out(
    tx: Tx,
    row: ConversationRow,
    tool: str,
    intents: Sequence[Any],
    outcome: Outcome,
    extensions: Extensions,
    *,
    start: Any,
) -> list[ToolResult | None]:
    """Carry out a turn's calls of one tool, unless a hold keeps them back at a gate (then
    nothing now: the gate's answer carries them out or refuses them)."""
    held = extensions.held(tx, row, tool, intents)
    if held is not None:
        gate = gates.get(tx, held)
        outcome.gates.append((held, gate.kind, gate.question))
        return []
    return [start(tx, row, intent, outcome) for intent in intents]


def _by_tool(effects: Sequence[tuple[str, Any]]) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = {}
    for tool, intent in effects:
        grouped.setdefault(tool, []).append(intent)
    return grouped


def _message(tx: Tx, row: ConversationRow, intent: MessageIntent, outcome: Outcome) -> ToolResult:
    targets = _teammates(tx, row, intent.to)
    if isinstance(targets, str):
        return ToolResult(intent.call_id, targets, is_error=True)
    kind = InboxKind.BROADCAST if intent.to == "*" else intent.kind
    for target in targets:
        deliver(
            tx,
            target,
            kind=kind,
            sender=row.agent,
            content={"text": intent.text, **intent.extra},
            source_conversation=row.conversation_id,
        )
        outcome.woken.append(target)
    return ToolResult(intent.call_id, f"{kind.value} delivered to {len(targets)} teammate(s)")


def _teammates(tx: Tx, row: ConversationRow, to: str) -> list[str] | str:
    """Conversation ids `to` names among this agent's lead, siblings and children."""
    team = neighbours(tx, row.conversation_id, row.parent_id)
    if to == "*":
        members = [cid for cid in team if cid != row.parent_id]
        return members or "you have no active teammates to broadcast to"
    matches = [cid for cid, agent in team.items() if to in (cid, agent, agent.rsplit("/", 1)[-1])]
    if len(matches) == 1:
        return matches
    names = sorted({agent.rsplit("/", 1)[-1] for agent in team.values()})
    if not matches:
        return f"no active teammate {to!r}; your team: {', '.join(names) or 'nobody'}"
    return f"{to!r} names {len(matches)} conversations; use one id of: {', '.join(sorted(matches))}"


def finish(
    tx: Tx,
    conversation_id: str,
    turn: AssistantTurn,
    *,
    extensions: Extensions,
    error: bool = False,
) -> Outcome:
    """Persist a final assistant turn; its text is the reply to the request it served (a
    reply hold may keep it back at a gate, which delivers it once answered), and what its
    kind of conversation's end brings about runs.

    With `error`, the engine ended the turn (a limit), and the reply says so.
    """
    row = conversation(tx, conversation_id)
    content = assistant_content(turn) | ({"stopped": True} if error else {})
    outcome = Outcome(
        appended=append(tx, conversation_id, [(row.agent, "assistant", content, turn.usage)])
    )
    end_turn(tx, conversation_id)
    if row.serving_call_id is not None:
        held = None if error else extensions.held_reply(tx, row)  # the decider hears it first
        _reply(tx, row, turn.text, outcome, error=error, held=held is not None)
        if held is not None:
            gate = gates.get(tx, held)
            outcome.gates.append((held, gate.kind, gate.question))
    elif row.parent_id is None:
        keep_result(tx, conversation_id, turn.text)
    if row.shutdown_requested_by is not None:
        _shut_down(tx, row, turn.text, outcome)
    extensions.ended(tx, row, outcome)
    return outcome


def _reply(
    tx: Tx,
    row: ConversationRow,
    text: str,
    outcome: Outcome,
    *,
    error: bool = False,
    held: bool = False,
) -> None:
    """Answer the request this conversation served; `held`: a gate holds the reply (it
    delivers it once answered), so the parent stops waiting on this one but is not woken."""
    call_id = row.serving_call_id or row.request_call_id
    if row.parent_id is None or call_id is None:
        raise BusError(f"{row.conversation_id!r} has no request to answer")
    if not held:
        deliver(
            tx,
            row.parent_id,
            kind=InboxKind.REPLY,
            sender=row.agent,
            content={"text": text, "is_error": error},
            call_id=call_id,
            source_conversation=row.conversation_id,
        )
    close_context(tx, row.conversation_id)
    left = reply_arrived(tx, row.parent_id)
    outcome.replied_to = row.parent_id
    if left == 0 and not held:
        outcome.woken.append(row.parent_id)


def _shut_down(tx: Tx, row: ConversationRow, text: str, outcome: Outcome) -> None:
    requester = row.shutdown_requested_by
    assert requester is not None
    if (found := listed(tx, requester)) is not None and found.active:
        deliver(
            tx,
            requester,
            kind=InboxKind.SHUTDOWN_RESPONSE,
            sender=row.agent,
            content={"text": text},
            source_conversation=row.conversation_id,
        )
        outcome.woken.append(requester)
    outcome.woken += close(tx, row.conversation_id).woken
    outcome.closed = True


def close(tx: Tx, conversation_id: str) -> Outcome:
    """Close a conversation: it takes no more messages and never runs again.

    A Send it had not answered yet is answered with an error, so its sender is not left
    waiting; what is left in its inbox stays there, unread, for the record.
    """
    row = conversation(tx, conversation_id)
    outcome = Outcome(closed=True)
    if row.state == "closed":
        return outcome
    if row.status == "open" and row.parent_id is not None:
        _reply(
            tx,
            row,
            f"conversation {conversation_id!r} was closed before it replied",
            outcome,
            error=True,
        )
    mark_closed(tx, conversation_id, at=now())
    return outcome


def record_results(
    tx: Tx, conversation_id: str, sender: str, results: Sequence[ToolResult]
) -> Outcome:
    """Persist results of tools the engine ran itself (one per call; never run twice)."""
    return Outcome(
        appended=append(
            tx, conversation_id, [(sender, "tool", tool_content(r), None) for r in results]
        )
    )
