"""The organisation at work on one machine: engine, workspace, agents and tools, wired once.

A job enters at the office manager, who hands it to the project lead; the lead plans it on
the task board and dispatches tasks to mini-teams (directly, or through a workgroup lead);
the engine merges approved task branches into the job branch. `Office` is what the CLI,
the App and the tests drive.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.agents.engine import Engine
from orchestrator.agents.roster import ConfigAgents
from orchestrator.agents.toolbox import ALL_SPECS, Toolbox
from orchestrator.bus.gates import Gate
from orchestrator.bus.messages import Usage
from orchestrator.bus.routing import Router, organisation_teams, project_teams
from orchestrator.config import AgentDef, Organisation, Project
from orchestrator.jobs.budget import JobBudget, Limits
from orchestrator.models.pricing import shipped_prices
from orchestrator.ports import AgentSpec, Model
from orchestrator.sandbox.confine import Network, Sandbox
from orchestrator.store.sqlite import now
from orchestrator.teams import board_tools
from orchestrator.teams.board import summarize
from orchestrator.teams.coordinator import TeamAgents
from orchestrator.teams.tools import TEAM_TOOLS, TeamTools
from orchestrator.workspace import file_tools as worktree_tools
from orchestrator.workspace.layout import JobSpace, Workspace
from orchestrator.workspace.tools import WorkspaceTools

Approver = Callable[[Gate], Awaitable[str]]
WRITE_TOOLS = frozenset({"write_file", "edit_file"})


@dataclass(frozen=True)
class JobHandle:
    """A started (or found) job and its workspace."""

    job_id: int
    conversation_id: str
    space: JobSpace
    created: bool


class JobFailedError(RuntimeError):
    """A conversation of the job raised; the job stays in the store for a restart."""


def workgroup_order(project: Project) -> list[str]:
    """The project's workgroups, the default for a task first (the first that can write)."""
    names = [w.name for w in project.workgroups]
    writers = [
        w.name
        for w in project.workgroups
        if any({"write_file", "edit_file"} & set(m.tools) for m in w.members)
    ]
    return writers[:1] + [n for n in names if n not in writers[:1]]


class Office:
    """One engine over one state directory, with every project it serves."""

    def __init__(
        self,
        engine: Engine,
        workspace: Workspace,
        org: Organisation,
        projects: Sequence[Project],
        *,
        agents: ConfigAgents,
        board: board_tools.BoardTools,
        sandbox: Sandbox,
        scripted: bool = False,
    ) -> None:
        self.engine = engine
        self.sandbox = sandbox
        self.scripted = scripted
        self.workspace = workspace
        self.org = org
        self.projects = {p.name: p for p in projects}
        self.agents = agents
        self.board = board
        self.limits: dict[str, Limits] = {
            p.name: (p.budget.max_usd, p.budget.max_tokens) for p in projects
        }

    @classmethod
    async def open(
        cls,
        home: Path,
        *,
        org: Organisation,
        projects: Sequence[Project],
        models: Callable[[AgentDef], Model],
        env: Mapping[str, str],
        sandbox: Sandbox,
        scripted: bool = False,
        learnings: Mapping[str, str] | None = None,
        concurrency: int = 8,
    ) -> Office:
        """Open the store under `home`, wire the organisation, and clean up after a crash.

        `sandbox` is how agents' processes are confined (sandbox_probe.probe); `env` is
        the environment agents' allowlisted variables come from; `scripted` says the
        models are the scripted stand-in, which calls no shell and so needs no sandbox.
        """
        router = Router(organisation_teams(org, projects))
        configured = ConfigAgents(
            org, projects, router=router, models=models, tool_specs=ALL_SPECS, learnings=learnings
        )
        toolbox = Toolbox({})
        engine = await Engine.open(
            home / "teaparty.db",
            agents=TeamAgents(configured),
            router=router,
            tools=toolbox,
            concurrency=concurrency,
        )
        owner = sandbox.run_as if sandbox.confined else None
        workspace = Workspace(home, engine.store, owner=owner)
        store = engine.store
        board = board_tools.BoardTools(
            store,
            lambda cid: board_tools.job_of_conversation(store, cid),
            {p.name: workgroup_order(p) for p in projects},
        )
        office = cls(
            engine,
            workspace,
            org,
            projects,
            agents=configured,
            board=board,
            sandbox=sandbox,
            scripted=scripted,
        )
        files = WorkspaceTools(
            store,
            workspace,
            parent_env=env,
            sandbox=sandbox,
            writes=office._writes,
            network=office.network,
        )
        team = TeamTools(store, workspace, office.projects)
        toolbox.runners.update(
            Toolbox.of((files, worktree_tools.SPECS), (board, board_tools.SPECS)).runners
        )
        toolbox.runners.update(dict.fromkeys(TEAM_TOOLS, team))
        engine.scheduler.runner.budget = office._budget(configured)
        engine.scheduler.runner.checkpoint = office._checkpoint
        await workspace.recover()
        return office

    def _writes(self, address: str) -> bool:
        definition = self.agents.definition(address)
        return definition is not None and bool(WRITE_TOOLS & set(definition.tools))

    def network(self, project: str) -> Network:
        """What the project's agents' processes may reach (its `sandbox.network`)."""
        found = self.projects.get(project)
        setting = "off" if found is None else found.sandbox.network
        if isinstance(setting, tuple):
            return Network(hosts=setting)
        return Network(open=setting == "open")

    def sandbox_summary(self, project: str) -> str:
        """One line on how the project's agents are confined, for its status report."""
        network = self.network(project).describe()
        if self.sandbox.mode == "off":
            return (
                "OFF (TEAPARTY_SANDBOX=off): agents' processes run unconfined on the App's "
                f"host; network: {network}"
            )
        if self.sandbox.mode == "unavailable":
            return "none on this host: agents' shells do not run"
        name = {"bwrap": "bubblewrap", "landlock": "Landlock"}[self.sandbox.mode]
        return f"{name}, the task's worktree only; network: {network}"

    def require_sandbox(self, project: str) -> None:
        """Raise SandboxError when the project's agents have a shell this host cannot confine."""
        found = self.projects.get(project)
        if found is None or self.scripted:
            return
        agents = [found.lead, *(a for w in found.workgroups for a in (w.lead, *w.members))]
        if any("shell" in agent.tools for agent in agents):
            self.sandbox.require()

    def add_project(self, project: Project, *, learnings: str | None = None) -> None:
        """Serve one more project (or a changed one) from now on: routes, agents, budget."""
        known = self.projects.get(project.name)
        self.projects[project.name] = project
        self.limits[project.name] = (project.budget.max_usd, project.budget.max_tokens)
        self.board.workgroups[project.name] = workgroup_order(project)
        if known != project:
            self.engine.scheduler.runner.router.extend(project_teams(self.org, project))
        self.agents.add_project(project, learnings=learnings)

    async def _checkpoint(self, conversation_id: str, spec: AgentSpec) -> str | None:
        """A lead's checkpoint carries the board as the engine has it, not as remembered."""
        if "task_list" not in {tool.name for tool in spec.tools}:
            return None
        job_id = await board_tools.job_of_conversation(self.engine.store, conversation_id)
        if job_id is None:
            return None
        board = await self.engine.store.read(lambda tx: summarize(tx, job_id))
        return f"The task board at this checkpoint:\n{board}"

    def _budget(self, agents: ConfigAgents) -> JobBudget:
        prices = shipped_prices()

        def price(address: str, usage: Usage) -> float:
            definition = agents.definition(address)
            return 0.0 if definition is None else prices.cost_usd(definition.model, usage)

        return JobBudget(
            self.engine.store, max_usd=None, max_tokens=None, price=price, per_project=self.limits
        )

    async def start_job(
        self,
        *,
        project: str,
        key: str,
        title: str,
        brief: str,
        repo: str,
        source: str,
        start: str,
        branch: Callable[[int], str],
        slug: str,
        auth: str | None = None,
    ) -> JobHandle:
        """Start a job once per key at the office manager, with its branch and worktree.

        `repo` names the mirror, `source` is where it is fetched from (`auth`: an HTTP
        header git sends to it alone), `start` the commit the job branch starts at,
        `branch(job_id)` the job branch's name. The job's first turn waits until its
        workspace exists.
        """
        self.require_sandbox(project)
        job = await self.engine.bus.start_job(
            job_key=key,
            project=project,
            title=title,
            agent=self.org.office_manager.name,
            brief=brief,
            max_parallel=self.projects[project].parallel,
            wake=False,
        )
        mirror = await self.workspace.mirror(repo, source, auth=auth)
        space = await self.workspace.open_job(
            job.job_id, mirror=mirror, branch=branch(job.job_id), start=start, slug=slug
        )
        self.engine.scheduler.wake([job.conversation_id])
        return JobHandle(job.job_id, job.conversation_id, space, job.created)

    async def run(self, job: JobHandle, approve: Approver) -> str | None:
        """Run the job until it ends, asking `approve` at each gate; its final reply."""
        scheduler = self.engine.scheduler
        while True:
            await scheduler.run_until_idle()
            if scheduler.failures:
                failed = "; ".join(f"{c}: {e}" for c, e in scheduler.failures.items())
                raise JobFailedError(f"job {job.job_id} stopped: {failed}")
            gates = await self.engine.bus.open_gates(job.job_id)
            if not gates:
                break
            for gate in gates:
                project = self.projects[await self._project(job.job_id)]
                answer = await approve(gate)
                await self.engine.bus.answer_gate(
                    gate.gate_id, text=answer, answered_by=project.humans.decider
                )
        snapshot = await self.engine.bus.snapshot(job.conversation_id)
        return snapshot.conversation.result

    async def finish_job(self, job: JobHandle, result: str | None) -> None:
        """Record the job complete and give back its worktrees (its branches stay)."""
        await self.engine.store.write(
            lambda tx: tx.execute(
                "UPDATE jobs SET state = 'complete', result = ?, updated_at = ?"
                " WHERE job_id = ? AND state = 'active'",
                (result, now(), job.job_id),
            )
        )
        await self.workspace.close_job(job.space)

    async def _project(self, job_id: int) -> str:
        row = await self.engine.store.read(
            lambda tx: tx.execute("SELECT project FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        )
        return str(row[0])

    async def close(self) -> None:
        """Close the engine (the store is flushed) and the sandbox's proxies."""
        await self.sandbox.close()
        await self.engine.close()
