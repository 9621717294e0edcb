"""What a job's issue says, edit by edit, and the `intent` gate an edit after the label opens.

A job works to the text its issue had when it started (its `original` revision). An edit
seen later parks the whole job at an intent gate showing the difference (a unified diff of
the title and text, trimmed): while it is open no conversation of the job makes a model call
(bus/runnable.py, gates.editing). It is asked whatever the job's intent mode says, since otherwise
the job would work on text its author has changed. The job's other open gates are hashed
again at once with the edited text (`job_content`), so an approval written before the
edit is stale, as it is for anything an edit changes. Approved, the job works to the new
text and the lead is told, with the diff. Rejected, the job goes on with the text it had
(its gates hashed again with it), and the lead is not told.

The same edit seen again (a redelivery) opens no second gate; a newer edit while one is open
replaces it (the new gate shows the latest text against the text the job works to), and an
edit back to that text closes it. An edit older than one recorded changes nothing.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Literal

from orchestrator.bus import gates
from orchestrator.bus import jobs as job_rows
from orchestrator.bus import transactions as txn
from orchestrator.bus.extensions import Extensions
from orchestrator.bus.gates import AskIntent, Gate
from orchestrator.bus.runnable import runnable
from orchestrator.bus.transactions import deliver, listed
from orchestrator.core.errors import BusError
from orchestrator.core.messages import InboxKind, job_conversation_id
from orchestrator.store.sqlite import Tx, now
from orchestrator.workspace import spaces

EDIT_KIND = "intent"  # an edit is put to the decider as an intent gate (jobs/intent_gate.py)
EDIT_CALL = "edit:"  # an edit's gate has the call id `edit:<revision id>`
OPTIONS = ("yes", "no")
QUESTION = (
    "The issue was edited after the job started, so nothing runs until you answer. Approve "
    "to go on with the new text; reject to keep working to the text the job has."
)
SHOWN_LINES = 80  # of the diff, on the gate
SHOWN_CHARS = 6000
TOLD_CHARS = 20_000  # of the diff, in the lead's message
RevisionState = Literal["original", "asked", "approved", "rejected", "replaced", "reverted"]
EditOutcome = Literal["asked", "seen", "unchanged", "reverted", "older", "ended"]


@dataclass(frozen=True)
class IssueText:
    """An issue's title and text (its body)."""

    title: str
    body: str


@dataclass(frozen=True)
class Revision:
    """One text of a job's issue, as recorded."""

    revision_id: int
    text: IssueText
    state: RevisionState
    edited_by: str | None
    edited_at: float | None  # when the forge says it was edited, if it said
    gate_id: int | None


@dataclass(frozen=True)
class Edited:
    """What an edit did: `asked` (gate `gate_id`), `seen` before (its gate, while open),
    `unchanged` (the text the job works to), `reverted` (back to that text: the open gate
    closed), `older` than an edit recorded, or nothing because the job `ended`; `replaced`
    names the open gates it closed."""

    outcome: EditOutcome
    gate_id: int | None = None
    replaced: tuple[int, ...] = ()


def record_original(tx: Tx, job_id: int, text: IssueText) -> bool:
    """Keep the text the job starts from, once; False when the job has revisions already."""
    if tx.execute("SELECT 1 FROM issue_revisions WHERE job_id = ?", (job_id,)).fetchone():
        return False
    _insert(tx, job_id, text, "original", by=None, edited_at=None)
    return True


def revisions(tx: Tx, job_id: int) -> list[Revision]:
    """The job's issue texts, oldest first."""
    rows = tx.execute(
        "SELECT revision_id, title, body, state, edited_by, edited_at, gate_id"
        " FROM issue_revisions WHERE job_id = ? ORDER BY revision_id",
        (job_id,),
    ).fetchall()
    return [
        Revision(rid, IssueText(title, body), state, by, at, gate_id)
        for rid, title, body, state, by, at, gate_id in rows
    ]


def works_to(known: list[Revision]) -> IssueText | None:
    """The text the job works to: its latest approved edit, else its original."""
    kept = [r for r in known if r.state in ("original", "approved")]
    return kept[-1].text if kept else None


def edited(
    tx: Tx,
    job_id: int,
    text: IssueText,
    *,
    by: str,
    edited_at: float | None = None,
    before: IssueText | None = None,
) -> Edited:
    """An edit of the job's issue: ask the decider about it (see the module).

    `before` is the text the forge says the issue had before this edit; it stands in for
    the job's original when none was recorded (a job started before revisions were kept).
    """
    row = job_rows.get(tx, job_id)
    if row is None:
        raise BusError(f"no job {job_id}")
    if row.state != "active":
        return Edited("ended")
    known = revisions(tx, job_id)
    if edited_at is not None and any((r.edited_at or 0.0) > edited_at for r in known):
        return Edited("older")
    pending = next((r for r in known if r.state == "asked"), None)
    if pending is not None and pending.text == text:
        return Edited("seen", pending.gate_id)
    if edited_at is not None and any(r.text == text and r.edited_at == edited_at for r in known):
        return Edited("seen")  # the same edit, delivered again after its gate was answered
    base = works_to(known) or before or IssueText(row.title, "")
    if not known:
        _insert(tx, job_id, base, "original", by=None, edited_at=None)
    replaced = _replace(tx, pending, why="a later edit of the issue replaced it") if pending else ()
    if text == base:
        if not replaced:
            return Edited("unchanged")
        _insert(tx, job_id, text, "reverted", by=by, edited_at=edited_at)
        gates.rehash_job(tx, job_id, content=job_content)
        return Edited("reverted", replaced=replaced)
    revision_id = _insert(tx, job_id, text, "asked", by=by, edited_at=edited_at)
    shown = diff(base, text, by=by, lines=SHOWN_LINES, chars=SHOWN_CHARS)
    gate_id = gates.ask_engine(
        tx,
        job_id=job_id,
        conversation_id=job_conversation_id(job_id),
        intent=AskIntent(f"{EDIT_CALL}{revision_id}", f"{QUESTION}\n\n{shown}", OPTIONS, EDIT_KIND),
        content=job_content,
        payload={"revision": revision_id, "diff": shown, "edited_by": by},
        pinned={"title": text.title, "body": text.body},
    )
    tx.execute(
        "UPDATE issue_revisions SET gate_id = ? WHERE revision_id = ?", (gate_id, revision_id)
    )
    gates.rehash_job(tx, job_id, content=job_content)
    return Edited("asked", gate_id, replaced)


def register(extensions: Extensions) -> None:
    """What every gate of a job pins of it: the issue's text as the job works to it."""
    extensions.pin_content(job_content)


def job_content(tx: Tx, job_id: int | None) -> tuple[str, str, str]:
    """The job's title, brief and base commit, for its gates' hashes (bus/gates.py's
    JobContent). The brief is its first message until its issue is edited; from then on, the
    issue's latest text unless the decider rejected it (an edit awaiting their word counts:
    what was approved before it is stale), else the latest text they approved."""
    if job_id is None or job_rows.get(tx, job_id) is None:
        return "", "", ""
    base = spaces.base_of(tx, job_id) or ""
    revised = tx.execute(
        "SELECT title, body FROM issue_revisions WHERE job_id = ?"
        " AND state IN ('approved', 'asked') ORDER BY revision_id DESC LIMIT 1",
        (job_id,),
    ).fetchone()
    if revised is not None:
        return str(revised[0]), str(revised[1]), base
    title, brief, _ = gates.job_content(tx, job_id)
    return title, brief, base


def waiting(tx: Tx, job_id: int) -> int | None:
    """The open gate of an edit of the job's issue, if one is open (the job is held)."""
    edits = (g.gate_id for g in gates.open_gates(tx, job_id) if g.call_id.startswith(EDIT_CALL))
    return next(edits, None)


def is_edit(gate: Gate) -> bool:
    """Whether the gate asks about an edit of the job's issue (not a restatement)."""
    return gate.engine_made and gate.call_id.startswith(EDIT_CALL)


def settle(tx: Tx, gate: Gate) -> tuple[str, ...]:
    """Act on the answer to an edit's gate (see the module); who now has work."""
    job_id = gate.job_id
    if job_id is None:
        raise BusError(f"gate {gate.gate_id} asks about an edit of no job")
    revision_id = int(gate.payload["revision"])
    if not gate.approved:
        _set_state(tx, revision_id, "rejected")
        gates.rehash_job(tx, job_id, content=job_content)  # back to the text it works to
        return tuple(runnable(tx, job_id))
    old = works_to(revisions(tx, job_id))
    _set_state(tx, revision_id, "approved")
    new = works_to(revisions(tx, job_id))
    assert new is not None  # just approved
    job_rows.set_title(tx, job_id, new.title)
    told = _tell(tx, job_id, gate, diff(old or new, new, by=None, lines=None, chars=TOLD_CHARS))
    return tuple(dict.fromkeys((*told, *runnable(tx, job_id))))


def diff(old: IssueText, new: IssueText, *, by: str | None, lines: int | None, chars: int) -> str:
    """The change from `old` to `new` as a unified diff of the title line and the text,
    cut to at most `lines` lines and `chars` characters (a last line says what was left)."""
    changed = list(
        difflib.unified_diff(
            _lines(old),
            _lines(new),
            fromfile="the text the job works to",
            tofile=f"as edited by {by}" if by else "as edited",
            lineterm="",
            n=2,
        )
    )
    kept: list[str] = []
    size = 0
    for line in changed:
        if (lines is not None and len(kept) >= lines) or size + len(line) + 1 > chars:
            kept.append(f"… {len(changed) - len(kept)} more line(s) of the diff not shown")
            break
        kept.append(line)
        size += len(line) + 1
    return "\n".join(kept)


def fenced(text: str, info: str = "") -> str:
    """`text` in a code fence longer than any run of backticks in it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def _lines(text: IssueText) -> list[str]:
    return [f"Title: {text.title}", "", *text.body.splitlines()]


def _insert(
    tx: Tx,
    job_id: int,
    text: IssueText,
    state: RevisionState,
    *,
    by: str | None,
    edited_at: float | None,
) -> int:
    (revision_id,) = tx.execute(
        "INSERT INTO issue_revisions (job_id, title, body, state, edited_by, edited_at,"
        " recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING revision_id",
        (job_id, text.title, text.body, state, by, edited_at, now()),
    ).fetchone()
    return int(revision_id)


def _set_state(tx: Tx, revision_id: int, state: RevisionState) -> None:
    tx.execute("UPDATE issue_revisions SET state = ? WHERE revision_id = ?", (state, revision_id))


def _replace(tx: Tx, pending: Revision, *, why: str) -> tuple[int, ...]:
    """Close the gate of an edit a later one supersedes; the gate, if it was open."""
    _set_state(tx, pending.revision_id, "replaced")
    if pending.gate_id is None or not gates.close(tx, pending.gate_id, why=why):
        return ()
    return (pending.gate_id,)


def _tell(tx: Tx, job_id: int, gate: Gate, shown: str) -> tuple[str, ...]:
    """Tell whoever is working on the job's request (its lead, else the office manager
    before it has briefed one) that the issue changed; nobody once the job's work is done."""
    root = job_conversation_id(job_id)
    lead = txn.first_open_child(tx, root)
    office = listed(tx, root)
    if lead is not None:
        told = lead
    elif office is not None and office.active and office.result is None:
        told = root
    else:
        return ()
    said = (
        f"The issue was edited; the decider ({gate.answered_by}) approved working to the new "
        f"text. The change:\n\n{fenced(shown, 'diff')}"
    )
    deliver(tx, told, kind=InboxKind.HUMAN, sender=str(gate.answered_by), content={"text": said})
    return (told,)
