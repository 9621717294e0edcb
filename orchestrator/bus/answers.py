"""Answering a gate, and what the answer does: one transaction.

An agent's question is answered by delivering the answer as its call's result
(`gates.answer`). A gate the engine asked is carried out by its kind's settler, which the
feature that asks that kind registered with the bus (orchestrator/bus/extensions.py): the
plan gate dispatches the plan it approved, the budget gate raises the job's caps, and so on.
"""

from __future__ import annotations

from dataclasses import replace

from orchestrator.bus import gates
from orchestrator.bus.extensions import Extensions
from orchestrator.bus.gates import AnsweredVia, Gate
from orchestrator.store.sqlite import Tx


def answer(
    tx: Tx,
    gate_id: int,
    *,
    text: str,
    answered_by: str,
    via: AnsweredVia,
    extensions: Extensions,
    ref: str | None = None,
) -> Gate:
    """Record the answer (see `gates.answer`) and carry it out; the gate as answered, with
    `woken` naming the conversations that now have work."""
    gate = gates.answer(tx, gate_id, text=text, answered_by=answered_by, via=via, ref=ref)
    woken: tuple[str, ...] = (gate.conversation_id,)
    if gate.engine_made:
        woken = tuple(dict.fromkeys((*extensions.settle(tx, gate), gate.conversation_id)))
    return replace(gate, woken=woken)
