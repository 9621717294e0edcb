"""The engine's ports: what it needs from a model, a forge, and whoever says who each agent is.

`Model` and `Forge` are what the world implements: the Anthropic adapter and the scripted
models; the GitHub App's forge, `teaparty run`'s local one, and the tests' FakeForge.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from orchestrator.core.messages import AssistantTurn, Message, ToolCall, ToolResult, Usage
from orchestrator.core.tools import ToolSpec
from orchestrator.jobs.levels import LevelCost

if TYPE_CHECKING:  # records of the engine's own modules, which import this one
    from orchestrator.bus.gates import Gate
    from orchestrator.jobs.office import JobHandle
    from orchestrator.jobs.rounds import PullState, ReviewRound
    from orchestrator.proxy.decisions import ProxyDecision
    from orchestrator.teams.board import Task

Clock = Callable[[], float]
"""Seconds since the epoch, injectable so waits can be tested without waiting."""


@dataclass(frozen=True)
class Deadline:
    """When a run stops starting work (runner mode's time limit), on the caller's clock."""

    at: float
    clock: Clock

    def passed(self) -> bool:
        """Whether it has come."""
        return self.clock() >= self.at

    def left(self) -> float:
        """Seconds until it comes; negative once it has."""
        return self.at - self.clock()


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


JobState = Literal["planning", "working", "waiting", "delivering", "done", "failed", "cancelled"]


@dataclass(frozen=True)
class JobStatus:
    """A job as its requester should see it now."""

    job_id: int
    title: str
    state: JobState
    step: str
    tasks: tuple[Task, ...]
    usage: Usage
    cost_usd: float
    branch: str
    result: str | None = None
    link: str | None = None  # the change request, once there is one
    error: str | None = None
    sandbox: str = ""  # how the job's agents are confined (Office.sandbox_summary)
    waiting: str | None = None  # what it waits out (a model outage, a rate limit), and until when
    paused_by: str | None = None  # who holds it: no new model calls until they resume it
    steering: tuple[str, ...] = ()  # direction its decider gave the lead, oldest first
    rounds: tuple[str, ...] = ()  # its review rounds on the change request, one line each
    levels: tuple[LevelCost, ...] = ()  # what each level of the organisation spent
    budget_note: str | None = None  # said once the job has used 80% of a cap
    pull: PullState | None = None  # what became of its change request, once there is one


class Forge(Protocol):
    """Where a job came from and goes back to (GitHub, a terminal, a test)."""

    async def show(self, status: JobStatus) -> None:
        """Create or update the job's one status report."""
        ...

    async def ask(
        self, status: JobStatus, gate: Gate, *, suggestion: ProxyDecision | None = None
    ) -> None:
        """Put a gate's question to its decider, once per gate, with the proxy's prediction
        as a suggestion where it made one."""
        ...

    async def proxy_answered(self, status: JobStatus, gate: Gate, decision: ProxyDecision) -> None:
        """Say, once per gate, that the proxy answered it for the decider: its answer,
        confidence, measured agreement and reasons, and how to override it."""
        ...

    async def deliver(self, status: JobStatus, job: JobHandle) -> str:
        """Publish the job branch and open (or update) its change request; its link.

        Raises ForgeError (or GitError) when that fails.
        """
        ...

    async def deliver_round(
        self, status: JobStatus, job: JobHandle, review: ReviewRound
    ) -> str | None:
        """Deliver a review round: take in what people pushed to the branch meanwhile, push
        once (never forcing), reply once to each point the lead answered (never resolving a
        thread), say what the round did, and ask its reviewers to review again; the commit
        pushed (None: nothing was).

        Raises ForgeError (or GitError) when that fails.
        """
        ...

    async def fail(self, status: JobStatus, error: str) -> None:
        """Say what failed and how to retry; the job stays resumable."""
        ...

    async def remind(self, status: JobStatus, gate: Gate, *, days: float) -> None:
        """Remind the decider, once, of a question open for `days`."""
        ...

    async def close_idle(self, status: JobStatus, gate: Gate, *, days: float) -> None:
        """Say, once, that the job closed after `days` without an answer, and how to
        resume it."""
        ...

    async def credentials(self) -> str | None:
        """The HTTP header git sends to the job's source to fetch it (None: none needed)."""
        ...
