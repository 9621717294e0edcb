"""The secret gate: a job branch whose change carries a secret is put to the decider before
any push, and one that carries a secret value the App holds is never pushed.

At delivery (jobs/secret_check.py) the job's change against its base is scanned
(core/secret_scan.py). A finding opens a `secret` gate on the job's root conversation,
pinned like the protected-path gate to the base, the head and what was found, naming each
file and line with the secret masked. What answering does depends on what was found:

- **patterns only** (an AWS key id, a GitHub token, a PEM header ... which may be a test
  fixture or documentation, or a diff too large to scan whole): approving pushes exactly
  the head that was scanned; a later head is scanned and asked about again; any other
  answer ends the job with nothing pushed;
- **an exact value the engine holds** (the model's key, the App's key, the webhook secret, a
  token, an operator's setup secret): nothing can push it. The question says so, and every
  answer, an approval too, ends the job with nothing pushed. The decider is asked rather
  than told so that a person is called to it: such a value in an agent's work means it
  reached an agent, and it should be rotated.

The proxy never answers this gate (`GateKind.proxy_never`): not even a project's
`proxy.allow` lets it. Mode `never` pushes pattern findings without a question; it does not
cover values. The answer changes nothing in the store: the driver acts on it at the job's
next sync, and no agent wakes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.bus import gates
from orchestrator.bus.extensions import Extensions
from orchestrator.bus.gates import Gate
from orchestrator.core.gate_kinds import GateKind
from orchestrator.core.secret_scan import Scan
from orchestrator.jobs import revisions
from orchestrator.jobs.protected_gate import (
    Cleared,
    Held,
    ask,
    counted,
    printable,
    settle,
    stale_note,
    waiting,
)
from orchestrator.store.sqlite import Tx

KIND = GateKind(
    "secret",
    "always",
    title="the change carries a secret",
    about="a change in which a secret or a credential pattern was found",
    proxy_alone=False,
    proxy_never=True,  # a person looks at every one: no project can hand it to the proxy
    wakes_asker=False,  # no agent waits on it: it parks the job's own conversation
)
FINDINGS_SHOWN = 30  # findings a question lists


@dataclass(frozen=True)
class Pins:
    """What an approval covers: the base, the head, and what the scan found there."""

    base: str
    head: str
    found: str  # sha256 of the findings as listed
    values: bool  # an exact value the engine holds is among them: never pushable

    @classmethod
    def of(cls, base: str, head: str, scanned: Scan) -> Pins:
        """The pins of a scan of `head` against `base`."""
        listed = "\n".join([*map(str, scanned.findings), scanned.unscanned or ""])
        digest = hashlib.sha256(listed.encode()).hexdigest()
        return cls(base, head, digest, bool(scanned.values))

    @classmethod
    def stored(cls, payload: Mapping[str, Any]) -> Pins:
        """The pins a secret gate's payload keeps (`as_dict`)."""
        return cls(
            str(payload["base"]),
            str(payload["head"]),
            str(payload["found"]),
            bool(payload["values"]),
        )

    def as_dict(self) -> dict[str, Any]:
        """As pinned and kept in the payload."""
        return {"base": self.base, "head": self.head, "found": self.found, "values": self.values}


@dataclass(frozen=True)
class Stopped:
    """Nothing is pushed and the job ends: `result` says why."""

    result: str


SecretVerdict = Cleared | Held | Stopped


def decide(tx: Tx, job_id: int, *, base: str, head: str, scanned: Scan) -> SecretVerdict:
    """What delivery does with a scan that found something: push `head` under an approval
    of exactly it (patterns only), wait on the open gate, stop on an answer, or else ask."""
    pins = Pins.of(base, head, scanned)
    asked = gates.of_kind(tx, job_id, KIND.name, asked_by=gates.ENGINE)
    if (held := waiting(asked)) is not None:
        return held
    answered = [g for g in asked if g.answer is not None]
    if answered:
        last = answered[-1]
        if not last.approved or Pins.stored(last.payload).values:
            return Stopped(refusal(last))
        if Pins.stored(last.payload) == pins:
            return Cleared(head)
    stale = answered[-1] if answered else None
    text = question(scanned, head=head, base=base, stale=stale)
    payload = {**pins.as_dict(), "findings": [str(f) for f in scanned.findings[:FINDINGS_SHOWN]]}
    return ask(tx, job_id, KIND, head, text, payload=payload, pinned=pins.as_dict())


def question(scanned: Scan, *, head: str, base: str, stale: Gate | None = None) -> str:
    """The question: each finding by file and line with the secret masked, what the scan
    could not look at, and what approving does."""
    values = scanned.values
    lines = [f"Before pushing, the change was scanned for secrets: {_found(scanned)}."]
    if stale is not None:
        lines.append(stale_note(stale))
    shown = [printable(str(f)) for f in scanned.findings[:FINDINGS_SHOWN]]
    hidden = len(scanned.findings) - len(shown) + scanned.more
    if hidden:
        shown.append(f"... and {hidden} more")
    if scanned.unscanned is not None:
        shown.append(f"not scanned: {scanned.unscanned}")
    lines += ["", revisions.fenced("\n".join(shown), "text")]
    if values:
        lines.append(
            f"\nHead commit: {head} (the job started from {base}). It holds "
            f"{counted(len(values), 'secret value')} the App itself holds, so it is never "
            "pushed: whatever the answer, the job ends with nothing pushed. The value reached "
            "an agent: rotate it."
        )
    else:
        lines.append(
            f"\nHead commit: {head} (the job started from {base}). Approving pushes exactly "
            "this commit with these lines as they are (say so only if none is a real "
            "credential); anything committed later is scanned and asked about again. Any "
            "other answer ends the job with nothing pushed."
        )
    return "\n".join(lines)


def refusal(gate: Gate) -> str:
    """The job's result when its secret gate ended it."""
    found = [str(f) for f in gate.payload.get("findings", [])]
    named = "; ".join(printable(f) for f in found[:3]) + (" ..." if len(found) > 3 else "")
    if gate.payload.get("values"):
        why = "it holds a secret value the App holds, which is never pushed"
    else:
        who = "the proxy for the decider" if gate.answered_via == "proxy" else gate.answered_by
        why = f"{who} answered {gate.answer!r}"
    return (
        f"Secrets were found in the job's work ({named}): {why}. Nothing was pushed and "
        "no pull request was opened."
    )


def register(extensions: Extensions) -> None:
    """The secret gate: its kind, and its answer carried out."""
    extensions.gate_kind(KIND, settle=settle)


def _found(scanned: Scan) -> str:
    values, total = len(scanned.values), len(scanned.findings) + scanned.more
    parts = []
    if values:
        parts.append(counted(values, "secret value") + " the App holds")
    if total - values:
        parts.append(counted(total - values, "credential pattern"))
    if scanned.unscanned is not None:
        parts.append("a part it could not scan")
    return " and ".join(parts) or "nothing"
