"""The engine and its tools for one state directory, built before the Office that holds them.

`assemble` opens the store and builds, in order, the workspace and every tool agents use,
then the engine with its budget and checkpoint; `Office.open` hands the parts to the Office
and joins the few that need it (the egress desk, the repository's instructions, recall).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict, Unpack

from orchestrator.agents.engine import Engine
from orchestrator.agents.roster import ConfigAgents
from orchestrator.agents.toolbox import Toolbox
from orchestrator.agents.tools import BUS_SPECS
from orchestrator.bus.routing import Router, organisation_teams
from orchestrator.config import AgentDef, Organisation, Project
from orchestrator.config.prices import org_prices
from orchestrator.core.model import Model
from orchestrator.core.secrecy import KnownSecrets, SecretValues
from orchestrator.core.secret_scan import Scanner
from orchestrator.core.tools import ToolSpec
from orchestrator.jobs import review_tools, wiring
from orchestrator.jobs.budget import JobBudget
from orchestrator.jobs.checks import JobChecks
from orchestrator.jobs.features import FEATURES, Register, extensions
from orchestrator.jobs.flat_lead import FlatLead
from orchestrator.jobs.flat_manager import FlatManager
from orchestrator.jobs.review_tools import ReviewTools
from orchestrator.jobs.setups import JobSetups
from orchestrator.sandbox.confine import Sandbox
from orchestrator.setup.cache import SetupCache, bound_from_env
from orchestrator.setup.checks import Checker
from orchestrator.setup.prepare import Preparer
from orchestrator.store.sqlite import Store
from orchestrator.teams import board as task_board
from orchestrator.teams import board_tools
from orchestrator.teams.coordinator import TeamAgents
from orchestrator.teams.tools import TEAM_TOOLS, TeamTools
from orchestrator.teams.transactions import mini_teams
from orchestrator.workspace import file_tools as worktree_tools
from orchestrator.workspace.inventory import Inventories
from orchestrator.workspace.layout import Workspace
from orchestrator.workspace.tools import WorkspaceTools

# Every tool an agent can declare, by name (the organisation's `tools:` name them).
ALL_SPECS: Mapping[str, ToolSpec] = {
    **BUS_SPECS,
    **extensions().specs,
    **worktree_tools.SPECS,
    **board_tools.SPECS,
    **review_tools.SPECS,
}


@dataclass(frozen=True)
class Assembly:
    """What `assemble` built: the engine, the projects served by name, and the parts the
    Office holds or joins."""

    engine: Engine
    workspace: Workspace
    served: dict[str, Project]
    agents: ConfigAgents
    router: Router
    board: board_tools.BoardTools
    budget: JobBudget
    secrets: SecretValues
    setups: JobSetups
    checks: JobChecks
    inventories: Inventories | None
    files: WorkspaceTools
    team: TeamTools
    org: Organisation
    sandbox: Sandbox
    scripted: bool


class Opening(TypedDict):
    """What an Office is opened with (`Office.open`, `assemble`).

    `sandbox` is how agents' processes are confined (sandbox.probe); `env` is the
    environment agents' allowlisted variables come from; `scripted` says the models are the
    scripted stand-in, which calls no shell and so needs no sandbox; `features` register what
    they add to the bus (the standard ones by default); `secrets` are the secret values the
    engine holds (by default, `env`'s secret-named variables), which no push may carry
    (jobs/secret_check.py).
    """

    org: Organisation
    projects: Sequence[Project]
    models: Callable[[AgentDef], Model]
    env: Mapping[str, str]
    sandbox: Sandbox
    scripted: NotRequired[bool]
    learnings: NotRequired[Mapping[str, str] | None]
    concurrency: NotRequired[int]
    features: NotRequired[Sequence[Register]]
    secrets: NotRequired[SecretValues | None]


async def assemble(home: Path, **opening: Unpack[Opening]) -> Assembly:
    """Open the store under `home` and build the engine over it."""
    org, projects, models = opening["org"], opening["projects"], opening["models"]
    env, sandbox, scripted = opening["env"], opening["sandbox"], opening.get("scripted", False)
    learnings, secrets = opening.get("learnings"), opening.get("secrets")
    features = opening.get("features", FEATURES)
    served = {p.name: p for p in projects}
    router = Router(organisation_teams(org, projects, added=mini_teams))
    store = await Store.open(home / "teaparty.db")

    leads = {org.project_lead, *(p.lead.name for p in projects)}

    def model_of(agent: AgentDef) -> Model:  # turns that add nothing: the engine's
        model = models(agent)
        if agent == org.office_manager:
            return FlatManager(model, store)
        return FlatLead(model, store) if agent.name in leads else model

    configured = ConfigAgents(
        org, projects, router=router, models=model_of, tool_specs=ALL_SPECS, learnings=learnings
    )
    owner = sandbox.run_as if sandbox.confined else None
    workspace = Workspace(home, store, tasks=task_board, owner=owner, uids=sandbox.uids)
    board = board_tools.BoardTools(
        store,
        lambda cid: board_tools.job_of_conversation(store, cid),
        {p.name: wiring.workgroup_order(p) for p in projects},
    )
    known = KnownSecrets.of(env) if secrets is None else secrets
    forget: Callable[[Path], None] = workspace.uids.forget if workspace.uids else lambda _: None

    def mask(text: str) -> str:  # the secrets the engine holds, out of what setups print
        return Scanner(known.values()).redact(text)

    setups = JobSetups(
        Preparer(
            sandbox,
            SetupCache(home / "setup", bound_mb=bound_from_env(env)),
            parent_env=env,
            allowed=getattr(known, "setup", ()),
            owner=workspace.owner_of,
            forget=forget,
            mask=mask,
        ),
        served,
        functools.partial(wiring.repository, store),
    )
    checks = JobChecks(
        store,
        Checker(
            sandbox,
            home / "checks",
            parent_env=env,
            owner=workspace.owner_of,
            forget=forget,
            mask=mask,
        ),
        served,
        setups=setups,
        network=functools.partial(wiring.network, served),
    )
    files = WorkspaceTools(
        store,
        workspace,
        parent_env=env,
        sandbox=sandbox,
        writes=functools.partial(wiring.writes, configured),
        network=functools.partial(wiring.network, served),
        prepared=setups.prepared,
    )
    toolbox = Toolbox.of(
        (files, worktree_tools.SPECS),
        (board, board_tools.SPECS),
        (ReviewTools(store, workspace), review_tools.SPECS),
    )
    bus_extensions = extensions(features)
    team = TeamTools(store, workspace, served, checks.check, content=bus_extensions.content)
    toolbox.runners.update(dict.fromkeys(TEAM_TOOLS, team))
    prices = org_prices(org.directory)
    budget = wiring.budget(store, configured, served, prices, proxy=org.proxy.name)
    engine = Engine.over(
        store,
        agents=TeamAgents(configured),
        router=router,
        tools=toolbox,
        budget=budget,
        checkpoint=functools.partial(wiring.checkpoint, store),
        concurrency=opening.get("concurrency", 8),
        extensions=bus_extensions,
    )
    inventories = (
        None
        if scripted or sandbox.mode == "unavailable"
        else Inventories(sandbox, parent_env=env, home=home)
    )
    return Assembly(
        engine,
        workspace,
        served,
        configured,
        router,
        board,
        budget,
        known,
        setups,
        checks,
        inventories,
        files,
        team,
        org,
        sandbox,
        scripted,
    )
