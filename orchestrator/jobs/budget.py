"""A job's token and cost budget: what it spent, its caps, and whether it may go on.

A job spends through its agents' turns and through the proxy's predictions at its gates
(priced at the proxy agent's model). Once a cap is reached, its budget gate
(jobs/budget_gate.py) holds the job for its decider, or every turn stops with an error reply.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from orchestrator.agents.ports import Refusal
from orchestrator.bus import gates as gate_rows
from orchestrator.bus import jobs as job_rows
from orchestrator.bus import transactions as txn
from orchestrator.core.messages import Usage
from orchestrator.jobs import budget_gate, rounds
from orchestrator.jobs.budget_gate import Overrun
from orchestrator.proxy import decisions
from orchestrator.store.sqlite import Store, Tx
from orchestrator.teams import board

Limits = tuple[float | None, int | None]


def spent_by_agent(tx: Tx, *, proxy: str, job_id: int | None = None) -> dict[int, dict[str, Usage]]:
    """The tokens each job (or only `job_id`) was billed for, by agent address; the
    proxy's predictions at a job's gates count under `proxy`, its agent's name."""
    turns = txn.billed_by_job(tx, job_id)
    predictions = [
        (job, proxy, Usage(tin, tout)) for job, tin, tout in decisions.tokens_by_job(tx, job_id)
    ]
    spent: dict[int, dict[str, Usage]] = {}
    for job, agent, used in [*turns, *predictions]:
        by_agent = spent.setdefault(job, {})
        by_agent[agent] = by_agent.get(agent, Usage()) + used
    return spent


@dataclass(frozen=True)
class Spent:
    """What a job has used so far."""

    usage: Usage
    usd: float

    @property
    def tokens(self) -> int:
        """Every token the job was billed for."""
        return self.usage.total


class JobBudget:
    """Limits per job, priced per agent (each agent's model has its own price)."""

    def __init__(
        self,
        store: Store,
        *,
        max_usd: float | None,
        max_tokens: int | None,
        price: Callable[[str, Usage], float],
        per_project: Mapping[str, Limits] | None = None,
        per_round: Mapping[str, float | None] | None = None,
        proxy: str = "proxy",
    ) -> None:
        self.store = store
        self.max_usd = max_usd
        self.max_tokens = max_tokens
        self.price = price
        self.per_project = per_project if per_project is not None else {}
        self.per_round = per_round if per_round is not None else {}
        self.proxy = proxy  # the proxy agent's name, whose model prices its predictions

    async def spent(self, job_id: int) -> Spent:
        """Tokens and dollars the job's conversations, and the proxy at its gates, have used."""
        return await self.store.read(lambda tx: self.spent_in(tx, job_id))

    def spent_in(self, tx: Tx, job_id: int) -> Spent:
        """`spent`, in a transaction."""
        usage, usd = Usage(), 0.0
        for agent, used in (
            spent_by_agent(tx, proxy=self.proxy, job_id=job_id).get(job_id, {}).items()
        ):
            usage += used
            usd += self.price(agent, used) if used != Usage() else 0.0
        return Spent(usage, usd)

    async def by_agent(self, job_id: int) -> dict[str, Usage]:
        """The job's tokens by agent address (the proxy's under its name)."""
        spent = await self.store.read(
            lambda tx: spent_by_agent(tx, proxy=self.proxy, job_id=job_id)
        )
        return spent.get(job_id, {})

    async def exhausted(self, job_id: int) -> str | None:
        """Why the job may not make another model call (a cap reached, its budget gate
        open), or None. Asks nothing: `admit` opens the gate."""
        return await self.store.read(lambda tx: self._exhausted(tx, job_id))

    def _exhausted(self, tx: Tx, job_id: int) -> str | None:
        over = self.overrun(tx, job_id)
        if over is not None:
            return over.reason
        waiting = budget_gate.open_gate(tx, job_id)
        return None if waiting is None else f"budget: the job waits at question {waiting.gate_id}"

    async def waiting(self, job_id: int) -> bool:
        """Whether the job waits at its open budget gate: no model call until it is answered."""
        return await self.store.read(lambda tx: budget_gate.open_gate(tx, job_id) is not None)

    def overrun(self, tx: Tx, job_id: int) -> Overrun | None:
        """What the job used and its caps, if it has reached one; else None."""
        max_usd, max_tokens = self.limits_in(tx, job_id)
        spent = self.spent_in(tx, job_id)
        over = Overrun(spent.usd, spent.tokens, max_usd, max_tokens)
        return over if over.usd_hit or over.tokens_hit else None

    async def admit(self, job_id: int, conversation_id: str | None = None) -> Refusal | None:
        """Whether the job may make another model call: None while it is within its caps
        and has no budget gate open; else held at its budget gate, or stopped. A mini-team's
        conversation stops, too, once its task spent its allowance: its lead decides."""
        if await self.exhausted(job_id) is None:
            if conversation_id is None:
                return None
            return await self.store.read(lambda tx: self._allowance(tx, job_id, conversation_id))
        # Looked at again in one write: of turns reaching the cap at once, one asks.
        return await self.store.write(
            lambda tx: budget_gate.refuse(tx, job_id, self.overrun(tx, job_id))
        )

    def _allowance(self, tx: Tx, job_id: int, conversation_id: str) -> Refusal | None:
        """Why the mini-team `conversation_id` works in may not go on (its task spent its
        allowance), or None: not a mini-team's, within it, or no dollar cap to share."""
        found = txn.listed(tx, conversation_id)
        task_id = None if found is None else found.task_id
        task = None if task_id is None else board.allowance(tx, task_id)
        if task_id is None or task is None:
            return None
        number, given = task
        allowance = float(given) if given is not None else self._share(tx, job_id)
        if allowance is None:
            return None
        used = self._task_priced(tx, task_id)
        if used < allowance:
            return None
        return Refusal(
            f"budget: task #{number}'s mini-team spent ${used:.4f} of its ${allowance:.4f} "
            "allowance; it stops here and its lead decides (dispatch it again with a larger "
            "allowance_usd, or leave it blocked)"
        )

    def _share(self, tx: Tx, job_id: int) -> float | None:
        """An even share of what is left of the job's dollar cap among its unfinished tasks
        (what they spent so far counts as theirs), None without a dollar cap."""
        max_usd, _ = self.limits_in(tx, job_id)
        if max_usd is None:
            return None
        unfinished = board.unfinished_ids(tx, job_id)
        spent = self.spent_in(tx, job_id).usd
        theirs = self._priced(txn.billed_by_agent(tx, task_ids=unfinished))
        return max(max_usd - spent + theirs, 0.0) / max(len(unfinished), 1)

    def _task_priced(self, tx: Tx, task_id: int) -> float:
        """Dollars the conversations working on the task (by stored id) were billed."""
        return self._priced(txn.billed_by_agent(tx, task_ids=[task_id]))

    def _priced(self, billed: list[tuple[str, Usage]]) -> float:
        """Dollars the agents were billed for those tokens."""
        total = 0.0
        for agent, used in billed:
            total += self.price(agent, used) if used != Usage() else 0.0
        return total

    async def limits(self, job_id: int) -> Limits:
        """The job's (max_usd, max_tokens): its project's, else the defaults; each in turn
        replaced by a cap set for the job itself (`/budget`, an approved budget gate)."""
        return await self.store.read(lambda tx: self.limits_in(tx, job_id))

    def limits_in(self, tx: Tx, job_id: int) -> Limits:
        """`limits`, in a transaction."""
        row = job_rows.get(tx, job_id)
        max_usd, max_tokens = self.max_usd, self.max_tokens
        if row is None:
            return max_usd, max_tokens
        project, own_usd, own_tokens = row.project, row.budget_usd, row.budget_tokens
        if project in self.per_project:
            max_usd, max_tokens = self.per_project[project]
        if own_usd is not None:
            max_usd = float(own_usd)
        if own_tokens is not None:
            max_tokens = int(own_tokens)
        round_cap = self._round_cap(tx, job_id, project)
        if round_cap is not None:
            max_usd = round_cap if max_usd is None else min(max_usd, round_cap)
        return max_usd, max_tokens

    def _round_cap(self, tx: Tx, job_id: int, project: str) -> float | None:
        """While a review round runs under `rounds.max_usd` (until its decider approves more
        at the budget gate), the job's dollar cap is what it spent before the round plus it."""
        cap = self.per_round.get(project)
        if cap is None:
            return None
        since = rounds.capped_since(tx, job_id)
        if since is None:
            return None
        before = self._priced(txn.billed_by_agent(tx, job_id=job_id, before=since))
        predictions = decisions.tokens_by_gate(
            tx, job_id
        )  # and the proxy's at gates asked before it
        asked = gate_rows.of_ids(tx, [gate_id for gate_id, _, _ in predictions])
        earlier = [
            (tin, tout)
            for gate_id, tin, tout in predictions
            if gate_id in asked and asked[gate_id].asked_at < since
        ]
        proxy = Usage(
            sum(tin for tin, _ in earlier if tin is not None),
            sum(tout for _, tout in earlier if tout is not None),
        )
        if proxy != Usage():
            before += self.price(self.proxy, proxy)
        return before + cap
