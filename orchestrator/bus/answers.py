"""Answering a gate, and what the answer does: one transaction.

An agent's question is answered by delivering the answer as its call's result
(`gates.answer`). A gate the engine asked is acted on here, by its kind: the plan gate
dispatches the plan it approved or hands the decider's words back to the lead; the budget
gate raises the job's caps, or lets its turns stop; the merge-conflict gate hands the lead
the conflict it held, with the decision; the protected-path gate's answer is the job
driver's to act on, at the job's next sync; the intent gate sends the restatement it
approved (or hands the words back to the office manager), or for an edit of the issue, has
the job work to the new text or keep the old.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from orchestrator.bus import gates, intent_gate
from orchestrator.bus.gates import AnsweredVia, Gate
from orchestrator.jobs import budget_gate, protected_gate, rounds
from orchestrator.store.sqlite import Tx
from orchestrator.teams import conflict_gate, plan_gate

Settle = Callable[[Tx, Gate], tuple[str, ...]]
SETTLERS: Mapping[str, Settle] = {
    "plan": plan_gate.settle,
    "intent": intent_gate.settle,
    "budget": budget_gate.settle,
    "merge-conflict": conflict_gate.settle,
    "protected-path": protected_gate.settle,
    "question": rounds.settle,  # the engine asks a question only for a round past the cap
}


def answer(
    tx: Tx,
    gate_id: int,
    *,
    text: str,
    answered_by: str,
    via: AnsweredVia,
    ref: str | None = None,
) -> Gate:
    """Record the answer (see `gates.answer`) and carry it out; the gate as answered, with
    `woken` naming the conversations that now have work."""
    gate = gates.answer(tx, gate_id, text=text, answered_by=answered_by, via=via, ref=ref)
    woken: tuple[str, ...] = (gate.conversation_id,)
    if gate.engine_made and (settle := SETTLERS.get(gate.kind)) is not None:
        woken = tuple(dict.fromkeys((*settle(tx, gate), gate.conversation_id)))
    return replace(gate, woken=woken)
