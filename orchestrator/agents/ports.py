"""What running an agent needs besides a model: who each agent is, a runner for its tools,
and a budget that says when its job may spend no more."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from orchestrator.core.messages import ToolCall, ToolResult
from orchestrator.core.model import Model
from orchestrator.core.tools import ToolSpec


class ToolRunner(Protocol):
    """Runs the tools an agent calls other than the bus tools."""

    async def run(self, agent: str, conversation_id: str, call: ToolCall) -> ToolResult:
        """Run one call; a failure the model can fix comes back as an error result."""
        ...


@dataclass(frozen=True)
class AgentSpec:
    """An agent as the engine runs it."""

    address: str
    system: str
    tools: tuple[ToolSpec, ...]
    model: Model
    max_turns: int = 40
    context_tokens: int = 100_000
    wall_time_s: float = 3600.0
    # The tools it may call: the configuration's list for the agent (a mini-team's members
    # are sent the same definitions, so that they share one cached prefix, and each calls
    # only its own); None lets it call whatever the engine runs (stand-ins in tests).
    allowed: frozenset[str] | None = None

    def may_call(self, name: str) -> bool:
        """Whether the engine runs a call of the tool `name` for this agent."""
        return self.allowed is None or name in self.allowed


class Agents(Protocol):
    """Looks up the agent that runs at an address."""

    def spec(self, address: str) -> AgentSpec:
        """The agent at `address`."""
        ...


@dataclass(frozen=True)
class Refusal:
    """Why a job may not make a model call now: `held` while a person decides (the turn
    waits, as a paused job's does), else for good (the turn stops with `reason`)."""

    reason: str
    held: bool = False


class Budget(Protocol):
    """Says when a job has spent what it may."""

    async def admit(self, job_id: int, conversation_id: str | None = None) -> Refusal | None:
        """Whether the job (and the mini-team `conversation_id` belongs to, if any) may make
        another model call: None, or why not."""
        ...


class NoTools:
    """A ToolRunner for agents whose only tools are the bus tools."""

    async def run(self, agent: str, conversation_id: str, call: ToolCall) -> ToolResult:
        """Refuse: the tool does not exist here."""
        return ToolResult(call.call_id, f"unknown tool {call.name!r}", is_error=True)
