"""The protected-path gate: a change to protected paths put to the decider before any push.

At delivery (jobs/protection.py), a job branch that changes a protected path
(core/protected.py) is pushed only under an approved `protected-path` gate that pins
exactly what is pushed: the base, the head commit, the changed files and the diff's
sha256. The gate is asked on the job's root conversation, once per pinned content, so a
sync may run any number of times. Approved, the next sync pushes that head and nothing
later; a branch that moved on since is asked about again (that approval is stale). Any
other answer ends the job with nothing pushed. The answer changes nothing in the store:
the driver acts on it at the job's next sync, and no agent wakes (no model call is spent).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.bus import gates
from orchestrator.bus.extensions import Extensions
from orchestrator.bus.gates import AskIntent, Gate
from orchestrator.core.gate_kinds import GateKind
from orchestrator.core.messages import job_conversation_id
from orchestrator.jobs import revisions
from orchestrator.store.sqlite import Tx
from orchestrator.workspace.changes import BranchChange, ChangedFile

KIND = GateKind(
    "protected-path",
    "always",
    title="the change touches protected paths",
    about="a change touching protected paths",
    proxy_alone=False,
    wakes_asker=False,  # no agent waits on it: it parks the job's own conversation
)
OPTIONS = ("yes", "no")
FILES_SHOWN = 30  # protected files a question lists by name
DIFF_SHOWN = 3000  # characters of the protected files' diff a question shows


@dataclass(frozen=True)
class Pins:
    """What an approval covers: the base, the head, the changed files, the diff's sha256."""

    base: str
    head: str
    files: tuple[str, ...]
    diff_sha256: str

    @classmethod
    def of(cls, change: BranchChange) -> Pins:
        """The pins of a branch's change."""
        files = tuple(f"{f.status} {f.label}" for f in change.files)
        return cls(change.base, change.head, files, change.diff_sha256)

    @classmethod
    def stored(cls, payload: Mapping[str, Any]) -> Pins:
        """The pins a protected-path gate's payload keeps (`as_dict`)."""
        files = tuple(str(f) for f in payload["files"])
        return cls(str(payload["base"]), str(payload["head"]), files, str(payload["diff"]))

    def as_dict(self) -> dict[str, Any]:
        """As pinned and kept in the payload."""
        return {
            "base": self.base,
            "head": self.head,
            "files": list(self.files),
            "diff": self.diff_sha256,
        }


@dataclass(frozen=True)
class Cleared:
    """Push: exactly `head` (None: the branch as it is, when nothing was checked)."""

    head: str | None


@dataclass(frozen=True)
class Held:
    """Wait for the decider: the gate is open (`opened` when this call asked it)."""

    gate_id: int
    opened: bool
    question: str = ""


@dataclass(frozen=True)
class Refused:
    """The decider did not approve: nothing is pushed, the job ends."""

    gate: Gate


Verdict = Cleared | Held | Refused


def decide(
    tx: Tx,
    job_id: int,
    change: BranchChange,
    protected: list[ChangedFile],
    diff: tuple[str, bool],
) -> Verdict:
    """What delivery does with a change that touches `protected` files: push under an
    approval of exactly this change, wait on the open gate, end on a refusal, or else ask
    (`diff`: the protected files' diff, and whether it was cut)."""
    pins = Pins.of(change)
    asked = gates.of_kind(tx, job_id, KIND.name, asked_by=gates.ENGINE)
    if any(g.approved and Pins.stored(g.payload) == pins for g in asked):
        return Cleared(change.head)
    if (held := waiting(asked)) is not None:
        return held
    answered = [g for g in asked if g.answer is not None]
    if answered and not answered[-1].approved:
        return Refused(answered[-1])
    stale = answered[-1] if answered else None
    text = question(change, protected, diff, stale=stale)
    payload = {**pins.as_dict(), "protected": [f.label for f in protected]}
    return ask(tx, job_id, KIND, change.head, text, payload=payload, pinned=pins.as_dict())


def waiting(asked: list[Gate]) -> Held | None:
    """Held on the first of the `asked` push gates still open, if one is."""
    open_ = [g for g in asked if g.answer is None and g.closed_at is None]
    return Held(open_[0].gate_id, opened=False) if open_ else None


def ask(
    tx: Tx,
    job_id: int,
    kind: GateKind,
    head: str,
    text: str,
    *,
    payload: Mapping[str, Any],
    pinned: Mapping[str, Any],
) -> Held:
    """Ask the job's decider (a gate of `kind` the engine asks) whether to push `head`."""
    gate_id = gates.ask_engine(
        tx,
        job_id=job_id,
        conversation_id=job_conversation_id(job_id),
        content=revisions.job_content,
        intent=AskIntent(f"{kind.name}:{head}", text, OPTIONS, kind=kind.name),
        payload=payload,
        pinned=pinned,
    )
    return Held(gate_id, opened=True, question=text)


def question(
    change: BranchChange,
    protected: list[ChangedFile],
    diff: tuple[str, bool],
    *,
    stale: Gate | None = None,
) -> str:
    """The question: the protected files (and how many others), the head commit, the diff
    stat, and the protected files' diff when short (cut when not)."""
    others = len(change.files) - len(protected)
    lines = [
        f"The change touches protected paths: {counted(len(protected), 'protected file')} "
        f"and {counted(others, 'other file')} changed."
    ]
    if stale is not None:
        lines.append(stale_note(stale))
    lines.append(
        f"\nHead commit: {change.head} (the job started from {change.base}). Approving "
        "pushes exactly this commit; anything committed later is asked about again."
    )
    listed = [_file_line(f) for f in protected[:FILES_SHOWN]]
    if len(protected) > FILES_SHOWN:
        listed.append(f"... and {len(protected) - FILES_SHOWN} more protected files")
    fenced = revisions.fenced("\n".join(listed), "text")
    lines += ["\nProtected files:", fenced, f"\nDiff: {change.stat()}."]
    text, cut = diff
    if text:
        note = f" (cut at {DIFF_SHOWN} characters; there is more)" if cut else ""
        shown = "\n".join(printable(line, keep="\t") for line in text.splitlines())
        lines += [f"\nThe protected files' diff{note}:", revisions.fenced(shown, "diff")]
    return "\n".join(lines)


def refusal(gate: Gate) -> str:
    """The job's result when its decider did not approve the change to protected paths."""
    who = "the proxy for the decider" if gate.answered_via == "proxy" else gate.answered_by
    files = [str(f) for f in gate.payload.get("protected", [])]
    named = ", ".join(printable(f) for f in files[:5]) + (" ..." if len(files) > 5 else "")
    return (
        f"The decider did not approve the change to protected paths ({named}): {who} "
        f"answered {gate.answer!r}. Nothing was pushed and no pull request was opened."
    )


def register(extensions: Extensions) -> None:
    """The protected-path gate: its kind, and its answer carried out."""
    extensions.gate_kind(KIND, settle=settle)


def settle(tx: Tx, gate: Gate) -> tuple[str, ...]:
    """The answer is acted on at the job's next sync (pushed, or the job ended): nobody
    has new work."""
    return ()


def _file_line(changed: ChangedFile) -> str:
    counts = "binary" if changed.added is None else f"+{changed.added} -{changed.deleted}"
    return f"{changed.status}  {printable(changed.label)}  ({counts})"


def stale_note(stale: Gate) -> str:
    """Why a push gate is asked again: the approval `stale` gave is for an older head."""
    before = str(stale.payload.get("head", ""))[:12]
    return (
        f"\nAsked again: question {stale.gate_id} approved commit {before}, but the job "
        "branch has a new head since, so that approval is stale."
    )


def printable(text: str, *, keep: str = "") -> str:
    """Text an agent chose (a file name, a diff line) with anything unprintable but `keep`
    escaped: a newline, a terminal escape, a bidi mark."""
    return "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in text)


def counted(number: int, what: str) -> str:
    """`number` of `what`, plural unless one: "1 file", "3 files"."""
    return f"{number} {what}{'' if number == 1 else 's'}"
