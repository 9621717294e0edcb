"""The proxy's record in the store (`proxy_decisions`, `proxy_jobs`): transactions run whole.

A row per gate the proxy was consulted on. A person's answer to a gate is written on the
gate (orchestrator/bus/gates.py); `settle` copies it here with whether it agreed with the
prediction, the next time the proxy looks, so no path that answers gates has to know about
the proxy and a crash between the two loses nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from orchestrator.proxy.autonomy import Past, agrees
from orchestrator.proxy.brief import PastGate
from orchestrator.store.sqlite import Tx

HISTORY_LIMIT = 200  # decisions per decider and kind that calibration and agreement read

_DECISION_COLUMNS = (
    "gate_id, job_id, project, decider, kind, answer, confidence, reasons, measured, agreement,"
    " comparable, policy, alone, why, actual, agreed, override, overridden_by"
)


@dataclass(frozen=True)
class ProxyDecision:
    """The proxy at one gate: its prediction (`answer` None: none), whether it answered
    alone and why, and, once known, the decider's answer (or override) and agreement."""

    gate_id: int
    job_id: int | None
    project: str
    decider: str
    kind: str
    answer: str | None
    confidence: float | None  # as the model stated it
    reasons: str
    measured: float | None  # its measured accuracy at that confidence's band
    agreement: float  # its measured agreement with the decider on this kind, then
    comparable: int  # the comparable decisions that agreement was measured over
    policy: str
    alone: bool
    why: str
    actual: str | None = None
    agreed: bool | None = None
    override: str | None = None
    overridden_by: str | None = None


@dataclass(frozen=True)
class Group:
    """One project, decider and kind of gate."""

    project: str
    decider: str
    kind: str


def get(tx: Tx, gate_id: int) -> ProxyDecision | None:
    """The proxy's decision at a gate, if it was consulted."""
    row = tx.execute(
        f"SELECT {_DECISION_COLUMNS} FROM proxy_decisions WHERE gate_id = ?", (gate_id,)
    ).fetchone()
    return None if row is None else _decision(row)


def _decision(row: tuple[Any, ...]) -> ProxyDecision:
    gate_id, job_id, project, decider, kind, answer, confidence, reasons, *rest = row
    measured, agreement, comparable, policy, alone, why, actual, agreed, override, by = rest
    return ProxyDecision(
        int(gate_id),
        None if job_id is None else int(job_id),
        str(project),
        str(decider),
        str(kind),
        None if answer is None else str(answer),
        None if confidence is None else float(confidence),
        str(reasons),
        None if measured is None else float(measured),
        float(agreement),
        int(comparable),
        str(policy),
        bool(alone),
        str(why),
        None if actual is None else str(actual),
        None if agreed is None else bool(agreed),
        None if override is None else str(override),
        None if by is None else str(by),
    )


@dataclass(frozen=True)
class Terms:
    """What held when a decision was made, beyond the decision itself: whether the kind is one
    the proxy never answers alone in the project (`guarded`), its N, and the tokens spent."""

    guarded: bool
    min_decisions: int
    tokens: tuple[int, int] = (0, 0)


def insert(tx: Tx, decision: ProxyDecision, terms: Terms, *, at: float) -> ProxyDecision:
    """Record the proxy's decision at a gate, once; the one recorded."""
    d = decision
    tx.execute(
        "INSERT OR IGNORE INTO proxy_decisions (gate_id, job_id, project, decider, kind, answer,"
        " confidence, reasons, measured, agreement, comparable, policy, guarded, min_decisions,"
        " alone, why, input_tokens, output_tokens, predicted_at) VALUES"
        " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            *(d.gate_id, d.job_id, d.project, d.decider, d.kind, d.answer, d.confidence),
            *(d.reasons, d.measured, d.agreement, d.comparable, d.policy, int(terms.guarded)),
            *(terms.min_decisions, int(d.alone), d.why, *terms.tokens, at),
        ),
    )
    recorded = get(tx, d.gate_id)
    assert recorded is not None  # inserted just now, or before
    return recorded


def settle(tx: Tx) -> int:
    """Copy people's answers to consulted gates here, with agreement; how many were new."""
    rows = tx.execute(
        "SELECT d.gate_id, d.answer, g.answer, g.options, g.answered_at"
        " FROM proxy_decisions d JOIN gates g USING (gate_id)"
        " WHERE d.actual IS NULL AND d.alone = 0 AND g.answer IS NOT NULL"
        " AND g.answered_via = 'human'"
    ).fetchall()
    for gate_id, predicted, actual, options, answered_at in rows:
        agreed = None
        if predicted is not None:
            agreed = int(agrees(predicted, actual, json.loads(options or "[]")))
        tx.execute(
            "UPDATE proxy_decisions SET actual = ?, agreed = ?, decided_at = ? WHERE gate_id = ?",
            (actual, agreed, answered_at, gate_id),
        )
    return len(rows)


_HISTORY_SQL = """
SELECT d.confidence, d.agreed, d.override IS NOT NULL, g.question, coalesce(d.actual, g.answer),
       d.answer, g.options
FROM proxy_decisions d JOIN gates g USING (gate_id)
WHERE d.project = ? AND d.decider = ? AND d.kind = ?
  AND (d.actual IS NOT NULL OR (d.alone = 0 AND g.answered_via = 'human'))
ORDER BY coalesce(d.decided_at, g.answered_at) DESC, d.gate_id DESC LIMIT ?
"""


def history(
    tx: Tx, group: Group, *, limit: int = HISTORY_LIMIT
) -> tuple[list[Past], list[PastGate]]:
    """The group's decisions (for autonomy) and the decider's answers (for the brief), oldest
    first, of the last `limit` gates whose answer is known (-1: all). An answer not settled
    here yet is read from its gate, so this needs no write (`teaparty proxy stats`)."""
    rows = tx.execute(_HISTORY_SQL, (group.project, group.decider, group.kind, limit)).fetchall()
    decisions: list[Past] = []
    answers: list[PastGate] = []
    for stated, agreed, overridden, question, actual, predicted, options in reversed(rows):
        if agreed is None and predicted is not None:  # answered since the proxy last looked
            agreed = agrees(predicted, actual, json.loads(options or "[]"))
        if agreed is not None:
            decisions.append(Past(float(stated), bool(agreed), bool(overridden) and not agreed))
        answers.append(PastGate(str(question), str(actual), predicted, bool(overridden)))
    return decisions, answers


@dataclass(frozen=True)
class Consulted:
    """A group's gates and alone answers, and its kind's policy and N when the proxy last
    looked."""

    group: Group
    gates: int
    alone: int
    policy: str
    guarded: bool
    min_decisions: int


def groups(tx: Tx) -> list[Consulted]:
    """Every group the proxy was consulted in, by project, decider and kind."""
    rows = tx.execute(
        "SELECT project, decider, kind, count(*), sum(alone), max(gate_id)"
        " FROM proxy_decisions GROUP BY project, decider, kind ORDER BY project, decider, kind"
    ).fetchall()
    found = []
    for project, decider, kind, gates, alone, last in rows:
        policy, guarded, n = tx.execute(
            "SELECT policy, guarded, min_decisions FROM proxy_decisions WHERE gate_id = ?",
            (last,),
        ).fetchone()
        group = Group(project, decider, kind)
        found.append(Consulted(group, int(gates), int(alone), str(policy), bool(guarded), int(n)))
    return found


def auto(tx: Tx, job_id: int | None) -> bool:
    """Whether the job lets the proxy answer every eligible gate."""
    row = tx.execute("SELECT auto FROM proxy_jobs WHERE job_id = ?", (job_id,)).fetchone()
    return row is not None and bool(row[0])


def set_auto(tx: Tx, job_id: int, *, on: bool, by: str, at: float) -> None:
    """Let the job's proxy answer every eligible gate (`on`), or stop it."""
    tx.execute(
        "INSERT INTO proxy_jobs (job_id, auto, set_by, set_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (job_id) DO UPDATE SET auto = excluded.auto, set_by = excluded.set_by,"
        " set_at = excluded.set_at",
        (job_id, int(on), by, at),
    )


def seed(tx: Tx) -> str:
    """The store's own seed for the audit sample."""
    (value,) = tx.execute("SELECT value FROM proxy_settings WHERE name = 'seed'").fetchone()
    return str(value)


def use_seed(tx: Tx, value: str) -> None:
    """Replace the store's seed for the audit sample."""
    tx.execute("UPDATE proxy_settings SET value = ? WHERE name = 'seed'", (value,))


def unannounced(tx: Tx, job_id: int) -> list[ProxyDecision]:
    """The job's gates the proxy answered alone whose answer the forge has not been told."""
    rows = tx.execute(
        f"SELECT {_DECISION_COLUMNS} FROM proxy_decisions WHERE job_id = ? AND alone = 1"
        " AND announced_at IS NULL ORDER BY gate_id",
        (job_id,),
    ).fetchall()
    return [_decision(row) for row in rows]


def announced(tx: Tx, gate_id: int, *, at: float) -> None:
    """The forge has said the proxy's answer at this gate."""
    tx.execute(
        "UPDATE proxy_decisions SET announced_at = coalesce(announced_at, ?) WHERE gate_id = ?",
        (at, gate_id),
    )


def alone_answers(tx: Tx, job_id: int) -> list[ProxyDecision]:
    """The job's gates the proxy answered alone, oldest first (what `/override` may name)."""
    rows = tx.execute(
        f"SELECT {_DECISION_COLUMNS} FROM proxy_decisions WHERE job_id = ? AND alone = 1"
        " ORDER BY gate_id",
        (job_id,),
    ).fetchall()
    return [_decision(row) for row in rows]
