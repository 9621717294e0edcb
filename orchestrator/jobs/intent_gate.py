"""The intent gate: the office manager's restatement of the issue, put to the decider first.

While a job's `intent` mode is not `never`, the office manager's first send of the job (its
brief to the project lead: what it understood the issue to ask) does not go out: the engine
asks the decider about the brief, holding the sends, and the office manager parks. What is
approved is pinned: the gate's hash covers the brief, who it goes to and the issue's title
and text, and approving sends exactly the held briefs. Any other answer comes back as each
send's error, with the decider's words, so the office manager restates and sends again (a
new intent gate). Once a restatement of the job is approved, later sends go at once.

An `intent` gate the engine opens because the issue was edited is settled by revisions.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from orchestrator.bus import gates
from orchestrator.bus import held as held_calls
from orchestrator.bus.dispatch import SEND
from orchestrator.bus.extensions import Extensions
from orchestrator.bus.gates import AskIntent, Gate
from orchestrator.bus.sends import SendIntent, send
from orchestrator.bus.transactions import ConversationRow
from orchestrator.core.gate_kinds import GateKind
from orchestrator.core.messages import job_conversation_id
from orchestrator.jobs import revisions
from orchestrator.store.sqlite import Tx

KIND = GateKind(
    "intent",
    "never",
    title="is this what the issue asks for?",
    about="the office manager's restatement of the issue, before planning",
)
RESTATEMENT_CALL = "intent:"  # a restatement's gate has the call id `intent:<first send's id>`
OPTIONS = ("yes", "no")


def register(extensions: Extensions) -> None:
    """The intent gate: its kind, its answer carried out (an edit's too), and the hold on
    the office manager's first sends."""
    extensions.gate_kind(KIND, settle=settle)
    extensions.hold(SEND, hold)


def approved(tx: Tx, job_id: int) -> bool:
    """Whether a restatement of the job's issue was approved."""
    return any(
        gate.approved and gate.call_id.startswith(RESTATEMENT_CALL)
        for gate in gates.of_kind(tx, job_id, KIND.name, asked_by=gates.ENGINE)
    )


def restatement(sends: Sequence[SendIntent]) -> str:
    """What the decider reads: the brief, or with several sends each one and its recipient."""
    if len(sends) == 1:
        return sends[0].brief
    return "\n\n".join(f"To {s.recipient}:\n\n{s.brief}" for s in sends)


def hold(tx: Tx, row: ConversationRow, sends: Sequence[SendIntent]) -> int | None:
    """Open the intent gate holding the office manager's `sends` if the job's restatement
    still needs approval; the gate's id, or None when they may go now."""
    job_id = row.job_id
    if job_id is None or not sends or row.conversation_id != job_conversation_id(job_id):
        return None  # only the office manager, at the job's root, restates the issue
    if gates.mode(tx, job_id, KIND) == "never" or approved(tx, job_id):
        return None
    intent = AskIntent(
        f"{RESTATEMENT_CALL}{sends[0].call_id}", restatement(sends), OPTIONS, kind=KIND.name
    )
    return gates.ask_engine(
        tx,
        job_id=job_id,
        conversation_id=row.conversation_id,
        content=revisions.job_content,
        intent=intent,
        payload={"sends": [asdict(s) for s in sends]},
        pinned={"to": [s.recipient for s in sends], "continues": [s.context_id for s in sends]},
    )


# The error each held send gets back when the decider does not approve the restatement.
RESTATE = (
    "send: the decider did not approve this restatement of the issue ({said}). Restate "
    "what the issue asks as they said, and send again; the new brief is put to them."
)


def settle(tx: Tx, gate: Gate) -> tuple[str, ...]:
    """Act on an intent gate's answer: for a restatement, approved, the held sends go out;
    otherwise each comes back to the office manager as an error with the decider's words.
    An edit's gate is revisions.py's. Who now has work."""
    if revisions.is_edit(gate):
        return revisions.settle(tx, gate)
    sends = [SendIntent(**kept) for kept in gate.payload.get("sends", [])]
    return held_calls.settle(tx, gate, sends, send, RESTATE)
