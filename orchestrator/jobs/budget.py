"""A job's token and cost budget: once spent, every turn of the job stops with an error reply."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from orchestrator.bus.messages import Usage
from orchestrator.store.sqlite import Store

_SPENT_SQL = """
SELECT c.agent, coalesce(sum(m.input_tokens), 0), coalesce(sum(m.output_tokens), 0),
       coalesce(sum(m.cache_read_tokens), 0), coalesce(sum(m.cache_write_tokens), 0)
FROM messages m JOIN conversations c USING (conversation_id)
WHERE c.job_id = ? GROUP BY c.agent
"""

Limits = tuple[float | None, int | None]


@dataclass(frozen=True)
class Spent:
    """What a job has used so far."""

    usage: Usage
    usd: float

    @property
    def tokens(self) -> int:
        """Every token the job was billed for."""
        u = self.usage
        return u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens


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
    ) -> None:
        self.store = store
        self.max_usd = max_usd
        self.max_tokens = max_tokens
        self.price = price
        self.per_project = per_project if per_project is not None else {}

    async def spent(self, job_id: int) -> Spent:
        """Tokens and dollars the job's conversations have used."""
        rows = await self.store.read(lambda tx: tx.execute(_SPENT_SQL, (job_id,)).fetchall())
        usage, usd = Usage(), 0.0
        for agent, *tokens in rows:
            used = Usage(*tokens)
            usage += used
            usd += self.price(agent, used) if used != Usage() else 0.0
        return Spent(usage, usd)

    async def exhausted(self, job_id: int) -> str | None:
        """Why the job may not make another model call, or None."""
        max_usd, max_tokens = await self.limits(job_id)
        spent = await self.spent(job_id)
        if max_usd is not None and spent.usd >= max_usd:
            return f"budget: the job spent ${spent.usd:.2f} of its ${max_usd:.2f}"
        if max_tokens is not None and spent.tokens >= max_tokens:
            return f"budget: the job used {spent.tokens:,} of its {max_tokens:,} tokens"
        return None

    async def limits(self, job_id: int) -> Limits:
        """The job's (max_usd, max_tokens): its project's, else the defaults; a cap set
        for the job itself (`/budget`) in place of the dollars."""
        row = await self.store.read(
            lambda tx: tx.execute(
                "SELECT project, budget_usd FROM jobs WHERE job_id = ?", (job_id,)
            ).fetchone()
        )
        max_usd, max_tokens = self.max_usd, self.max_tokens
        if row is not None and row[0] in self.per_project:
            max_usd, max_tokens = self.per_project[row[0]]
        if row is not None and row[1] is not None:
            max_usd = float(row[1])
        return max_usd, max_tokens
