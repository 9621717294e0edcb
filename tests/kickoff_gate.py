"""A gate kind no shipped feature asks, whole in this one module: the kickoff.

Before the office manager's first send of a job reaches the project lead, the decider
confirms the kickoff; approved, the held sends go; any other answer comes back to the office
manager as each send's error. tests/test_gate_kinds.py registers it beside the standard
features (`register`), as the composition root registers theirs, and edits nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from functools import partial

from orchestrator.bus import gates
from orchestrator.bus import held as held_calls
from orchestrator.bus.dispatch import SEND
from orchestrator.bus.extensions import Extensions
from orchestrator.bus.gates import AskIntent, Gate
from orchestrator.bus.sends import SendIntent, send
from orchestrator.bus.transactions import ConversationRow, conversation
from orchestrator.core.gate_kinds import GateKind
from orchestrator.core.messages import job_conversation_id
from orchestrator.store.sqlite import Tx

KIND = GateKind(
    "kickoff",
    "always",
    title="shall the job start now?",
    about="whether the job starts now",
    proxy_alone=False,  # only where a project's proxy.allow lists it
)
QUESTION = "The job is ready to start: the office manager hands it to the project lead."


def register(extensions: Extensions) -> None:
    """The kickoff: its kind, its answer carried out, and the hold on the first sends."""
    extensions.gate_kind(KIND, settle=settle)
    extensions.hold(SEND, partial(hold, extensions))


def hold(
    extensions: Extensions, tx: Tx, row: ConversationRow, sends: Sequence[SendIntent]
) -> int | None:
    """Hold the office manager's first sends of a job at the kickoff, once per job."""
    job_id = row.job_id
    if job_id is None or row.conversation_id != job_conversation_id(job_id):
        return None
    if gates.mode(tx, job_id, KIND) == "never" or _asked(tx, job_id):
        return None
    intent = AskIntent(f"kickoff:{sends[0].call_id}", QUESTION, ("yes", "no"), kind=KIND.name)
    return gates.ask_engine(
        tx,
        job_id=job_id,
        conversation_id=row.conversation_id,
        intent=intent,
        content=extensions.content,
        payload={"sends": [asdict(s) for s in sends]},
    )


def settle(tx: Tx, gate: Gate) -> tuple[str, ...]:
    """Approved, the held sends go; otherwise each comes back as its error."""
    row = conversation(tx, gate.conversation_id)
    held = [SendIntent(**kept) for kept in gate.payload.get("sends", [])]
    if not gate.approved:
        text = f"send: the decider did not kick the job off ({gate.answer!r})"
        held_calls.refuse(tx, row, [intent.call_id for intent in held], text)
        return (row.conversation_id,)
    return held_calls.release(tx, row, [(i.call_id, partial(send, tx, row, i)) for i in held])


def _asked(tx: Tx, job_id: int) -> bool:
    found = tx.execute(
        "SELECT 1 FROM gates WHERE job_id = ? AND kind = ?", (job_id, KIND.name)
    ).fetchone()
    return found is not None
