"""The conversation bus's transactions: synchronous functions run whole in the store thread.

Each public function here is one step of the engine and commits as one transaction
(`Store.write`), so a process killed at any instant leaves either all of a step or none
of it. They return what changed so the async side can publish events and wake
conversations after the commit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.bus import failures
from orchestrator.core.errors import BusError
from orchestrator.core.messages import (
    ConversationKind,
    InboxItem,
    InboxKind,
    Message,
    Role,
    Usage,
    dumps,
)
from orchestrator.store.sqlite import Tx, now


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
    failed: bool = False  # a failure row holds it until a retry is asked for


@dataclass(frozen=True)
class Snapshot:
    """Everything one invocation starts from."""

    conversation: ConversationRow
    transcript: tuple[Message, ...]
    inbox_size: int


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
    gates: list[tuple[int, str, str]] = field(default_factory=list)  # (id, kind, question)


_CONVERSATION_SQL = """
SELECT c.conversation_id, c.kind, c.state, c.awaiting_input, c.in_turn, c.parent_id, c.agent,
       c.initiator, c.job_id, c.result, a.status, a.pending_count, a.request_call_id,
       a.serving_call_id, a.shutdown_requested_by
FROM conversations c JOIN agent_contexts a ON a.context_id = c.conversation_id
WHERE c.conversation_id = ?
"""


def conversation(tx: Tx, conversation_id: str) -> ConversationRow:
    """Read one conversation with its agent context."""
    row = tx.execute(_CONVERSATION_SQL, (conversation_id,)).fetchone()
    if row is None:
        raise BusError(f"no conversation {conversation_id!r}")
    (cid, kind, state, awaiting, in_turn, parent, agent, initiator, job, result, *context) = row
    status, pending, request_call, serving_call, shutdown_by = context
    return ConversationRow(
        cid,
        kind,
        state,
        bool(awaiting),
        bool(in_turn),
        parent,
        agent,
        initiator,
        job,
        result,
        status,
        pending,
        request_call,
        serving_call,
        shutdown_by,
        failures.failed(tx, cid),
    )


@dataclass(frozen=True)
class Listed:
    """A conversation as lists of them show it: who, where, and whether it is still open."""

    conversation_id: str
    kind: str
    agent: str
    parent_id: str | None
    job_id: int | None
    state: str  # active | closed
    result: str | None
    task_id: int | None  # the task it works on (teams/board.py's), if any

    @property
    def active(self) -> bool:
        return self.state == "active"


_LISTED = (
    "SELECT conversation_id, kind, agent, parent_id, job_id, state, result, task_id"
    " FROM conversations"
)


def listed(tx: Tx, conversation_id: str) -> Listed | None:
    """One conversation (None: no such conversation)."""
    row = tx.execute(f"{_LISTED} WHERE conversation_id = ?", (conversation_id,)).fetchone()
    return None if row is None else Listed(*row)


def of_job(tx: Tx, job_id: int) -> list[Listed]:
    """The job's conversations, oldest first."""
    rows = tx.execute(
        f"{_LISTED} WHERE job_id = ? ORDER BY created_at, conversation_id", (job_id,)
    ).fetchall()
    return [Listed(*row) for row in rows]


def close_job(tx: Tx, job_id: int, *, at: float) -> list[str]:
    """Close the job's active conversations (the job ended): nothing runs them again. Their
    ids."""
    rows = tx.execute(
        "UPDATE conversations SET state = 'closed', in_turn = 0, awaiting_input = 0,"
        " closed_at = ? WHERE job_id = ? AND state = 'active' RETURNING conversation_id",
        (at, job_id),
    ).fetchall()
    return [str(cid) for (cid,) in rows]


def transcript(tx: Tx, conversation_id: str, *, after_seq: int = 0) -> tuple[Message, ...]:
    """The messages of a conversation after `after_seq`, in order."""
    rows = tx.execute(
        "SELECT seq, sender, role, content, input_tokens, output_tokens, cache_read_tokens,"
        " cache_write_tokens FROM messages WHERE conversation_id = ? AND seq > ? ORDER BY seq",
        (conversation_id, after_seq),
    ).fetchall()
    return tuple(_message(conversation_id, *row) for row in rows)


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
    task_id: int | None = None,
) -> None:
    """Insert a conversation and its agent context; it works on its parent's task by default."""
    created = now()
    tx.execute(
        "INSERT INTO conversations (conversation_id, kind, agent, initiator, parent_id, job_id,"
        " created_at, task_id) VALUES (?, ?, ?, ?, ?, ?, ?, coalesce(?, (SELECT task_id FROM"
        " conversations WHERE conversation_id = ?)))",
        (
            conversation_id,
            kind.value,
            agent,
            initiator,
            parent_id,
            job_id,
            created,
            task_id,
            parent_id,
        ),
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


# The bus's other modules' steps on these tables (issue 32: one owner per table). Kept
# apart from the functions above so that each module's SQL is found here by its use.


def tail(tx: Tx, conversation_id: str) -> tuple[int, int, bool, bool]:
    """A conversation right after a step: its inbox's size, the replies it awaits, whether
    it awaits input, whether it is active."""
    row = tx.execute(
        "SELECT (SELECT count(*) FROM inbox i WHERE i.conversation_id = c.conversation_id),"
        " a.pending_count, c.awaiting_input, c.state = 'active'"
        " FROM conversations c JOIN agent_contexts a ON a.context_id = c.conversation_id"
        " WHERE c.conversation_id = ?",
        (conversation_id,),
    ).fetchone()
    return row[0], row[1], bool(row[2]), bool(row[3])


def with_work(tx: Tx, job_id: int | None = None) -> list[tuple[str, int | None]]:
    """Active conversations with work to do, with their jobs, oldest first: an unfinished
    invocation or a non-empty inbox, no replies or input awaited (of one job's
    conversations, if `job_id` is given). Failures and held jobs are their owners' word."""
    rows = tx.execute(
        "SELECT c.conversation_id, c.job_id FROM conversations c"
        " JOIN agent_contexts a ON a.context_id = c.conversation_id"
        " WHERE c.state = 'active' AND c.awaiting_input = 0 AND a.pending_count = 0"
        " AND (c.in_turn = 1"
        " OR EXISTS (SELECT 1 FROM inbox i WHERE i.conversation_id = c.conversation_id))"
        " AND (:job_id IS NULL OR c.job_id = :job_id)"
        " ORDER BY c.created_at, c.conversation_id",
        {"job_id": job_id},
    ).fetchall()
    return [(str(cid), job) for cid, job in rows]


def await_replies(tx: Tx, conversation_id: str, count: int) -> None:
    """The conversation awaits `count` more replies (Sends or dispatches it opened)."""
    tx.execute(
        "UPDATE agent_contexts SET pending_count = pending_count + ? WHERE context_id = ?",
        (count, conversation_id),
    )


def reply_arrived(tx: Tx, conversation_id: str) -> int:
    """One reply the conversation awaited came; how many it still awaits."""
    sql = (
        "UPDATE agent_contexts SET pending_count = pending_count - 1 WHERE context_id = ?"
        " RETURNING pending_count"
    )
    return int(tx.execute(sql, (conversation_id,)).fetchone()[0])


def close_context(tx: Tx, conversation_id: str) -> None:
    """The conversation answered the request it served: it serves none now."""
    tx.execute(
        "UPDATE agent_contexts SET status = 'closed', serving_call_id = NULL,"
        " request_call_id = NULL WHERE context_id = ?",
        (conversation_id,),
    )


def reopen_context(tx: Tx, conversation_id: str, call_id: str) -> None:
    """A Send continues the conversation: it owes an answer to `call_id`."""
    tx.execute(
        "UPDATE agent_contexts SET status = 'open', request_call_id = ? WHERE context_id = ?",
        (call_id, conversation_id),
    )


def continuation(tx: Tx, conversation_id: str) -> tuple[Any, ...] | None:
    """What a Send continuing the conversation checks: state, initiator, parent id, in
    turn, context status, replies awaited, whether its inbox holds anything (None: no
    such conversation)."""
    row = tx.execute(
        "SELECT c.state, c.initiator, c.parent_id, c.in_turn, a.status, a.pending_count,"
        " EXISTS (SELECT 1 FROM inbox i WHERE i.conversation_id = c.conversation_id)"
        " FROM conversations c JOIN agent_contexts a ON a.context_id = c.conversation_id"
        " WHERE c.conversation_id = ?",
        (conversation_id,),
    ).fetchone()
    return None if row is None else tuple(row)


def neighbours(tx: Tx, conversation_id: str, parent_id: str | None) -> dict[str, str]:
    """Active conversations near this one (its parent, its siblings, its children): their
    ids, each with its agent."""
    near = (conversation_id, parent_id, conversation_id, parent_id, parent_id)
    sql = (
        "SELECT conversation_id, agent FROM conversations WHERE state = 'active'"
        " AND conversation_id != ? AND (conversation_id = ? OR parent_id = ?"
        " OR (parent_id = ? AND ? IS NOT NULL))"
    )
    return dict(tx.execute(sql, near).fetchall())


def end_turn(tx: Tx, conversation_id: str) -> None:
    """The conversation's turn ended (its final output is recorded)."""
    tx.execute("UPDATE conversations SET in_turn = 0 WHERE conversation_id = ?", (conversation_id,))


def keep_result(tx: Tx, conversation_id: str, text: str) -> None:
    """A root conversation's final output, kept as its result."""
    tx.execute(
        "UPDATE conversations SET result = ? WHERE conversation_id = ?", (text, conversation_id)
    )


def mark_closed(tx: Tx, conversation_id: str, *, at: float) -> None:
    """The conversation is closed: it takes nothing more and never runs again."""
    tx.execute(
        "UPDATE conversations SET state = 'closed', in_turn = 0, closed_at = ?"
        " WHERE conversation_id = ?",
        (at, conversation_id),
    )


def await_input(tx: Tx, conversation_id: str) -> None:
    """The conversation waits on one more gate."""
    tx.execute(
        "UPDATE conversations SET awaiting_input = awaiting_input + 1 WHERE conversation_id = ?",
        (conversation_id,),
    )


def input_came(tx: Tx, conversation_id: str) -> None:
    """A gate the conversation waited on was answered or closed."""
    tx.execute(
        "UPDATE conversations SET awaiting_input = max(awaiting_input - 1, 0)"
        " WHERE conversation_id = ?",
        (conversation_id,),
    )


def first_content(tx: Tx, conversation_id: str) -> str | None:
    """The stored content (JSON) of the conversation's first message, if it has one."""
    row = tx.execute(
        "SELECT content FROM messages WHERE conversation_id = ? ORDER BY seq LIMIT 1",
        (conversation_id,),
    ).fetchone()
    return None if row is None else row[0]


# For the layers above the bus (issue 32: one owner per table): conversations by kind, task
# and parent, and a job's first request.


def working_on(tx: Tx, task_id: int, kind: ConversationKind) -> bool:
    """Whether an active conversation of `kind` works on the task."""
    row = tx.execute(
        "SELECT 1 FROM conversations WHERE task_id = ? AND kind = ? AND state = 'active'",
        (task_id, kind.value),
    ).fetchone()
    return row is not None


def last_seq(tx: Tx, conversation_id: str) -> int | None:
    """The seq of the conversation's last message (0: none yet; None: no such conversation)."""
    row = tx.execute(
        "SELECT last_seq FROM conversations WHERE conversation_id = ?", (conversation_id,)
    ).fetchone()
    return None if row is None else int(row[0])


def started(tx: Tx, job_id: int, kind: ConversationKind) -> int:
    """How many of the job's active conversations of `kind` have started (have a message)."""
    (count,) = tx.execute(
        "SELECT count(*) FROM conversations WHERE job_id = ? AND kind = ? AND state = 'active'"
        " AND last_seq > 0",
        (job_id, kind.value),
    ).fetchone()
    return int(count)


def not_started(tx: Tx, job_id: int | None, kind: ConversationKind) -> list[str]:
    """The job's active conversations of `kind` with no message yet, oldest first."""
    rows = tx.execute(
        "SELECT conversation_id FROM conversations WHERE job_id = ? AND kind = ?"
        " AND state = 'active' AND last_seq = 0 ORDER BY created_at, conversation_id",
        (job_id, kind.value),
    )
    return [str(cid) for (cid,) in rows]


def active_children(tx: Tx, parent_id: str) -> list[str]:
    """The active conversations `parent_id` opened."""
    rows = tx.execute(
        "SELECT conversation_id FROM conversations WHERE parent_id = ? AND state = 'active'",
        (parent_id,),
    ).fetchall()
    return [str(cid) for (cid,) in rows]


def first_request(tx: Tx, job_id: int) -> str | None:
    """The stored content (JSON) of the first user message of the job's root conversations."""
    row = tx.execute(
        "SELECT m.content FROM messages m JOIN conversations c"
        " ON c.conversation_id = m.conversation_id WHERE c.job_id = ?"
        " AND c.parent_id IS NULL AND m.role = 'user' ORDER BY m.seq LIMIT 1",
        (job_id,),
    ).fetchone()
    return None if row is None else row[0]


# Named for the modules whose own SQL named these tables (issue 32).


@dataclass(frozen=True)
class OpenConversation:
    """An open conversation of a job as a live view shows it; `busy` while it has work."""

    conversation_id: str
    kind: str
    agent: str
    parent_id: str | None
    busy: bool


_OPEN_SQL = """
SELECT c.conversation_id, c.kind, c.agent, c.parent_id,
       c.in_turn OR EXISTS (SELECT 1 FROM inbox i WHERE i.conversation_id = c.conversation_id)
FROM conversations c
WHERE c.job_id = ? AND c.state = 'active'
ORDER BY c.created_at, c.conversation_id
"""


def open_of_job(tx: Tx, job_id: int) -> list[OpenConversation]:
    """The job's open conversations, oldest first: busy while a turn is under way or mail
    waits in the inbox."""
    rows = tx.execute(_OPEN_SQL, (job_id,)).fetchall()
    return [
        OpenConversation(cid, kind, agent, parent, bool(busy))
        for cid, kind, agent, parent, busy in rows
    ]


def first_open_child(tx: Tx, parent_id: str) -> str | None:
    """The oldest open conversation `parent_id` started whose context is open, if any."""
    row = tx.execute(
        "SELECT c.conversation_id FROM conversations c"
        " JOIN agent_contexts a ON a.context_id = c.conversation_id"
        " WHERE c.parent_id = ? AND c.state = 'active' AND a.status = 'open'"
        " ORDER BY c.created_at LIMIT 1",
        (parent_id,),
    ).fetchone()
    return None if row is None else str(row[0])


_BILLED = (
    "SELECT {keys}, sum(m.input_tokens), sum(m.output_tokens), sum(m.cache_read_tokens),"
    " sum(m.cache_write_tokens) FROM messages m JOIN conversations c USING (conversation_id)"
    " WHERE m.input_tokens IS NOT NULL AND {where} GROUP BY {keys}"
)


def _usage(tokens: Sequence[Any]) -> Usage:
    return Usage(*(int(t or 0) for t in tokens))


def billed_by_job(tx: Tx, job_id: int | None = None) -> list[tuple[int, str, Usage]]:
    """The tokens the turns of each job's (or only `job_id`'s) conversations were billed
    for, per job and agent."""
    where = "c.job_id IS NOT NULL" if job_id is None else "c.job_id = :job_id"
    rows = tx.execute(
        _BILLED.format(keys="c.job_id, c.agent", where=where), {"job_id": job_id}
    ).fetchall()
    return [(int(job), str(agent), _usage(tokens)) for job, agent, *tokens in rows]


def billed_by_agent(
    tx: Tx,
    *,
    job_id: int | None = None,
    task_ids: Sequence[int] | None = None,
    before: float | None = None,
) -> list[tuple[str, Usage]]:
    """The tokens turns were billed for, per agent: of the job's conversations, or of the
    conversations working on the tasks (by stored id), written before `before` if given."""
    where = [] if job_id is None else ["c.job_id = :job_id"]
    if task_ids is not None:
        where.append("c.task_id IN (SELECT value FROM json_each(:tasks))")
    if before is not None:
        where.append("m.created_at < :before")
    rows = tx.execute(
        _BILLED.format(keys="c.agent", where=" AND ".join(where) or "1"),
        {"job_id": job_id, "tasks": json.dumps(list(task_ids or ())), "before": before},
    ).fetchall()
    return [(str(agent), _usage(tokens)) for agent, *tokens in rows]


@dataclass(frozen=True)
class Logged:
    """One message of a job's transcript, in the conversation of `agent`."""

    message_id: int
    at: float
    agent: str
    message: Message


def log_of_job(tx: Tx, job_id: int, *, after: int = 0) -> list[Logged]:
    """The messages of the job's conversations after message `after`, in the order written."""
    rows = tx.execute(
        "SELECT m.message_id, m.created_at, c.agent, m.conversation_id, m.seq, m.sender, m.role,"
        " m.content, m.input_tokens, m.output_tokens, m.cache_read_tokens, m.cache_write_tokens"
        " FROM messages m JOIN conversations c USING (conversation_id)"
        " WHERE c.job_id = ? AND m.message_id > ? ORDER BY m.message_id",
        (job_id, after),
    )
    return [
        Logged(message_id, at, agent, _message(*message))
        for message_id, at, agent, *message in rows
    ]


def _message(
    conversation_id: str, seq: int, sender: str, role: Role, content: str, *tokens: Any
) -> Message:
    """A message as stored: its tokens counted (a model turn's) or not (None)."""
    usage = None if tokens[0] is None else Usage(*tokens)
    return Message(conversation_id, seq, sender, role, json.loads(content), usage)


def clear_result(tx: Tx, conversation_id: str) -> None:
    """The conversation's reply no longer stands (its work goes on)."""
    tx.execute(
        "UPDATE conversations SET result = NULL WHERE conversation_id = ?", (conversation_id,)
    )


def last_message_at(tx: Tx, job_id: int) -> float | None:
    """When the last message of the job's conversations was written (None: none was)."""
    row = tx.execute(
        "SELECT max(m.created_at) FROM messages m JOIN conversations c USING (conversation_id)"
        " WHERE c.job_id = ?",
        (job_id,),
    ).fetchone()
    return None if row is None else row[0]


# --- read models' totals (the job page) ---------------------------------------------------


@dataclass(frozen=True)
class Tally:
    """A conversation's messages counted: how many, the tokens its turns used, the last one."""

    messages: int
    usage: Usage
    last_message_id: int


def tallies(tx: Tx, job_id: int) -> dict[str, Tally]:
    """Per conversation of the job, its messages counted (conversations with none left out)."""
    rows = tx.execute(
        "SELECT m.conversation_id, COUNT(*), SUM(COALESCE(m.input_tokens, 0)),"
        " SUM(COALESCE(m.output_tokens, 0)), SUM(COALESCE(m.cache_read_tokens, 0)),"
        " SUM(COALESCE(m.cache_write_tokens, 0)), MAX(m.message_id)"
        " FROM messages m JOIN conversations c ON c.conversation_id = m.conversation_id"
        " WHERE c.job_id = ? GROUP BY m.conversation_id",
        (job_id,),
    ).fetchall()
    return {
        cid: Tally(count, Usage(tin, tout, cread, cwrite), last)
        for cid, count, tin, tout, cread, cwrite, last in rows
    }
