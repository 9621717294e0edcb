"""A job's token and cost budget: once spent, every turn of the job stops with an error reply."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from orchestrator.messages import Usage
from orchestrator.store import Store

_SPENT_SQL = """
SELECT c.agent, coalesce(sum(m.input_tokens), 0), coalesce(sum(m.output_tokens), 0),
       coalesce(sum(m.cache_read_tokens), 0), coalesce(sum(m.cache_write_tokens), 0)
FROM messages m JOIN conversations c USING (conversation_id)
WHERE c.job_id = ? GROUP BY c.agent
"""


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
    ) -> None:
        self.store = store
        self.max_usd = max_usd
        self.max_tokens = max_tokens
        self.price = price

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
        spent = await self.spent(job_id)
        if self.max_usd is not None and spent.usd >= self.max_usd:
            return f"budget: the job spent ${spent.usd:.2f} of its ${self.max_usd:.2f}"
        if self.max_tokens is not None and spent.tokens >= self.max_tokens:
            return f"budget: the job used {spent.tokens:,} of its {self.max_tokens:,} tokens"
        return None
