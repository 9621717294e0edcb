"""Agents as the configuration defines them, looked up by address.

Context discipline lives here and in Send: an agent's standing context is its role prompt,
where it sits and whom it can reach, what its shell has (if it has one), its repository's
instructions for agents, and its project's standing learnings. Its first message is only
the brief its sender composed; it never sees the sender's history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from orchestrator.agents.ports import AgentSpec
from orchestrator.bus.routing import Router
from orchestrator.config import AgentDef, Organisation, Project, Workgroup
from orchestrator.core.errors import OrchestratorError
from orchestrator.core.model import Model
from orchestrator.core.tools import ToolSpec


class UnknownAgentError(OrchestratorError):
    """An address names no agent of the configuration."""


class ConfigAgents:
    """The Agents port over an organisation and its projects."""

    def __init__(
        self,
        org: Organisation,
        projects: Sequence[Project],
        *,
        router: Router,
        models: Callable[[AgentDef], Model],
        tool_specs: Mapping[str, ToolSpec],
        learnings: Mapping[str, str] | None = None,
    ) -> None:
        self.router = router
        self.models = models
        self.tool_specs = tool_specs
        self.learnings = dict(learnings or {})
        self.shells: dict[str, str] = {}  # by project: what an agent's shell has
        self.instructions: dict[str, str] = {}  # by project: the repository's own, for agents
        self._agents: dict[str, tuple[AgentDef, str]] = {
            org.office_manager.name: (org.office_manager, "the office manager"),
            org.proxy.name: (org.proxy, "the human proxy of the management team"),
        }
        self._specs: dict[str, AgentSpec] = {}
        self._teams: dict[str, Team] = {}  # a mini-team member's address: its team
        self.preferences: dict[str, list[str]] = {}
        for project in projects:
            self.add_project(project)

    def add_project(self, project: Project, *, learnings: str | None = None) -> None:
        """Add (or replace) a project's agents; every spec is rebuilt, as routes changed."""
        self._agents[f"{project.name}/{project.lead.name}"] = (
            project.lead,
            f"the project lead of project {project.name}",
        )
        for workgroup in project.workgroups:
            self._add_workgroup(project, workgroup)
        if learnings is not None:
            self.learnings[project.name] = learnings
        self._specs.clear()

    def _add_workgroup(self, project: Project, workgroup: Workgroup) -> None:
        base = f"{project.name}/{workgroup.name}"
        self._agents[f"{base}/{workgroup.lead.name}"] = (
            workgroup.lead,
            f"the lead of workgroup {workgroup.name} in project {project.name}",
        )
        for member in workgroup.members:
            self._agents[f"{base}/{member.name}"] = (
                member,
                f"a member of workgroup {workgroup.name} in project {project.name}",
            )
        team = Team.of(workgroup, project.name)
        if len(team.members) > 1:  # a worker and its reviewers
            self._teams |= {f"{base}/{member.name}": team for member in team.members}

    def definition(self, address: str) -> AgentDef | None:
        """The configured agent at `address`, or None."""
        found = self._agents.get(address)
        return None if found is None else found[0]

    def tell_shell(self, project: str, text: str) -> None:
        """What the project's agents that have a shell are told it has, from now on."""
        if self.shells.get(project) != text:
            self.shells[project] = text
            self._specs.clear()

    def tell_instructions(self, project: str, text: str) -> None:
        """The repository's instruction files every agent of the project reads, from now on."""
        if self.instructions.get(project, "") != text:
            self.instructions[project] = text
            self._specs.clear()

    def remember(self, preferences: Mapping[str, list[str]]) -> None:
        """The preferences each project's decider asked to be remembered (`/remember`)."""
        self.preferences = {project: list(kept) for project, kept in preferences.items()}
        self._specs.clear()

    def spec(self, address: str) -> AgentSpec:
        """The agent at `address`, with its prompt, tools, model and turn limit."""
        if address not in self._specs:
            self._specs[address] = self._build(address)
        return self._specs[address]

    def _build(self, address: str) -> AgentSpec:
        try:
            agent, position = self._agents[address]
        except KeyError:
            raise UnknownAgentError(f"no agent at {address!r} in this configuration") from None
        team = self._teams.get(address)
        names = team.tools if team is not None else agent.tools
        missing = [t for t in names if t not in self.tool_specs]
        if missing:
            raise OrchestratorError(f"agent {agent.name!r}: no implementation of tools {missing}")
        if team is not None:
            system = self.team_prompt(address, team)
        else:
            system = self.system_prompt(address, agent, position)
        return AgentSpec(
            address,
            system,
            tuple(self.tool_specs[t] for t in names),
            self.models(agent),
            agent.max_turns,
            context_tokens=agent.context_tokens,
            allowed=frozenset(agent.tools),
        )

    def team_prompt(self, address: str, team: Team) -> str:
        """One system prompt for every member of a mini-team (with the same tool definitions,
        the prefix its reviewers read from the cache after its worker wrote it): each role's
        rules, then what the project gives every agent. The member's brief names its role."""
        parts = [
            f"You are a member of a mini-team of workgroup {team.workgroup} in project "
            f"{team.project}. The engine gives each task a fresh worker and the reviewers its "
            "review level asks for, each in a conversation of its own. Your first message "
            "gives the task, then your role in it: follow that role's rules below and no "
            "other's. Every member is sent the same tool definitions; call only your role's "
            "tools (the engine refuses any other).",
        ]
        for member in team.members:
            tools = ", ".join(member.tools) or "none"
            parts.append(f"## The {member.name}'s rules (tools: {tools})\n{member.prompt.strip()}")
        project = team.project
        if self.shells.get(project) and any("shell" in m.tools for m in team.members):
            parts.append("## Your shell\n" + self.shells[project])
        return "\n\n".join([*parts, *self._project_parts(project)])

    def system_prompt(self, address: str, agent: AgentDef, position: str) -> str:
        """Role prompt, position, reachable members, what its shell has, the repository's
        instructions for agents and the project's standing learnings."""
        parts = [agent.prompt.strip(), f"## Where you are\nYou are {agent.name}, {position}."]
        reachable = sorted(self.router.reachable(address))
        if "send" in agent.tools and reachable:
            parts.append("You can send to: " + ", ".join(reachable) + ".")
        project = address.split("/", 1)[0] if "/" in address else None
        if project and "shell" in agent.tools and self.shells.get(project):
            parts.append("## Your shell\n" + self.shells[project])
        return "\n\n".join([*parts, *(self._project_parts(project) if project else [])])

    def _project_parts(self, project: str) -> list[str]:
        """The repository's instructions for agents, the project's standing learnings and
        what its decider asked to be remembered."""
        parts = []
        if self.instructions.get(project):
            parts.append(self.instructions[project])
        if self.learnings.get(project):
            parts.append("## Standing learnings of this project\n" + self.learnings[project])
        if self.preferences.get(project):
            kept = "\n".join(f"- {text}" for text in self.preferences[project])
            parts.append(f"## What this project's decider asked you to remember\n{kept}")
        return parts


@dataclass(frozen=True)
class Team:
    """The members of a workgroup's mini-teams (its worker and task reviewers), who share
    one system prompt and one list of tool definitions."""

    project: str
    workgroup: str
    members: tuple[AgentDef, ...]

    @classmethod
    def of(cls, workgroup: Workgroup, project: str) -> Team:
        # Not the phase reviewer: once a job, it would cost every task's worker its rules.
        roles = (workgroup.worker_name(), workgroup.spec_reviewer, workgroup.quality_reviewer)
        by_name = {m.name: m for m in workgroup.members}
        named = dict.fromkeys(r for r in roles if r is not None and r in by_name)
        return cls(project, workgroup.name, tuple(by_name[name] for name in named))

    @property
    def tools(self) -> tuple[str, ...]:
        """Every member's tools, each once, in the order the members name them."""
        return tuple(dict.fromkeys(t for m in self.members for t in m.tools))
