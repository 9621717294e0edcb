"""The budget gate: a job that has spent its budget asks its decider before going on.

The first conversation of a job that would make a model call past a cap (while the job's
`budget` mode is not `never`) opens one `budget` gate for the whole job, proposing a new cap:
what the job has used plus the cap it reached. While it is open, no conversation of the job
makes a model call (each waits, as in a paused job). Approving makes the proposal the job's
cap and wakes what has work; any other answer wakes the job's conversations to stop, each
saying that the decider chose to stop the job at its budget. With the gate `never`, every
turn past the budget stops at once, as before there were gates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from orchestrator.agents.ports import Refusal
from orchestrator.bus import gates
from orchestrator.bus import jobs as job_rows
from orchestrator.bus.extensions import Extensions
from orchestrator.bus.gates import AskIntent, Gate
from orchestrator.bus.runnable import runnable
from orchestrator.core.gate_kinds import GateKind
from orchestrator.core.messages import job_conversation_id
from orchestrator.jobs import revisions, rounds
from orchestrator.store.sqlite import Tx

KIND = GateKind(
    "budget",
    "always",
    title="the job has reached its budget",
    about="the job would pass its budget",
    proxy_alone=False,
    wakes_asker=False,  # no agent waits on it: the job's model calls do
)
OPTIONS = ("yes", "no")
QUESTION_OPENING = "The job has reached its budget"


@dataclass(frozen=True)
class Overrun:
    """A job at or past a cap: what it has used, and its caps (None: no cap of that kind)."""

    usd: float
    tokens: int
    max_usd: float | None
    max_tokens: int | None

    @property
    def usd_hit(self) -> bool:
        """Whether it spent its dollars."""
        return self.max_usd is not None and self.usd >= self.max_usd

    @property
    def tokens_hit(self) -> bool:
        """Whether it used its tokens."""
        return self.max_tokens is not None and self.tokens >= self.max_tokens

    @property
    def reason(self) -> str:
        """Why the job may make no model call, as a stopped turn says it."""
        if self.usd_hit:
            return f"budget: the job spent ${self.usd:.2f} of its ${self.max_usd:.2f}"
        return f"budget: the job used {self.tokens:,} of its {self.max_tokens:,} tokens"

    def proposal(self) -> tuple[float | None, int | None]:
        """The caps proposed for what it reached: what it used plus that cap (dollars
        rounded up to the cent); None for a cap it did not reach."""
        usd = math.ceil((self.usd + (self.max_usd or 0.0)) * 100) / 100 if self.usd_hit else None
        tokens = self.tokens + (self.max_tokens or 0) if self.tokens_hit else None
        return usd, tokens

    def question(self) -> str:
        """The gate's question: what was used, the cap reached, and the proposal."""
        used = []
        if self.usd_hit:
            used.append(f"spent ${self.usd:.2f} of its ${self.max_usd:.2f} cap")
        if self.tokens_hit:
            used.append(f"used {self.tokens:,} of its {self.max_tokens:,} tokens")
        usd, tokens = self.proposal()
        caps = [] if usd is None else [f"${usd:.2f}"]
        caps += [] if tokens is None else [f"{tokens:,} tokens"]
        return (
            f"{QUESTION_OPENING}: it {' and '.join(used)}. No model call is made until you "
            f"answer.\n\nProposed: raise its cap to {' and '.join(caps)} (what it has used "
            "plus the cap it reached) and go on."
        )


def open_gate(tx: Tx, job_id: int) -> Gate | None:
    """The job's open budget gate, if one is open."""
    asked = gates.of_kind(tx, job_id, KIND.name, asked_by=gates.ENGINE)
    return next((g for g in asked if g.answer is None and g.closed_at is None), None)


def refuse(tx: Tx, job_id: int, over: Overrun | None) -> Refusal | None:
    """Whether the job may make a model call, given what it has used (`over`: at a cap):
    held while its budget gate is open (one is opened the first time), stopped when the
    gate is off or the decider declined to raise the caps it is at now, else None."""
    waiting = open_gate(tx, job_id)
    if waiting is not None:
        return Refusal(f"waiting for the decider at the budget (question {waiting.gate_id})", True)
    if over is None:
        return None
    if gates.mode(tx, job_id, KIND) == "never":
        return Refusal(over.reason)
    declined = _declined(tx, job_id, over)
    if declined is not None:
        who = "the proxy" if declined.answered_via == "proxy" else declined.answered_by
        return Refusal(f"{over.reason}; {who} (the decider) chose to stop the job at its budget")
    gate_id = _ask(tx, job_id, over)
    return Refusal(f"waiting for the decider at the budget (question {gate_id})", True)


def _declined(tx: Tx, job_id: int, over: Overrun) -> Gate | None:
    """The job's last budget gate, if it was answered other than yes at the caps it has now."""
    asked = gates.of_kind(tx, job_id, KIND.name, asked_by=gates.ENGINE)
    answered = [g for g in asked if g.answer is not None]
    if not answered:
        return None
    gate = answered[-1]
    same_caps = gate.payload.get("caps") == [over.max_usd, over.max_tokens]
    return gate if same_caps and not gate.approved else None


def _ask(tx: Tx, job_id: int, over: Overrun) -> int:
    asked = len(gates.of_kind(tx, job_id, KIND.name))
    usd, tokens = over.proposal()
    proposed = {"usd": usd, "tokens": tokens}
    # The gate parks the job's root conversation (`job:{id}`), whichever conversation hit
    # the cap: the gate is the job's, and the root lives as long as the job does (a worker's
    # conversation may end or be withdrawn while the gate waits). The root is the office
    # manager's, parked on its lead while the job has work, so counting the gate there
    # changes nothing it does: a reply from the lead waits in its inbox until the answer,
    # which wakes it with every other conversation of the job that has work.
    return gates.ask_engine(
        tx,
        job_id=job_id,
        conversation_id=job_conversation_id(job_id),
        content=revisions.job_content,
        intent=AskIntent(f"budget:{asked + 1}", over.question(), OPTIONS, kind=KIND.name),
        payload={"caps": [over.max_usd, over.max_tokens], "proposed": proposed},
        pinned=proposed,
    )


def register(extensions: Extensions) -> None:
    """The budget gate: its kind, and its answer carried out."""
    extensions.gate_kind(KIND, settle=settle)


def settle(tx: Tx, gate: Gate) -> tuple[str, ...]:
    """Act on the budget gate's answer: approved, the proposed caps become the job's; every
    conversation of the job with work is woken (to go on, or to stop). Who now has work."""
    if gate.job_id is None:
        return ()
    if gate.approved:
        rounds.uncap_running(tx, gate.job_id)
        proposed = gate.payload.get("proposed", {})
        job_rows.raise_caps(tx, gate.job_id, usd=proposed.get("usd"), tokens=proposed.get("tokens"))
    return tuple(runnable(tx, gate.job_id))
