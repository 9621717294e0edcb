"""The features the engine runs with, and what each adds to the bus: the one list of them.

Each feature registers with the bus's extension points (orchestrator/bus/extensions.py):
gate kinds and what their answers do, turn tools, holds, reply holds, end hooks and
admission. The office wires the bus with `extensions()`; whatever loads a project file
checks its `gates:` and `proxy.allow` against `GATE_KINDS`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from orchestrator.bus.extensions import Extensions
from orchestrator.jobs import (
    budget_gate,
    intent_gate,
    network_gate,
    protected_gate,
    revisions,
    rounds,
    secret_gate,
)
from orchestrator.teams import conflict_gate, plan_gate
from orchestrator.teams import transactions as team_transactions

Register = Callable[[Extensions], None]
FEATURES: tuple[Register, ...] = (
    team_transactions.register,
    plan_gate.register,
    conflict_gate.register,
    intent_gate.register,
    revisions.register,
    budget_gate.register,
    secret_gate.register,
    protected_gate.register,
    network_gate.register,
    rounds.register,
)


def extensions(features: Sequence[Register] = FEATURES) -> Extensions:
    """The bus's extensions with each of `features` registered."""
    found = Extensions()
    for register in features:
        register(found)
    return found


GATE_KINDS = extensions().kinds  # every kind of gate the standard features ask
