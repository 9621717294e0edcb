"""Test doubles shared by the suite: a function model, agents that use it, a small org."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from orchestrator.agents.ports import AgentSpec
from orchestrator.agents.tools import BUS_SPECS
from orchestrator.bus.gates import Gate
from orchestrator.bus.routing import Router, Team
from orchestrator.core.messages import AssistantTurn, Message, ToolCall
from orchestrator.core.model import Model, ModelRequest
from orchestrator.core.tools import ToolSpec
from orchestrator.models import scripted

if TYPE_CHECKING:  # the bus's tests import these fakes with nothing above the bus
    from orchestrator.jobs.driver import JobDriver
    from orchestrator.jobs.ports import Delivered, JobState, PushTarget


class FunctionModel(scripted.FunctionModel):
    """The engine's function model, also tracking how many calls run per conversation."""

    def __init__(self, fn: scripted.ReplyFn) -> None:
        super().__init__(fn)
        self.running: dict[str, int] = {}
        self.max_parallel_per_conversation = 0

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        key = request.messages[0].conversation_id if request.messages else request.agent
        self.running[key] = self.running.get(key, 0) + 1
        self.max_parallel_per_conversation = max(
            self.max_parallel_per_conversation, self.running[key]
        )
        try:
            reply = await super().complete(request)
            await asyncio.sleep(0)
            return reply
        finally:
            self.running[key] -= 1


@dataclass
class StaticAgents:
    """Every address runs the same model with the bus tools."""

    model: Model
    tools: tuple[ToolSpec, ...] = field(default_factory=lambda: tuple(BUS_SPECS.values()))

    def spec(self, address: str) -> AgentSpec:
        return AgentSpec(address, f"You are {address}.", self.tools, self.model)


def send(call_id: str, member: str, message: str, context_id: str | None = None) -> ToolCall:
    args = {"member": member, "message": message}
    if context_id is not None:
        args["context_id"] = context_id
    return ToolCall(call_id, "send", args)


def say(text: str) -> AssistantTurn:
    return AssistantTurn(text=text)


def calls(*tool_calls: ToolCall, text: str = "") -> AssistantTurn:
    return AssistantTurn(text=text, tool_calls=tool_calls)


def replies(messages: tuple[Message, ...]) -> list[Message]:
    """The tool results after the last assistant message."""
    tail: list[Message] = []
    for message in reversed(messages):
        if message.role == "assistant":
            break
        tail.append(message)
    return [m for m in reversed(tail) if m.role == "tool"]


OM = "office-manager"
LEAD = "widgets/project-lead"
CODING_LEAD = "widgets/coding/coding-lead"
IMPLEMENTER = "widgets/coding/implementer"
REVIEWER = "widgets/coding/spec-reviewer"
RESEARCH_LEAD = "widgets/research/research-lead"
RESEARCHER = "widgets/research/researcher"
OTHER_LEAD = "gadgets/project-lead"


def org_router() -> Router:
    """Two projects; widgets has a coding and a research workgroup."""
    return Router(
        [
            Team(OM, (LEAD, OTHER_LEAD), aliases={"widgets": LEAD, "gadgets": OTHER_LEAD}),
            Team(
                LEAD,
                (CODING_LEAD, RESEARCH_LEAD),
                aliases={"coding": CODING_LEAD, "research": RESEARCH_LEAD},
            ),
            Team(CODING_LEAD, (IMPLEMENTER, REVIEWER), mesh=True),
            Team(RESEARCH_LEAD, (RESEARCHER,), mesh=True),
        ]
    )


@dataclass
class FakeForge:
    """A Forge that records every call, answers gates from a script, and fails on cue.

    `answers` maps a gate's question prefix to the decider's reply (an unexpected gate
    raises); `deliver_errors` are raised by the first deliveries, in order.
    """

    office: Any
    answers: dict[str, str] = field(default_factory=dict)
    deliver_errors: list[Exception] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)
    asked: list[int] = field(default_factory=list)
    delivered: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    statuses: list[Any] = field(default_factory=list)
    leave_open: bool = False  # ask every gate and answer none (a decider who never replies)
    reminded: list[int] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)
    suggestions: dict[int, Any] = field(default_factory=dict)
    proxy_answers: list[tuple[int, Any]] = field(default_factory=list)
    rounds_delivered: list[Any] = field(default_factory=list)

    async def show(self, status: Any) -> None:
        self.shown.append(status.state)
        self.statuses.append(status)

    async def ask(self, status: Any, gate: Any, *, suggestion: Any = None) -> None:
        self.suggestions[gate.gate_id] = suggestion
        if gate.gate_id in self.asked:
            return
        if self.leave_open:
            self.asked.append(gate.gate_id)
            return
        reply = next((a for q, a in self.answers.items() if gate.question.startswith(q)), None)
        if reply is None:
            raise AssertionError(f"unexpected gate: {gate.question!r}")
        self.asked.append(gate.gate_id)
        await self.office.answer_gate(gate.gate_id, text=reply, answered_by="decider")

    async def proxy_answered(self, status: Any, gate: Any, decision: Any) -> None:
        self.proxy_answers.append((gate.gate_id, decision))

    async def push_target(self, job: Any) -> PushTarget | None:
        return None  # nothing pushed: a test that wants the push names a remote

    async def deliver(self, status: Any, job: Any) -> Delivered:
        if self.deliver_errors:
            raise self.deliver_errors.pop(0)
        self.delivered.append(job.space.branch)
        from orchestrator.jobs.ports import Delivered

        return Delivered(f"fake://{job.space.branch}")

    async def deliver_round(self, status: Any, job: Any, review: Any, ledger: Any) -> str | None:
        if self.deliver_errors:
            raise self.deliver_errors.pop(0)
        self.rounds_delivered.append(review)
        return job.head

    async def fail(self, status: Any, error: str) -> None:
        self.failed.append(error)

    async def remind(self, status: Any, gate: Any, *, days: float) -> None:
        self.reminded.append(gate.gate_id)

    async def close_idle(self, status: Any, gate: Any, *, days: float) -> None:
        self.closed.append(gate.gate_id)

    async def credentials(self) -> str | None:
        return None


@dataclass
class PushingForge(FakeForge):
    """A FakeForge that pushes the job branch to `remote` as a real forge does (sending
    `auth`, when given, as git's HTTP header), and leaves the gates of the kinds in `held`
    open for the test to answer."""

    remote: Path | None = None
    held: tuple[str, ...] = ()
    auth: str | None = None

    async def ask(self, status: Any, gate: Any, *, suggestion: Any = None) -> None:
        if gate.kind in self.held:
            if gate.gate_id not in self.asked:
                self.asked.append(gate.gate_id)
            return
        await super().ask(status, gate, suggestion=suggestion)

    async def push_target(self, job: Any) -> PushTarget:
        from orchestrator.jobs.ports import PushTarget

        assert self.remote is not None
        return PushTarget(str(self.remote), auth=self.auth)

    async def credentials(self) -> str | None:
        return self.auth


# What a test's gate asks unless it says otherwise.
ASKED = {
    "conversation_id": "c",
    "call_id": "q",
    "kind": "plan",
    "question": "Go?",
    "options": (),
    "asked_by": "lead",
}


def unanswered_gate(gate_id: int, job_id: int, **fields: Any) -> Gate:
    """A gate as stored, not answered: ASKED but for `fields` (any of Gate's)."""
    unanswered = {"answer": None, "answered_by": None, "answered_via": None}
    return Gate(gate_id=gate_id, job_id=job_id, **(ASKED | unanswered | fields))


def one_forge(forge: Any) -> Callable[[int], Awaitable[Any]]:
    """A JobDriver's `forges`: `forge` for every job."""

    async def forges(_: int) -> Any:
        return forge

    return forges


@dataclass
class HeldJob:
    """A job on `repo` its `driver` syncs through a PushingForge (`forge`); a subclass names
    the `slug` its job was started with (the job branch is `teaparty/job-<id>-<slug>`)."""

    office: Any
    forge: PushingForge
    driver: JobDriver
    repo: Path
    job_id: int
    slug: ClassVar[str] = ""

    @property
    def branch(self) -> str:
        return f"teaparty/job-{self.job_id}-{self.slug}"

    async def drive(self) -> JobState:
        """Sync and run until the job is done or failed, or waits on an open gate."""
        while (state := await self.driver.sync(self.job_id)) not in ("done", "failed"):
            if await self.office.open_gates(self.job_id):
                return state
            await self.office.run_until_idle(self.job_id)
        return state

    async def gate(self) -> Any:
        """The job's one open gate."""
        (gate,) = await self.office.open_gates(self.job_id)
        return gate

    async def waiting(self) -> Any:
        """Drive the job, which must then wait; the one open gate it waits on."""
        assert await self.drive() == "waiting"
        return await self.gate()


class SteppingClock:
    """A clock that moves only when something sleeps on it; no test waits for real."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


@dataclass
class FakeForgeObjects:
    """The forge objects a GitHubForge keeps in the engine's store, kept in a dict: a test
    drops one (`objects.pop`) as a crash between making and recording it would."""

    objects: dict[tuple[int, str], Any] = field(default_factory=dict)

    async def forge_object(self, job_id: int, key: str) -> Any:
        return self.objects.get((job_id, key))

    async def forge_object_ids(self, job_id: int) -> frozenset[str]:
        return frozenset(o.external_id for (j, _), o in self.objects.items() if j == job_id)

    async def record_forge_object(
        self, job_id: int, key: str, external_id: str, digest: str, *, at: float | None = None
    ) -> None:
        from orchestrator.jobs.records import ForgeObject

        self.objects[job_id, key] = ForgeObject(external_id, digest, at or 0.0)
