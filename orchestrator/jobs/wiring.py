"""The pieces `Office.open` wires, as functions of what they read (no Office needed).

Each is built before the engine and handed to it whole: who may write (the worker), what
a project's processes may reach, a lead's checkpoint, and the per-project budget.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from orchestrator.agents.ports import AgentSpec
from orchestrator.agents.roster import ConfigAgents
from orchestrator.config import Project
from orchestrator.config.prices import PriceTable
from orchestrator.core.messages import Usage
from orchestrator.jobs import sources
from orchestrator.jobs.budget import JobBudget, Limits
from orchestrator.sandbox.confine import Network
from orchestrator.store.sqlite import Store
from orchestrator.teams import board_tools
from orchestrator.teams.board import summarize

WRITE_TOOLS = frozenset({"write_file", "edit_file"})


def workgroup_order(project: Project) -> list[str]:
    """The project's workgroups, the default for a task first (the first that can write)."""
    names = [w.name for w in project.workgroups]
    writers = [
        w.name
        for w in project.workgroups
        if any({"write_file", "edit_file"} & set(m.tools) for m in w.members)
    ]
    return writers[:1] + [n for n in names if n not in writers[:1]]


def writes(agents: ConfigAgents, address: str) -> bool:
    definition = agents.definition(address)
    return definition is not None and bool(WRITE_TOOLS & set(definition.tools))


def network(projects: Mapping[str, Project], project: str) -> Network:
    found = projects.get(project)
    setting = "off" if found is None else found.sandbox.network
    if isinstance(setting, tuple):
        return Network(hosts=setting)
    return Network(open=setting == "open")


def asks(projects: Mapping[str, Project], project: str) -> bool:
    """Whether the project puts hosts its agents were refused to its decider (`sandbox.ask`)."""
    found = projects.get(project)
    return found is not None and found.sandbox.ask


async def checkpoint(store: Store, conversation_id: str, spec: AgentSpec) -> str | None:
    """A lead's checkpoint carries the board as the engine has it, not as remembered."""
    if "task_list" not in {tool.name for tool in spec.tools}:
        return None
    job_id = await board_tools.job_of_conversation(store, conversation_id)
    if job_id is None:
        return None
    board = await store.read(lambda tx: summarize(tx, job_id))
    return f"The task board at this checkpoint:\n{board}"


def budget(
    store: Store,
    agents: ConfigAgents,
    projects: Mapping[str, Project],
    prices: PriceTable,
    *,
    proxy: str,
) -> JobBudget:
    """Each project's limits, read when asked (a project added later has its own); costs at
    the organisation's prices, the proxy's (agent `proxy`) at its model's."""

    def price(address: str, usage: Usage) -> float:
        definition = agents.definition(address)
        return 0.0 if definition is None else prices.cost_usd(definition.model, usage)

    return JobBudget(
        store,
        max_usd=None,
        max_tokens=None,
        price=price,
        per_project=_Limits(projects),
        per_round=_RoundCaps(projects),
        proxy=proxy,
    )


class _Limits(Mapping[str, Limits]):
    """Each served project's budget, as the projects map says now."""

    def __init__(self, projects: Mapping[str, Project]) -> None:
        self._projects = projects

    def __getitem__(self, name: str) -> Limits:
        budget = self._projects[name].budget
        return (budget.max_usd, budget.max_tokens)

    def __iter__(self) -> Iterator[str]:
        return iter(self._projects)

    def __len__(self) -> int:
        return len(self._projects)


class _RoundCaps(Mapping[str, float | None]):
    """Each served project's cap on one review round's spend, as the projects map says now."""

    def __init__(self, projects: Mapping[str, Project]) -> None:
        self._projects = projects

    def __getitem__(self, name: str) -> float | None:
        return self._projects[name].rounds.max_usd

    def __iter__(self) -> Iterator[str]:
        return iter(self._projects)

    def __len__(self) -> int:
        return len(self._projects)


async def repository(store: Store, job_id: int) -> str | None:
    """The repository a job works on (owner/name), as its source names it."""
    kept = await store.read(lambda tx: sources.of_job(tx, job_id))
    return None if kept is None else kept.repo
