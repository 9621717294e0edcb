"""`teaparty proxy stats`: per project, decider and kind, how the proxy has done and may do.

Read from the store alone, opened read-only beside its holder: answers given since the
proxy last looked are read from their gates. The policy and N are those in force when the
proxy was last consulted in that group (a project's file lives in its repository, not here).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from orchestrator.proxy import decisions
from orchestrator.proxy.autonomy import (
    DEFAULT_RULES,
    Rules,
    Standing,
    band_name,
    held_back,
    standing,
)
from orchestrator.store.sqlite import Store, Tx, attach_beside

STORE_FILE = "teaparty.db"  # in the state directory, as Office.open names it


@dataclass(frozen=True)
class ProxyStats:
    """One group's figures (docs/configuration.md, "The human proxy", says what each is)."""

    project: str
    decider: str
    kind: str
    gates: int
    decisions: int
    agreements: int
    comparable: int
    agreement: float
    alone: int
    overrides: int
    autonomy: bool
    why_not: str | None
    trusted_bands: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        """The figures as a JSON object."""
        return asdict(self)


async def proxy_stats(store: Store, *, rules: Rules = DEFAULT_RULES) -> list[ProxyStats]:
    """Every group's figures, ordered by project, decider and kind (each with its N); a
    read, so the store may be open read-only beside the engine that holds it."""
    return await store.read(lambda tx: _stats(tx, rules))


async def proxy_stats_at(home: Path) -> list[ProxyStats]:
    """The figures of the store in the state directory `home` (none if it has no store),
    read beside whichever process holds it, as `teaparty jobs` reads it."""
    path = home / STORE_FILE
    if not path.is_file():
        return []
    store = await attach_beside(path)
    try:
        return await proxy_stats(store)
    finally:
        await store.close()


def _stats(tx: Tx, base: Rules) -> list[ProxyStats]:
    found = []
    for consulted in decisions.groups(tx):
        group = consulted.group
        every = decisions.history(tx, group, limit=-1)[0]
        rules = replace(base, min_decisions=consulted.min_decisions)
        now = standing(every[-decisions.HISTORY_LIMIT :], rules)
        trusted = tuple(
            band_name(b)
            for b, accuracy in sorted(now.calibration.items())
            if accuracy >= rules.confidence
        )
        found.append(
            ProxyStats(
                group.project,
                group.decider,
                group.kind,
                consulted.gates,
                len(every),
                sum(past.agreed for past in every),
                now.comparable,
                round(now.agreement, 4),
                consulted.alone,
                sum(past.override for past in every),
                *_autonomy(consulted, now, trusted, rules),
                trusted,
            )
        )
    return found


def _autonomy(
    consulted: decisions.Consulted, now: Standing, trusted: tuple[str, ...], rules: Rules
) -> tuple[bool, str | None]:
    """Whether a confident prediction in this group would be answered alone now, or why not
    (before the audit sample, and without a job's `auto`)."""
    kind = consulted.group.kind
    if consulted.guarded:
        return False, f"never alone on {kind} gates"
    if consulted.policy != "when_unsure":
        return False, f"the project's policy for {kind} gates is {consulted.policy}"
    reason = held_back(now, rules)
    if reason is None and not trusted:
        reason = f"no confidence band measured at {rules.confidence:g} or more yet"
    return reason is None, reason
