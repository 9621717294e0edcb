"""The proxy's record in the store (`proxy_decisions`, `proxy_jobs`): transactions run whole.

A row per gate the proxy was consulted on. A person's answer to a gate is written on the
gate (orchestrator/bus/gates.py); `settle` copies it here with whether it agreed with the
prediction, the next time the proxy looks, so no path that answers gates has to know about
the proxy and a crash between the two loses nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator.bus import gates as gate_rows
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
        "SELECT gate_id, answer FROM proxy_decisions WHERE actual IS NULL AND alone = 0"
    ).fetchall()
    asked = gate_rows.of_ids(tx, [gate_id for gate_id, _ in rows])
    settled = 0
    for gate_id, predicted in rows:
        gate = asked.get(gate_id)
        if gate is None or gate.answer is None or gate.answered_via != "human":
            continue
        agreed = None if predicted is None else int(agrees(predicted, gate.answer, gate.options))
        tx.execute(
            "UPDATE proxy_decisions SET actual = ?, agreed = ?, decided_at = ? WHERE gate_id = ?",
            (gate.answer, agreed, gate.answered_at, gate_id),
        )
        settled += 1
    return settled


_HISTORY_SQL = """
SELECT gate_id, confidence, agreed, override IS NOT NULL, actual, answer, alone, decided_at
FROM proxy_decisions WHERE project = ? AND decider = ? AND kind = ?
"""


def history(
    tx: Tx, group: Group, *, limit: int = HISTORY_LIMIT
) -> tuple[list[Past], list[PastGate]]:
    """The group's decisions (for autonomy) and the decider's answers (for the brief), oldest
    first, of the last `limit` gates whose answer is known (-1: all). An answer not settled
    here yet is read from its gate, so this needs no write (`teaparty proxy stats`)."""
    decisions: list[Past] = []
    answers: list[PastGate] = []
    for known in reversed(_known(tx, group, limit)):
        agreed, predicted = known.agreed, known.predicted
        if agreed is None and predicted is not None:  # answered since the proxy last looked
            agreed = agrees(predicted, known.actual, known.gate.options)
        if agreed is not None:
            decisions.append(
                Past(float(known.confidence), bool(agreed), known.overridden and not agreed)
            )
        answers.append(
            PastGate(str(known.gate.question), known.actual, predicted, known.overridden)
        )
    return decisions, answers


@dataclass(frozen=True)
class _Known:
    """A decision whose answer is known, with its gate."""

    confidence: Any  # as stored
    agreed: Any  # as stored: 0, 1, or NULL (not settled here yet)
    overridden: bool
    actual: str  # settled here, else read from the gate
    predicted: str | None
    gate: gate_rows.Gate
    when: float | None  # when it was decided (else answered)


def _known(tx: Tx, group: Group, limit: int) -> list[_Known]:
    """The group's decisions whose answer is known, the latest decided (else answered) first
    and a time unknown last, then by gate; the first `limit` (negative: all)."""
    rows = tx.execute(_HISTORY_SQL, (group.project, group.decider, group.kind)).fetchall()
    asked = gate_rows.of_ids(tx, [row[0] for row in rows])
    known = []
    for gate_id, confidence, agreed, overridden, actual, predicted, alone, decided_at in rows:
        gate = asked.get(gate_id)
        if gate is None or (actual is None and not (alone == 0 and gate.answered_via == "human")):
            continue
        when = gate.answered_at if decided_at is None else decided_at
        answer = gate.answer if actual is None else actual
        known.append(
            _Known(confidence, agreed, bool(overridden), str(answer), predicted, gate, when)
        )
    known.sort(key=lambda k: (k.when is not None, k.when or 0.0, k.gate.gate_id), reverse=True)
    return known if limit < 0 else known[:limit]


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


# Named for the modules whose own SQL named these tables (issue 32).


def override_seen(tx: Tx, ref: str) -> bool:
    """Whether an override from `ref` (a comment, say) was recorded already."""
    row = tx.execute("SELECT gate_id FROM proxy_decisions WHERE override_ref = ?", (ref,))
    return row.fetchone() is not None


def record_override(
    tx: Tx, gate_id: int, *, answer: str, agreed: bool, by: str, at: float, ref: str | None
) -> None:
    """The decider `by` overrode the proxy's answer at the gate with `answer` (from `ref`)."""
    tx.execute(
        "UPDATE proxy_decisions SET actual = ?, agreed = ?, decided_at = ?, override = ?,"
        " overridden_by = ?, override_ref = ? WHERE gate_id = ?",
        (answer, int(agreed), at, answer, by, ref, gate_id),
    )


def tokens_by_job(tx: Tx, job_id: int | None = None) -> list[tuple[int, int, int]]:
    """The tokens the proxy's predictions used at each job's (or only `job_id`'s) gates:
    (job, input, output)."""
    where = "job_id IS NOT NULL" if job_id is None else "job_id = ?"
    rows = tx.execute(
        f"SELECT job_id, sum(input_tokens), sum(output_tokens) FROM proxy_decisions"
        f" WHERE {where} GROUP BY job_id",
        () if job_id is None else (job_id,),
    ).fetchall()
    return [(int(job), int(tin or 0), int(tout or 0)) for job, tin, tout in rows]


def tokens_by_gate(tx: Tx, job_id: int) -> list[tuple[int, int | None, int | None]]:
    """The tokens of the proxy's prediction at each of the job's gates it was consulted on:
    (gate, input, output)."""
    rows = tx.execute(
        "SELECT gate_id, input_tokens, output_tokens FROM proxy_decisions WHERE job_id = ?",
        (job_id,),
    ).fetchall()
    return [(int(gate_id), tin, tout) for gate_id, tin, tout in rows]
