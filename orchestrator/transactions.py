"""The conversation bus's transactions: synchronous functions run whole in the store thread.

Each public function here is one step of the engine and commits as one transaction
(`Store.write`), so a process killed at any instant leaves either all of a step or none
of it. They return what changed so the async side can publish events and wake
conversations after the commit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.errors import BusError
from orchestrator.messages import (
    AssistantTurn,
    ConversationKind,
    InboxItem,
    InboxKind,
    Message,
    Role,
    ToolResult,
    Usage,
    assistant_content,
    dispatch_id,
    dumps,
    tool_content,
)
from orchestrator.store import Tx, now


@dataclass(frozen=True)
class ConversationRow:
    """A conversation and its agent context, as the engine reads them."""

    conversation_id: str
    kind: str
    state: str
    awaiting_input: bool
    in_turn: bool
    parent_id: str | None
    agent: str
    initiator: str
    job_id: int | None
    result: str | None
    status: str
    pending_count: int
    request_call_id: str | None
    serving_call_id: str | None
    shutdown_requested_by: str | None


@dataclass(frozen=True)
class Snapshot:
    """Everything one invocation starts from."""

    conversation: ConversationRow
    transcript: tuple[Message, ...]
    inbox_size: int


@dataclass(frozen=True)
class SendIntent:
    """A routed Send: open a new conversation with `recipient`, or continue `context_id`."""

    call_id: str
    recipient: str
    brief: str
    context_id: str | None = None


@dataclass(frozen=True)
class MessageIntent:
    """A teammate message: `to` is a teammate's name, a conversation id, or '*' for all."""

    call_id: str
    to: str
    kind: InboxKind
    text: str
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Opened:
    """A dispatch a Send started (or queued, if the recipient was busy)."""

    conversation_id: str
    recipient: str
    queued: bool


@dataclass
class Outcome:
    """What a transaction changed: new transcript entries, dispatches, who may now run."""

    appended: list[Message] = field(default_factory=list)
    opened: list[Opened] = field(default_factory=list)
    woken: list[str] = field(default_factory=list)
    replied_to: str | None = None
    closed: bool = False


_CONVERSATION_SQL = """
SELECT c.conversation_id, c.kind, c.state, c.awaiting_input, c.in_turn, c.parent_id, c.agent,
       c.initiator, c.job_id, c.result, a.status, a.pending_count, a.request_call_id,
       a.serving_call_id, a.shutdown_requested_by
FROM conversations c JOIN agent_contexts a ON a.context_id = c.conversation_id
WHERE c.conversation_id = ?
"""

RUNNABLE_SQL = """
SELECT c.conversation_id FROM conversations c
JOIN agent_contexts a ON a.context_id = c.conversation_id
WHERE c.state = 'active' AND c.awaiting_input = 0 AND a.pending_count = 0
  AND (c.in_turn = 1 OR EXISTS (SELECT 1 FROM inbox i WHERE i.conversation_id = c.conversation_id))
ORDER BY c.created_at, c.conversation_id
"""


def conversation(tx: Tx, conversation_id: str) -> ConversationRow:
    """Read one conversation with its agent context."""
    row = tx.execute(_CONVERSATION_SQL, (conversation_id,)).fetchone()
    if row is None:
        raise BusError(f"no conversation {conversation_id!r}")
    return ConversationRow(row[0], row[1], row[2], bool(row[3]), bool(row[4]), *row[5:])


def transcript(tx: Tx, conversation_id: str, *, after_seq: int = 0) -> tuple[Message, ...]:
    """The messages of a conversation after `after_seq`, in order."""
    rows = tx.execute(
        "SELECT seq, sender, role, content, input_tokens, output_tokens, cache_read_tokens,"
        " cache_write_tokens FROM messages WHERE conversation_id = ? AND seq > ? ORDER BY seq",
        (conversation_id, after_seq),
    ).fetchall()
    return tuple(
        Message(
            conversation_id,
            seq,
            sender,
            role,
            json.loads(content),
            None if tin is None else Usage(tin, tout, cread, cwrite),
        )
        for seq, sender, role, content, tin, tout, cread, cwrite in rows
    )


def snapshot(tx: Tx, conversation_id: str, *, after_seq: int = 0) -> Snapshot:
    """A conversation, its transcript after `after_seq`, and how much waits in its inbox."""
    (inbox_size,) = tx.execute(
        "SELECT count(*) FROM inbox WHERE conversation_id = ?", (conversation_id,)
    ).fetchone()
    return Snapshot(
        conversation(tx, conversation_id),
        transcript(tx, conversation_id, after_seq=after_seq),
        inbox_size,
    )


def runnable(tx: Tx) -> list[str]:
    """Conversations with work to do: an unfinished invocation or a non-empty inbox."""
    return [row[0] for row in tx.execute(RUNNABLE_SQL)]


def create_conversation(
    tx: Tx,
    *,
    conversation_id: str,
    kind: ConversationKind,
    agent: str,
    initiator: str,
    parent_id: str | None,
    job_id: int | None,
    request_call_id: str | None = None,
) -> None:
    """Insert a conversation and its agent context."""
    created = now()
    tx.execute(
        "INSERT INTO conversations (conversation_id, kind, agent, initiator, parent_id, job_id,"
        " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (conversation_id, kind.value, agent, initiator, parent_id, job_id, created),
    )
    tx.execute(
        "INSERT INTO agent_contexts (context_id, parent_context_id, initiator, recipient,"
        " status, request_call_id, opening_call_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            conversation_id,
            parent_id,
            initiator,
            agent,
            "open" if request_call_id else "closed",
            request_call_id,
            request_call_id,
            created,
        ),
    )


def deliver(
    tx: Tx,
    conversation_id: str,
    *,
    kind: InboxKind,
    sender: str,
    content: dict[str, Any],
    call_id: str | None = None,
    source_conversation: str | None = None,
) -> None:
    """Put one item in a conversation's inbox; a closed conversation takes nothing."""
    state = tx.execute(
        "SELECT state FROM conversations WHERE conversation_id = ?", (conversation_id,)
    ).fetchone()
    if state is None:
        raise BusError(f"no conversation {conversation_id!r}")
    if state[0] != "active":
        raise BusError(f"conversation {conversation_id!r} is closed")
    tx.execute(
        "INSERT INTO inbox (conversation_id, kind, sender, call_id, source_conversation, content,"
        " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (conversation_id, kind.value, sender, call_id, source_conversation, dumps(content), now()),
    )


def append(
    tx: Tx,
    conversation_id: str,
    entries: Sequence[tuple[str, Role, dict[str, Any], Usage | None]],
) -> list[Message]:
    """Append transcript entries (sender, role, content, usage) with consecutive seqs."""
    if not entries:
        return []
    (last,) = tx.execute(
        "UPDATE conversations SET last_seq = last_seq + ? WHERE conversation_id = ?"
        " RETURNING last_seq",
        (len(entries), conversation_id),
    ).fetchone()
    first = last - len(entries) + 1
    created = now()
    rows = []
    messages = []
    for offset, (sender, role, content, usage) in enumerate(entries):
        u = usage or Usage()
        rows.append(
            (
                conversation_id,
                first + offset,
                sender,
                role,
                dumps(content),
                *(
                    (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens)
                    if usage
                    else (None, None, None, None)
                ),
                created,
            )
        )
        messages.append(Message(conversation_id, first + offset, sender, role, content, usage))
    tx.executemany(
        "INSERT INTO messages (conversation_id, seq, sender, role, content, input_tokens,"
        " output_tokens, cache_read_tokens, cache_write_tokens, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    return messages


def inbox(tx: Tx, conversation_id: str) -> list[InboxItem]:
    """Read a conversation's inbox without clearing it (peek)."""
    rows = tx.execute(
        "SELECT item_id, kind, sender, content, call_id, source_conversation FROM inbox"
        " WHERE conversation_id = ? ORDER BY item_id",
        (conversation_id,),
    ).fetchall()
    return [
        InboxItem(item_id, conversation_id, InboxKind(kind), sender, json.loads(content), call, src)
        for item_id, kind, sender, content, call, src in rows
    ]


def consume(tx: Tx, conversation_id: str) -> Outcome:
    """Receive-and-clear: move the whole inbox into the transcript and start (or go on with) a turn.

    Answers to this conversation's own calls (Send replies, human answers) become tool
    results, first; everything else becomes a user message. A consumed request is the one
    this conversation's next final output will answer.
    """
    items = inbox(tx, conversation_id)
    answers = [
        i for i in items if i.kind is InboxKind.REPLY or (i.call_id and i.kind is InboxKind.HUMAN)
    ]
    others = [i for i in items if i not in answers]
    answers.sort(key=_call_order(tx, conversation_id))
    entries: list[tuple[str, Role, dict[str, Any], Usage | None]] = [
        (i.sender, "tool", _answer_content(i), None) for i in answers
    ]
    entries += [(i.sender, "user", _user_content(i), None) for i in others]
    outcome = Outcome(appended=append(tx, conversation_id, entries))
    for item in others:
        _note_request(tx, conversation_id, item)
    if items:
        tx.execute(
            "DELETE FROM inbox WHERE conversation_id = ? AND item_id <= ?",
            (conversation_id, items[-1].item_id),
        )
    tx.execute("UPDATE conversations SET in_turn = 1 WHERE conversation_id = ?", (conversation_id,))
    return outcome


def _call_order(tx: Tx, conversation_id: str) -> Callable[[InboxItem], int]:
    """Sort key putting answers in the order of the calls they answer, not of arrival."""
    row = tx.execute(
        "SELECT content FROM messages WHERE conversation_id = ? AND role = 'assistant'"
        " ORDER BY seq DESC LIMIT 1",
        (conversation_id,),
    ).fetchone()
    calls = json.loads(row[0]).get("tool_calls", []) if row else []
    order = {call["id"]: n for n, call in enumerate(calls)}
    return lambda item: order.get(item.call_id or "", len(order))


def _answer_content(item: InboxItem) -> dict[str, Any]:
    content: dict[str, Any] = {
        "call_id": item.call_id,
        "text": item.content.get("text", ""),
        "is_error": bool(item.content.get("is_error", False)),
    }
    if item.source_conversation is not None:
        content["conversation_id"] = item.source_conversation
    return content


def _user_content(item: InboxItem) -> dict[str, Any]:
    content = dict(item.content)
    content["kind"] = item.kind.value
    content["from"] = item.sender
    return content


def _note_request(tx: Tx, conversation_id: str, item: InboxItem) -> None:
    if item.kind is InboxKind.REQUEST and item.call_id:
        tx.execute(
            "UPDATE agent_contexts SET serving_call_id = ? WHERE context_id = ?",
            (item.call_id, conversation_id),
        )
    elif item.kind is InboxKind.SHUTDOWN_REQUEST:
        tx.execute(
            "UPDATE agent_contexts SET shutdown_requested_by = ? WHERE context_id = ?",
            (item.source_conversation, conversation_id),
        )


def record_turn(
    tx: Tx,
    conversation_id: str,
    turn: AssistantTurn,
    *,
    sends: Iterable[SendIntent] = (),
    messages: Iterable[MessageIntent] = (),
    refusals: Iterable[ToolResult] = (),
) -> Outcome:
    """Persist an assistant turn that called tools, and carry out its bus tools at once.

    Sends open child conversations (or queue into open ones) and raise this context's
    pending_count; teammate messages land in inboxes; refusals become error results the
    agent reads on its next step. All of it commits together with the turn.
    """
    row = conversation(tx, conversation_id)
    outcome = Outcome()
    results: list[ToolResult] = list(refusals)
    entries: list[tuple[str, Role, dict[str, Any], Usage | None]] = [
        (row.agent, "assistant", assistant_content(turn), turn.usage)
    ]
    pending = 0
    for send in sends:
        refusal = _send(tx, row, send, outcome)
        if refusal is None:
            pending += 1
        else:
            results.append(refusal)
    for message in messages:
        results.append(_message(tx, row, message, outcome))
    order = {c.call_id: n for n, c in enumerate(turn.tool_calls)}
    results.sort(key=lambda r: order.get(r.call_id, len(order)))
    entries += [(row.agent, "tool", tool_content(r), None) for r in results]
    outcome.appended = append(tx, conversation_id, entries)
    if pending:
        tx.execute(
            "UPDATE agent_contexts SET pending_count = pending_count + ? WHERE context_id = ?",
            (pending, conversation_id),
        )
    return outcome


def _send(tx: Tx, row: ConversationRow, send: SendIntent, outcome: Outcome) -> ToolResult | None:
    brief = {"text": send.brief}
    if send.context_id is None:
        child = dispatch_id(row.agent, send.recipient)
        create_conversation(
            tx,
            conversation_id=child,
            kind=ConversationKind.DISPATCH,
            agent=send.recipient,
            initiator=row.agent,
            parent_id=row.conversation_id,
            job_id=row.job_id,
            request_call_id=send.call_id,
        )
        deliver(
            tx,
            child,
            kind=InboxKind.REQUEST,
            sender=row.agent,
            content=brief,
            call_id=send.call_id,
            source_conversation=row.conversation_id,
        )
        outcome.opened.append(Opened(child, send.recipient, queued=False))
        outcome.woken.append(child)
        return None
    target = tx.execute(
        "SELECT c.state, c.initiator, c.parent_id, c.in_turn, a.status, a.pending_count,"
        " EXISTS (SELECT 1 FROM inbox i WHERE i.conversation_id = c.conversation_id)"
        " FROM conversations c JOIN agent_contexts a ON a.context_id = c.conversation_id"
        " WHERE c.conversation_id = ?",
        (send.context_id,),
    ).fetchone()
    problem = _continuation_problem(row, send, target)
    if problem:
        return ToolResult(send.call_id, problem, is_error=True)
    state, _, _, in_turn, _, pending_count, has_inbox = target
    tx.execute(
        "UPDATE agent_contexts SET status = 'open', request_call_id = ? WHERE context_id = ?",
        (send.call_id, send.context_id),
    )
    deliver(
        tx,
        send.context_id,
        kind=InboxKind.REQUEST,
        sender=row.agent,
        content=brief,
        call_id=send.call_id,
        source_conversation=row.conversation_id,
    )
    busy = bool(in_turn or pending_count or has_inbox)
    outcome.opened.append(Opened(send.context_id, send.recipient, queued=busy))
    outcome.woken.append(send.context_id)
    return None


def _continuation_problem(row: ConversationRow, send: SendIntent, target: Any) -> str | None:
    if target is None:
        return f"no conversation {send.context_id!r}; omit context_id to open a new one"
    state, initiator, parent_id, _, status, _, _ = target
    if initiator != row.agent or parent_id != row.conversation_id:
        return (
            f"conversation {send.context_id!r} was not opened by you here; you cannot continue it"
        )
    if state != "active":
        return f"conversation {send.context_id!r} is closed; omit context_id to open a new one"
    if status == "open":
        return f"conversation {send.context_id!r} has not answered your last Send yet"
    return None


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
    rows = tx.execute(
        "SELECT conversation_id, agent FROM conversations WHERE state = 'active'"
        " AND conversation_id != ? AND (conversation_id = ? OR parent_id = ?"
        " OR (parent_id = ? AND ? IS NOT NULL))",
        (row.conversation_id, row.parent_id, row.conversation_id, row.parent_id, row.parent_id),
    ).fetchall()
    team: dict[str, str] = dict(rows)
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


def finish(tx: Tx, conversation_id: str, turn: AssistantTurn) -> Outcome:
    """Persist a final assistant turn; its text is the reply to the request it served."""
    row = conversation(tx, conversation_id)
    outcome = Outcome(
        appended=append(
            tx, conversation_id, [(row.agent, "assistant", assistant_content(turn), turn.usage)]
        )
    )
    tx.execute("UPDATE conversations SET in_turn = 0 WHERE conversation_id = ?", (conversation_id,))
    if row.serving_call_id is not None:
        _reply(tx, row, turn.text, outcome)
    elif row.parent_id is None:
        tx.execute(
            "UPDATE conversations SET result = ? WHERE conversation_id = ?",
            (turn.text, conversation_id),
        )
    if row.shutdown_requested_by is not None:
        _shut_down(tx, row, turn.text, outcome)
    return outcome


def _reply(
    tx: Tx, row: ConversationRow, text: str, outcome: Outcome, *, error: bool = False
) -> None:
    call_id = row.serving_call_id or row.request_call_id
    if row.parent_id is None or call_id is None:
        raise BusError(f"{row.conversation_id!r} has no request to answer")
    deliver(
        tx,
        row.parent_id,
        kind=InboxKind.REPLY,
        sender=row.agent,
        content={"text": text, "is_error": error},
        call_id=call_id,
        source_conversation=row.conversation_id,
    )
    tx.execute(
        "UPDATE agent_contexts SET status = 'closed', serving_call_id = NULL,"
        " request_call_id = NULL WHERE context_id = ?",
        (row.conversation_id,),
    )
    (left,) = tx.execute(
        "UPDATE agent_contexts SET pending_count = pending_count - 1 WHERE context_id = ?"
        " RETURNING pending_count",
        (row.parent_id,),
    ).fetchone()
    outcome.replied_to = row.parent_id
    if left == 0:
        outcome.woken.append(row.parent_id)


def _shut_down(tx: Tx, row: ConversationRow, text: str, outcome: Outcome) -> None:
    requester = row.shutdown_requested_by
    assert requester is not None
    if tx.execute(
        "SELECT state FROM conversations WHERE conversation_id = ?", (requester,)
    ).fetchone() == ("active",):
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
    tx.execute(
        "UPDATE conversations SET state = 'closed', in_turn = 0, closed_at = ?"
        " WHERE conversation_id = ?",
        (now(), conversation_id),
    )
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
