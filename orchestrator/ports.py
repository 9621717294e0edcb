"""The engine's ports: what it needs from a model and from whoever says who each agent is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from orchestrator.agents.tools import ToolSpec
from orchestrator.bus.messages import AssistantTurn, Message, ToolCall, ToolResult


@dataclass(frozen=True)
class ModelRequest:
    """One model call: who is asking, its standing instructions, its transcript, its tools."""

    agent: str
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]


class Model(Protocol):
    """Messages and tools in, one assistant turn (with token usage) out."""

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        """Return the assistant's next turn."""
        ...


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


class Agents(Protocol):
    """Looks up the agent that runs at an address."""

    def spec(self, address: str) -> AgentSpec:
        """The agent at `address`."""
        ...


class Budget(Protocol):
    """Says when a job has spent what it may."""

    async def exhausted(self, job_id: int) -> str | None:
        """Why the job may not make another model call, or None."""
        ...


class NoTools:
    """A ToolRunner for agents whose only tools are the bus tools."""

    async def run(self, agent: str, conversation_id: str, call: ToolCall) -> ToolResult:
        """Refuse: the tool does not exist here."""
        return ToolResult(call.call_id, f"unknown tool {call.name!r}", is_error=True)
