"""A decider's override of an answer the proxy gave alone: recorded, and sent as a correction.

The agent that asked woke on the proxy's answer and went on, so the answer cannot be taken
back; the override is recorded as the decider's answer (a disagreement, unless it is the
answer the proxy gave) and, in the same transaction, delivered to the conversation that
asked as a message from the decider, or to the job's own conversation if that one ended;
once the job has ended, to nobody (the edge says so).
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.bus import gates
from orchestrator.bus import jobs as job_rows
from orchestrator.bus.transactions import deliver, listed
from orchestrator.core.errors import NotProxyAnsweredError
from orchestrator.core.messages import InboxKind, job_conversation_id
from orchestrator.proxy import decisions
from orchestrator.proxy.autonomy import agrees, normal
from orchestrator.store.sqlite import Tx


@dataclass(frozen=True)
class Override:
    """What an override did: whether it disagreed with the proxy, and whom it told."""

    gate_id: int
    agreed: bool
    delivered_to: str | None  # the conversation told; None: nobody (the job has ended)
    repeated: bool = False  # the same override (or its source) seen before: nothing changed


def record(
    tx: Tx, gate_id: int, *, answer: str, by: str, at: float, ref: str | None = None
) -> Override:
    """Record `by`'s override of the proxy's answer at a gate and send the correction."""
    decision = decisions.get(tx, gate_id)
    if decision is None or not decision.alone or decision.answer is None:
        raise NotProxyAnsweredError(gate_id, "the proxy did not answer this gate alone")
    if ref is not None and decisions.override_seen(tx, ref):
        return Override(gate_id, bool(decision.agreed), None, repeated=True)
    if decision.override is not None and normal(decision.override) == normal(answer):
        return Override(gate_id, bool(decision.agreed), None, repeated=True)
    gate = gates.get(tx, gate_id)
    agreed = agrees(decision.answer, answer, gate.options)
    decisions.record_override(tx, gate_id, answer=answer, agreed=agreed, by=by, at=at, ref=ref)
    if agreed:
        return Override(gate_id, True, None)
    target = _target(tx, gate)
    if target is not None:
        text = (
            f"{by}, the decider, overrides the answer the proxy gave for them to your question "
            f"(gate {gate_id}): {gate.question[:300]!r}. The proxy answered "
            f"{decision.answer!r}; their answer is: {answer}\n"
            "Go on from their answer, and undo what rested on the proxy's where it matters."
        )
        deliver(tx, target, kind=InboxKind.HUMAN, sender=by, content={"text": text})
    return Override(gate_id, False, target)


def _target(tx: Tx, gate: gates.Gate) -> str | None:
    """The conversation that asked, if it is still open; else the job's, if that is. None
    once the job has ended: its conversations stay open for a later round, and a correction
    would wake them to spend on finished work."""
    job = None if gate.job_id is None else job_rows.get(tx, gate.job_id)
    if job is not None and job.state != "active":
        return None
    root = [] if gate.job_id is None else [job_conversation_id(gate.job_id)]
    for conversation_id in [gate.conversation_id, *root]:
        found = listed(tx, conversation_id)
        if found is not None and found.active:
            return conversation_id
    return None
