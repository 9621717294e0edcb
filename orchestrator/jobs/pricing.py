"""What a job cost, priced from the store alone, as its budget prices it while it runs.

Each agent's tokens are priced at its model's price: the agent is found in the project the
job runs under (the project file it keeps, `jobs.project_text`), its model priced from the
organisation's models.yaml. A job whose project no longer loads, or whose model has no
price, is not priced (None) rather than priced wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.agents.roster import ConfigAgents
from orchestrator.bus.routing import Router
from orchestrator.config import Organisation, Project, load_organisation, load_project
from orchestrator.config.prices import PriceTable, org_prices
from orchestrator.core.errors import ConfigError
from orchestrator.core.messages import Usage
from orchestrator.jobs.features import GATE_KINDS
from orchestrator.jobs.offline import DemoModel


@dataclass
class JobPricing:
    """Prices jobs' tokens per agent; None for every job when the organisation does not load."""

    org: Organisation | None
    prices: PriceTable | None
    _agents: dict[tuple[str, str], ConfigAgents] = field(default_factory=dict)
    _projects: dict[tuple[str, str], Project | None] = field(default_factory=dict)

    @classmethod
    def of(cls, org_dir: Path) -> JobPricing:
        """Pricing under the organisation at `org_dir` and its prices."""
        try:
            org = load_organisation(org_dir)
            return cls(org, org_prices(org.directory))
        except ConfigError:
            return cls(None, None)

    @property
    def proxy(self) -> str:
        """The proxy agent's name, under which its tokens are counted (as the budget does)."""
        return "proxy" if self.org is None else self.org.proxy.name

    def cost(
        self, project: str, project_text: str | None, spent: Mapping[str, Usage]
    ) -> float | None:
        """What `spent` (tokens by agent address) cost in USD; 0 with nothing spent."""
        used = {agent: usage for agent, usage in spent.items() if usage != Usage()}
        if not used:
            return 0.0
        agents = self._roster(project, project_text)
        if agents is None or self.prices is None:
            return None
        total = 0.0
        for address, usage in used.items():
            definition = agents.definition(address)
            if definition is None:
                continue  # as the budget: an agent no longer configured costs nothing
            try:
                total += self.prices.cost_usd(definition.model, usage)
            except ConfigError:
                return None
        return total

    def project(self, project: str, text: str | None) -> Project | None:
        """The project a job runs under, from the file it keeps (None: it does not load)."""
        if self.org is None or text is None:
            return None
        key = (project, text)
        if key not in self._projects:
            try:
                self._projects[key] = load_project(
                    text, org=self.org, source=project, default_name=project, kinds=GATE_KINDS
                ).model_copy(update={"name": project})
            except ConfigError:
                self._projects[key] = None
        return self._projects[key]

    def _roster(self, project: str, text: str | None) -> ConfigAgents | None:
        loaded = self.project(project, text)
        if self.org is None or loaded is None:
            return None
        key = (project, text or "")
        if key not in self._agents:
            self._agents[key] = ConfigAgents(
                self.org,
                [loaded],
                router=Router(()),
                models=lambda _: DemoModel(),  # looked up, never run
                tool_specs={},
            )
        return self._agents[key]
