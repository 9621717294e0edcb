"""Gates: questions put to a person, as rows, and their answers.

An agent asks with ask_human (a `question`); the engine asks itself (`ask_engine`) where
its rules say a person decides: an `intent` before planning, the `plan` before any task
runs, a `budget` about to be passed, a `merge-conflict`, a change to a `protected-path`.
Asking parks the conversation (awaiting_input counts its open gates); an answer is
recorded on the gate and, for a question, delivered as the ask_human call's result, which
wakes it. What an answer to an engine gate does is the kind's (orchestrator/bus/answers.py).
Who may answer is the edge's decision (the decider of the project or workgroup); the
engine records who did, and whether a human or the proxy. A gate of a cancelled job is
closed unanswered (`closed_at`), and answers nothing after; so is one a later edit of the
issue replaced (jobs/revisions.py). When the issue a job works on is edited, its open gates
are hashed again (`rehash_job`): an approval written before then is stale.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from orchestrator.bus import jobs as job_rows
from orchestrator.bus import transactions as txn
from orchestrator.bus.transactions import ConversationRow, deliver
from orchestrator.core.errors import BusError, GateClosedError
from orchestrator.core.gate_kinds import GateKind, GateKinds, GateMode
from orchestrator.core.messages import InboxKind, job_conversation_id
from orchestrator.store.sqlite import Tx, now

# human: the decider (or who may answer for them); proxy: the proxy alone; auto: given on the
# decider's behalf by whoever ran the job (`teaparty run --yes`), no decision of theirs.
AnsweredVia = Literal["human", "proxy", "auto"]
ENGINE = "engine"  # who asks the gates the engine's own rules call for
# The bus's own kind: an agent's question to a person (ask_human). Every other kind is a
# feature's, registered with the bus (orchestrator/bus/extensions.py).
QUESTION = GateKind(
    "question",
    "always",
    title="a question",
    about="an agent's question to the decider",
    engine_asks=False,
)
_YES = ("yes", "approve", "approved", "proceed", "ok", "go ahead")


@dataclass(frozen=True)
class AskIntent:
    """An ask_human call: the question, the options offered, and what kind of gate it is."""

    call_id: str
    question: str
    options: tuple[str, ...] = ()
    kind: str = QUESTION.name


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
    content_hash: str = ""  # what it asks about, hashed (`content_hash`)
    hashed_at: float = 0.0  # since when the content has that hash
    decider: str | None = None  # who may answer, once the forge has asked it
    answered_at: float | None = None
    closed_at: float | None = None  # closed unanswered (payload `closed` says why)
    closed_idle_at: float | None = None  # when waiting for it closed the job, if it did
    payload: Mapping[str, Any] = field(default_factory=dict)  # what an engine gate acts on
    woken: tuple[str, ...] = ()  # not stored: conversations its answer gave work to

    @property
    def engine_made(self) -> bool:
        """Whether the engine asked it (its answer is acted on by the engine, not an agent)."""
        return self.asked_by == ENGINE

    @property
    def approved(self) -> bool:
        """Whether its answer approves (`yes`, `/approve`, `ok`, ...)."""
        return self.answer is not None and approves(self.answer)

    @property
    def short_hash(self) -> str:
        """The hash as a person quotes it: its first seven hex digits."""
        return self.content_hash[:SHORT_HASH]


SHORT_HASH = 7


def approves(text: str) -> bool:
    """Whether an answer approves: it starts with yes, approve(d), proceed, ok or go ahead."""
    said = " ".join(text.casefold().split()).lstrip(" *_`'\"")
    return any(
        said == word or (said.startswith(word) and not said[len(word)].isalnum()) for word in _YES
    )


def content_hash(
    *,
    kind: str,
    question: str,
    options: tuple[str, ...],
    title: str,
    brief: str,
    base: str,
    pinned: Mapping[str, Any] | None = None,
) -> str:
    """What a gate approves, hashed: its question and options, the issue's title and text
    (the job's brief), the commit the work starts from, and what an engine gate pins
    (`pinned`: a head commit, files, a diff). Any change gives a new hash."""
    facts: dict[str, object] = {
        "kind": kind,
        "question": question,
        "options": list(options),
        "title": title,
        "brief": brief,
        "base": base,
    }
    if pinned:
        facts["pinned"] = dict(pinned)
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()


def mode(tx: Tx, job_id: int | None, kind: GateKind) -> GateMode:
    """The mode a job runs `kind` under: its project's when it started (the office records
    the modes; a kind it left out, or one added since, at its default). A job that recorded
    no policy (started on the engine alone, or before jobs kept one) has no gates of the
    engine's own: only its agents' questions."""
    modes = None if job_id is None else job_rows.gate_modes(tx, job_id)
    if not modes:
        return "never" if kind.engine_asks else kind.default_mode
    recorded: Mapping[str, GateMode] = json.loads(modes)
    return recorded.get(kind.name, kind.default_mode)


JobContent = Callable[[Tx, "int | None"], tuple[str, str, str]]
"""A job's title, brief and base commit, which each of its gates' hashes pins. The issue's
latest text and the workspace's base are tables of features above the bus: the composition
root hands in jobs/revisions.py's `job_content`, which reads them (Extensions.content)."""


def job_content(tx: Tx, job_id: int | None) -> tuple[str, str, str]:
    """What the bus alone knows of the job: its title and first message, and no base."""
    job = None if job_id is None else job_rows.get(tx, job_id)
    if job is None:
        return "", "", ""
    return str(job.title), str(txn.first_content(tx, job_conversation_id(job.job_id)) or ""), ""


def editing(tx: Tx, job_id: int | None = None) -> set[int | None]:
    """The jobs (or job `job_id`) whose issue was edited and the edit's gate (call id
    `edit:…`) is open: a held job makes no new model call."""
    rows = tx.execute(
        "SELECT DISTINCT job_id FROM gates WHERE call_id LIKE 'edit:%' AND answer IS NULL"
        " AND closed_at IS NULL AND job_id IS NOT NULL AND (? IS NULL OR job_id = ?)",
        (job_id, job_id),
    )
    return {int(job) for (job,) in rows}


def ask(tx: Tx, row: ConversationRow, intent: AskIntent, *, content: JobContent) -> int:
    """Record a gate and park its conversation until it is answered; returns the gate id."""
    return _insert(tx, row.job_id, row.conversation_id, intent, asked_by=row.agent, content=content)


def ask_engine(
    tx: Tx,
    *,
    job_id: int,
    conversation_id: str,
    intent: AskIntent,
    content: JobContent,
    payload: Mapping[str, Any] | None = None,
    pinned: Mapping[str, Any] | None = None,
) -> int:
    """A gate the engine asks: it parks `conversation_id` like an agent's question, but its
    answer is acted on by the engine (orchestrator/bus/answers.py), with `payload`; what it
    approves includes `pinned` and the job's `content`. Returns the gate id."""
    return _insert(
        tx,
        job_id,
        conversation_id,
        intent,
        asked_by=ENGINE,
        content=content,
        payload=payload,
        pinned=pinned,
    )


def _insert(
    tx: Tx,
    job_id: int | None,
    conversation_id: str,
    intent: AskIntent,
    *,
    asked_by: str,
    content: JobContent,
    payload: Mapping[str, Any] | None = None,
    pinned: Mapping[str, Any] | None = None,
) -> int:
    title, brief, base = content(tx, job_id)
    digest = content_hash(
        kind=intent.kind,
        question=intent.question,
        options=intent.options,
        title=title,
        brief=brief,
        base=base,
        pinned=pinned,
    )
    at = now()
    (gate_id,) = tx.execute(
        "INSERT INTO gates (job_id, conversation_id, call_id, kind, question, options, asked_by,"
        " asked_at, content_hash, hashed_at, payload, pinned)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING gate_id",
        (
            job_id,
            conversation_id,
            intent.call_id,
            intent.kind,
            intent.question,
            json.dumps(list(intent.options)),
            asked_by,
            at,
            digest,
            at,
            json.dumps(dict(payload)) if payload else None,
            json.dumps(dict(pinned)) if pinned else None,
        ),
    ).fetchone()
    txn.await_input(tx, conversation_id)
    return int(gate_id)


def rehash(
    tx: Tx,
    gate_id: int,
    *,
    question: str,
    payload: Mapping[str, Any],
    pinned: Mapping[str, Any],
    content: JobContent,
) -> Gate:
    """What an open engine gate asks about changed: its new question, payload and pins, and
    so a new hash (since now: an approval written before it is stale)."""
    gate = get(tx, gate_id)
    title, brief, base = content(tx, gate.job_id)
    digest = content_hash(
        kind=gate.kind,
        question=question,
        options=gate.options,
        title=title,
        brief=brief,
        base=base,
        pinned=pinned,
    )
    stored = (question, json.dumps(dict(payload)), json.dumps(dict(pinned)), digest)
    tx.execute(
        "UPDATE gates SET question = ?, payload = ?, pinned = ?, content_hash = ?,"
        " hashed_at = CASE WHEN content_hash IS ? THEN hashed_at ELSE ? END WHERE gate_id = ?",
        (*stored, digest, now(), gate_id),
    )
    return get(tx, gate_id)


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
    if gate.closed_at is not None:
        why = gate.payload.get("closed", "its job was cancelled")
        raise GateClosedError(f"gate {gate_id} was closed: {why}")
    if ref is not None and (used := answered_from(tx, ref)) is not None:
        raise GateClosedError(f"{ref} already answered gate {used}")
    tx.execute(
        "UPDATE gates SET answer = ?, answered_by = ?, answered_via = ?, answered_at = ?,"
        " answer_ref = ? WHERE gate_id = ?",
        (text, answered_by, via, now(), ref, gate_id),
    )
    txn.input_came(tx, gate.conversation_id)
    if gate.engine_made:  # what it does is the kind's (orchestrator/bus/answers.py)
        return get(tx, gate_id)
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


def close(tx: Tx, gate_id: int, *, why: str) -> bool:
    """Close an open gate unanswered, saying `why`; its conversation no longer waits on it.
    False when it was answered or closed already."""
    closed = tx.execute(
        "UPDATE gates SET closed_at = ?, payload = json_set(coalesce(payload, '{}'), '$.closed', ?)"
        " WHERE gate_id = ? AND answer IS NULL AND closed_at IS NULL RETURNING conversation_id",
        (now(), why, gate_id),
    ).fetchone()
    if closed is None:
        return False
    txn.input_came(tx, closed[0])
    return True


def close_every(tx: Tx, job_id: int, *, at: float) -> list[int]:
    """Close the job's open gates unanswered (the job ended); their ids."""
    rows = tx.execute(
        "UPDATE gates SET closed_at = ? WHERE job_id = ? AND answer IS NULL"
        " AND closed_at IS NULL RETURNING gate_id",
        (at, job_id),
    ).fetchall()
    return [int(gate_id) for (gate_id,) in rows]


def close_idle(tx: Tx, job_id: int, gate_id: int) -> bool:
    """Mark the job's open gate `gate_id` as the one waiting on which closed the job idle;
    False when it is not open, or was marked already."""
    cursor = tx.execute(
        "UPDATE gates SET closed_idle_at = ? WHERE gate_id = ? AND job_id = ?"
        " AND closed_idle_at IS NULL AND answer IS NULL",
        (now(), gate_id, job_id),
    )
    return cursor.rowcount == 1


def rehash_job(tx: Tx, job_id: int, *, content: JobContent) -> list[int]:
    """Hash every open gate of the job again (the issue text it pins changed); the gates
    whose hash changed, which have that hash from now (`hashed_at`)."""
    title, brief, base = content(tx, job_id)
    rows = tx.execute(
        "SELECT gate_id, kind, question, options, pinned, content_hash FROM gates"
        " WHERE job_id = ? AND answer IS NULL AND closed_at IS NULL ORDER BY gate_id",
        (job_id,),
    ).fetchall()
    changed: list[int] = []
    for gate_id, kind, question, options, pinned, digest in rows:
        fresh = content_hash(
            kind=kind,
            question=question,
            options=tuple(json.loads(options or "[]")),
            title=title,
            brief=brief,
            base=base,
            pinned=json.loads(pinned) if pinned else None,
        )
        if fresh != digest:
            tx.execute(
                "UPDATE gates SET content_hash = ?, hashed_at = ? WHERE gate_id = ?",
                (fresh, now(), gate_id),
            )
            changed.append(int(gate_id))
    return changed


def advise(tx: Tx, gate_id: int, *, text: str, advisor: str, kinds: GateKinds) -> Gate:
    """An advisor's reply to an open gate: handed to the asking agent as advice (read when
    the decider's answer wakes it); the gate stays open."""
    gate = get(tx, gate_id)
    if gate.answer is not None:
        raise GateClosedError(f"gate {gate_id} was already answered by {gate.answered_by!r}")
    kind = kinds.get(gate.kind)
    if gate.engine_made and kind is not None and not kind.wakes_asker:
        return gate  # nobody to hand it to: the decider reads it on the issue, beside the gate
    deliver(
        tx,
        gate.conversation_id,
        kind=InboxKind.HUMAN,
        sender=advisor,
        content={"text": f"{advisor} (an advisor, not the decider) on question {gate_id}: {text}"},
    )
    return gate


def reassign(tx: Tx, gate_id: int, *, decider: str) -> Gate:
    """Hand an open gate to another decider (`/decider @login`)."""
    gate = get(tx, gate_id)
    if gate.answer is not None:
        raise GateClosedError(f"gate {gate_id} was already answered by {gate.answered_by!r}")
    tx.execute("UPDATE gates SET decider = ? WHERE gate_id = ?", (decider, gate_id))
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


_COLUMNS = (
    "SELECT gate_id, job_id, conversation_id, call_id, kind, question, options, asked_by,"
    " answer, answered_by, answered_via, comment_ref, answer_ref, asked_at,"
    " coalesce(content_hash, ''), coalesce(hashed_at, asked_at), decider, answered_at,"
    " closed_at, closed_idle_at, payload FROM gates"
)


def get(tx: Tx, gate_id: int) -> Gate:
    """One gate."""
    row = tx.execute(f"{_COLUMNS} WHERE gate_id = ?", (gate_id,)).fetchone()
    if row is None:
        raise BusError(f"no gate {gate_id}")
    return _gate(row)


def of_kind(tx: Tx, job_id: int, kind: str, *, asked_by: str | None = None) -> list[Gate]:
    """The job's gates of `kind` (of those `asked_by` asked, when given), oldest first."""
    rows = tx.execute(
        f"{_COLUMNS} WHERE job_id = ? AND kind = ? AND (? IS NULL OR asked_by = ?)"
        " ORDER BY gate_id",
        (job_id, kind, asked_by, asked_by),
    ).fetchall()
    return [_gate(row) for row in rows]


def _gate(row: tuple[Any, ...]) -> Gate:
    gate_id, job_id, conversation_id, call_id, kind, question, options, *answered = row
    asked_by, answer_text, answered_by, answered_via, comment_ref, answer_ref, *times = answered
    asked_at, digest, hashed_at, decider, answered_at, closed_at, closed_idle_at, payload = times
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
        str(digest),
        float(hashed_at),
        decider,
        answered_at,
        closed_at,
        closed_idle_at,
        json.loads(payload) if payload else {},
    )


def open_counts(tx: Tx, job_id: int | None = None) -> dict[int, int]:
    """Per job (or of one job), how many of its gates are open; jobs with none are absent."""
    rows = tx.execute(
        "SELECT job_id, count(*) FROM gates WHERE answer IS NULL AND closed_at IS NULL"
        " AND (? IS NULL OR job_id = ?) GROUP BY job_id",
        (job_id, job_id),
    ).fetchall()
    return {int(job): int(count) for job, count in rows}


def open_gates(tx: Tx, job_id: int | None = None) -> list[Gate]:
    """Unanswered gates, oldest first (of one job, or all)."""
    ids = tx.execute(
        "SELECT gate_id FROM gates WHERE answer IS NULL AND closed_at IS NULL"
        " AND (? IS NULL OR job_id = ?)"
        " ORDER BY gate_id",
        (job_id, job_id),
    ).fetchall()
    return [get(tx, gate_id) for (gate_id,) in ids]


# Named for the modules whose own SQL named this table (issue 32).


def of_ids(tx: Tx, gate_ids: Sequence[int]) -> dict[int, Gate]:
    """The gates of `gate_ids` that exist, by id."""
    rows = tx.execute(
        f"{_COLUMNS} WHERE gate_id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(gate_ids)),),
    ).fetchall()
    return {gate.gate_id: gate for gate in map(_gate, rows)}


def of_job(tx: Tx, job_id: int) -> list[Gate]:
    """Every gate of the job, oldest first."""
    rows = tx.execute(f"{_COLUMNS} WHERE job_id = ? ORDER BY gate_id", (job_id,)).fetchall()
    return [_gate(row) for row in rows]


def last_answered_at(tx: Tx, job_id: int) -> float | None:
    """When a gate of the job was last answered (None: none was)."""
    row = tx.execute("SELECT max(answered_at) FROM gates WHERE job_id = ?", (job_id,)).fetchone()
    return None if row is None else row[0]
