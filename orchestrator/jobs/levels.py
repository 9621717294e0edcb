"""A job's spend by level of the organisation: what its office manager, project lead,
workgroup leads, mini-teams and proxy each cost, and how much of their input was read from
the prompt cache, as the final tracking comment and the pull request show it.

An agent's level comes from its address (bus/routing.py): `office-manager` and the proxy at
the organisation, `project/lead` for a project lead, `project/workgroup/agent` for a
workgroup's lead (by its name) or a mini-team member.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from orchestrator.core.messages import Usage

LEVELS = ("office manager", "project lead", "workgroup leads", "mini-teams", "proxy")


@dataclass(frozen=True)
class LevelCost:
    """What one level of the organisation used on a job."""

    level: str
    usage: Usage
    usd: float

    @property
    def tokens(self) -> int:
        """Every token billed."""
        return self.usage.total

    @property
    def cache_hit_rate(self) -> float | None:
        """The share of input tokens read from the cache (None: no input)."""
        u = self.usage
        read = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens
        return u.cache_read_tokens / read if read else None


def level_of(address: str, *, proxy: str, workgroup_leads: Collection[str]) -> str:
    """The level of the agent at `address`."""
    parts = address.split("/")
    if len(parts) == 1:
        return "proxy" if address == proxy else "office manager"
    if len(parts) == 2:
        return "project lead"
    return "workgroup leads" if parts[-1] in workgroup_leads else "mini-teams"


def by_level(
    spent: Mapping[str, Usage],
    price: Callable[[str, Usage], float],
    *,
    proxy: str,
    workgroup_leads: Collection[str],
) -> tuple[LevelCost, ...]:
    """Each level that spent anything, in the organisation's order, priced per agent."""
    usage: dict[str, Usage] = {}
    usd: dict[str, float] = {}
    for address, used in spent.items():
        level = level_of(address, proxy=proxy, workgroup_leads=workgroup_leads)
        usage[level] = usage.get(level, Usage()) + used
        usd[level] = usd.get(level, 0.0) + (price(address, used) if used != Usage() else 0.0)
    return tuple(LevelCost(lvl, usage[lvl], usd[lvl]) for lvl in LEVELS if lvl in usage)
