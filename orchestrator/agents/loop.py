"""The turn loop: decide the next step from the transcript (pure), then carry it out.

A conversation's state is its transcript plus its inbox and pending count, all in the
store. `next_step` reads only that, so a process that died anywhere resumes by calling it
again: a step whose result was committed is never taken twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass

from orchestrator.agents.context import COMPACT_INSTRUCTION, compaction_point, model_view
from orchestrator.agents.ports import Agents, AgentSpec, Budget, NoTools, ToolRunner
from orchestrator.agents.tools import ANSWERED_LATER, BUS_TOOLS, resolve_bus_calls
from orchestrator.bus.conversations import ConversationBus, Step, Tail
from orchestrator.bus.routing import Router
from orchestrator.core.clock import RUN_DEADLINE, Deadline
from orchestrator.core.errors import BusError, TurnDeferred
from orchestrator.core.messages import AssistantTurn, Message, ToolCall, ToolResult
from orchestrator.core.model import ModelRequest

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Consume:
    """Take the inbox into the transcript."""


@dataclass(frozen=True)
class CallModel:
    """Ask the model for the next assistant turn."""


@dataclass(frozen=True)
class RunTools:
    """Run tool calls that have no persisted result yet."""

    calls: tuple[ToolCall, ...]


@dataclass(frozen=True)
class Park:
    """Wait for replies (or a human); the store will wake this conversation."""


@dataclass(frozen=True)
class Idle:
    """Nothing to do until something arrives."""


@dataclass(frozen=True)
class Stop:
    """End the turn with an error reply the sender can act on (a limit was hit)."""

    reason: str


NextStep = Consume | CallModel | RunTools | Park | Idle | Stop


def turns_since_request(transcript: Sequence[Message]) -> int:
    """Model turns taken since the request this conversation is working on arrived."""
    turns = 0
    for message in reversed(transcript):
        if message.role == "user" and message.content.get("kind") == "request":
            break
        turns += message.role == "assistant"
    return turns


REPEATED_ERRORS = 4  # the same tool error this many times running ends the turn


def repeated_error(transcript: Sequence[Message], *, limit: int = REPEATED_ERRORS) -> str | None:
    """The error text when the last `limit` tool results are that same error, else None.

    A model that calls a tool again and again on an error nothing it does can change (a
    workspace that does not exist) makes no progress; anything else it got in between, a
    result that worked or a message, resets the count.
    """
    seen: list[str] = []
    for message in reversed(transcript):
        if message.role == "assistant":
            continue
        if message.role != "tool" or not message.content.get("is_error"):
            return None
        seen.append(message.text)
        if len(seen) == limit:
            return seen[0] if len(set(seen)) == 1 else None
    return None


def limit_reached(transcript: Sequence[Message]) -> str | None:
    """Why the last turn's tool calls must end the turn (a call ran into an operator's limit,
    such as the disk a task may use), or None."""
    for message in reversed(transcript):
        if message.role == "assistant":
            return None
        if message.role == "tool" and message.content.get("stop"):
            return str(message.content["stop"])
    return None


def open_calls(transcript: Sequence[Message]) -> tuple[ToolCall, ...]:
    """Tool calls of the last assistant message that have no result after it."""
    for index in range(len(transcript) - 1, -1, -1):
        message = transcript[index]
        if message.role == "assistant":
            answered = {m.call_id for m in transcript[index + 1 :] if m.role == "tool"}
            return tuple(c for c in message.tool_calls if c.call_id not in answered)
    return ()


def next_step(
    transcript: Sequence[Message],
    tail: Tail,
    *,
    max_turns: int,
    later: Collection[str] = ANSWERED_LATER,
) -> NextStep:
    """What a conversation does next, from its persisted state alone (`later`: the tools
    whose result arrives through the inbox rather than from running them)."""
    if not tail.active:
        return Idle()
    if (limit := limit_reached(transcript)) is not None:
        return Stop(limit)
    missing = open_calls(transcript)
    local = tuple(c for c in missing if c.name not in later)
    if local:
        return RunTools(local)
    if missing:
        if tail.pending_count or tail.awaiting_input:
            return Park()
        if not tail.inbox_size:
            raise BusError(
                f"{transcript[-1].conversation_id!r} waits on {[c.call_id for c in missing]} "
                "but nothing is pending"
            )
        return Consume()
    if tail.inbox_size:
        return Consume()
    last = transcript[-1] if transcript else None
    if last is None or (last.role == "assistant" and not last.tool_calls):
        return Idle()
    return _given_up(transcript, max_turns=max_turns) or CallModel()


def _given_up(transcript: Sequence[Message], *, max_turns: int) -> Stop | None:
    """A Stop when the conversation made too many turns, or the same error again and again."""
    if turns_since_request(transcript) >= max_turns:
        return Stop(f"max_turns: {max_turns} model turns without finishing")
    if (error := repeated_error(transcript)) is not None:
        return Stop(f"the same tool error {REPEATED_ERRORS} times running: {error[:300]}")
    return None


def not_yours(spec: AgentSpec, call: ToolCall) -> ToolResult:
    """The refusal of a call of a tool the agent may not call (one it was not given, or one
    defined in its shared prefix for another member of its mini-team)."""
    mine = sorted(spec.allowed or ())
    return ToolResult(
        call.call_id,
        f"{call.name}: not one of your tools; the engine ran nothing. "
        f"Yours: {', '.join(mine) or 'none'}.",
        is_error=True,
    )


def past(deadline: Deadline | None) -> bool:
    """Whether there is a deadline and it has come."""
    return deadline is not None and deadline.passed()


Checkpoint = Callable[[str, AgentSpec], Awaitable[str | None]]
"""What the engine adds to a conversation's compaction (conversation id, agent)."""


class Runner:
    """Drives one conversation through its steps until it parks or has nothing to do."""

    def __init__(
        self,
        bus: ConversationBus,
        agents: Agents,
        router: Router,
        *,
        tools: ToolRunner | None = None,
        budget: Budget | None = None,
        checkpoint: Checkpoint | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bus = bus
        self.agents = agents
        self.router = router
        self.tools = tools or NoTools()
        self.budget = budget
        self.clock = clock
        # Transcripts of parked conversations, so a lead woken by fan-in reads only what
        # is new; only this runner appends to a transcript, and seqs are consecutive.
        self._parked: dict[str, list[Message]] = {}
        # What the engine adds to a compaction, e.g. a lead's task board (its checkpoint).
        self.checkpoint = checkpoint

    @property
    def _later(self) -> frozenset[str]:
        """Tools whose result comes through the inbox: the bus's, and features' turn tools."""
        return ANSWERED_LATER | frozenset(self.bus.extensions.tools)

    async def run(self, conversation_id: str, *, deadline: Deadline | None = None) -> NextStep:
        """Run `conversation_id` from its stored state; return why it stopped (Park or Idle).

        Past `deadline` it starts no model call and no tool call: it goes Idle where it
        stands, its turn unfinished in the store, and the next run resumes it there.
        """
        transcript = self._parked.pop(conversation_id, [])
        snapshot = await self.bus.snapshot(conversation_id, after_seq=len(transcript))
        transcript.extend(snapshot.transcript)
        row = snapshot.conversation
        if row.failed:  # it runs again only when a retry is asked for
            return Idle()
        tail = Tail(
            snapshot.inbox_size, row.pending_count, row.awaiting_input, row.state == "active"
        )
        agent = row.agent
        spec = self.agents.spec(agent)
        started = self.clock()
        token = RUN_DEADLINE.set(deadline)
        try:
            return await self._steps(
                conversation_id,
                transcript,
                tail,
                agent=agent,
                spec=spec,
                job_id=row.job_id,
                started=started,
                deadline=deadline,
            )
        finally:
            RUN_DEADLINE.reset(token)

    async def _steps(
        self,
        conversation_id: str,
        transcript: list[Message],
        tail: Tail,
        *,
        agent: str,
        spec: AgentSpec,
        job_id: int | None,
        started: float,
        deadline: Deadline | None,
    ) -> NextStep:
        """`run`'s loop: one step after another until the conversation parks or goes idle."""
        while True:
            step = next_step(transcript, tail, max_turns=spec.max_turns, later=self._later)
            if isinstance(step, CallModel | RunTools) and past(deadline):
                log.info("%s: the run's deadline has passed; the next run goes on", conversation_id)
                return Idle()
            if isinstance(step, CallModel):
                step = await self._limits(spec, job_id, started, conversation_id) or step
            if isinstance(step, Park):
                self._parked[conversation_id] = transcript
            if isinstance(step, Park | Idle):
                return step
            done = await self._take(
                step,
                conversation_id,
                agent=agent,
                transcript=transcript,
                deadline=deadline,
                until=started + spec.wall_time_s,
            )
            if done is None:  # a mini-team waiting for a free place, or a turn deferred
                return Idle()
            transcript.extend(done.appended)
            tail = done.tail

    async def _take(
        self,
        step: Consume | Stop | RunTools | CallModel,
        conversation_id: str,
        *,
        agent: str,
        transcript: list[Message],
        deadline: Deadline | None,
        until: float,
    ) -> Step | None:
        """Carry out one step and commit what it did; None when a Consume took nothing.
        `until` is when the turn's wall time ends, on the runner's clock."""
        if isinstance(step, Consume):
            done = await self.bus.consume(conversation_id)
            return done if done.appended else None
        if isinstance(step, Stop):
            turn = AssistantTurn(text=f"stopped before finishing ({step.reason})")
            return await self.bus.finish(conversation_id, turn, error=True)
        if isinstance(step, RunTools):
            return await self._run_tools(
                conversation_id, step.calls, agent=agent, deadline=deadline, until=until
            )
        return await self._call_model(agent, conversation_id, transcript)

    async def _run_tools(
        self,
        conversation_id: str,
        calls: tuple[ToolCall, ...],
        *,
        agent: str,
        deadline: Deadline | None,
        until: float,
    ) -> Step:
        """Run the calls one by one, each within the turn's wall time, and record their
        results; past `deadline` the rest are left for the next run (each result is recorded
        once, so none runs twice). A call that ran into a limit ends the turn: the rest are
        answered without running."""
        results: list[ToolResult] = []
        stop: str | None = None
        for call in calls:
            if stop is not None:
                results.append(ToolResult(call.call_id, f"not run: {stop}", is_error=True))
                continue
            if results and past(deadline):
                break
            results.append(await self._run_tool(agent, conversation_id, call, until))
            stop = results[-1].stop
        return await self.bus.record_results(conversation_id, agent, results)

    async def _limits(
        self, spec: AgentSpec, job_id: int | None, started: float, conversation_id: str
    ) -> Stop | Idle | None:
        """Idle while its job is held (paused, or its issue's edit awaits an answer) or waits
        at its budget gate (no new model call); a Stop when this turn ran too long or its job
        spent its budget for good."""
        if await self.bus.held(job_id):
            return Idle()
        if self.clock() - started > spec.wall_time_s:
            return Stop(f"wall_time: over {spec.wall_time_s:g} s in one turn")
        if self.budget is not None and job_id is not None:
            refused = await self.budget.admit(job_id, conversation_id)
            if refused is not None:
                return Idle() if refused.held else Stop(refused.reason)
        return None

    async def _run_tool(
        self, agent: str, conversation_id: str, call: ToolCall, until: float
    ) -> ToolResult:
        """Run one tool call within the turn's wall time (it ends at `until` on the runner's
        clock): past it, the call is stopped (a shell's processes are killed with it), or
        not started, and the model reads why."""
        spec = self.agents.spec(agent)
        if not spec.may_call(call.name):
            return not_yours(spec, call)
        left = until - self.clock()
        try:
            if left <= 0:
                raise TimeoutError
            async with asyncio.timeout(left):
                return await self.tools.run(agent, conversation_id, call)
        except TimeoutError:
            return ToolResult(
                call.call_id, f"{call.name}: not finished, the turn's wall time ran out", True
            )

    async def _call_model(
        self, agent: str, conversation_id: str, transcript: list[Message]
    ) -> Step | None:
        """The model's next turn, recorded; or, when the transcript has outgrown the model's
        context, its compaction first, as a step of its own: that is a model call too, and
        the limits (a deadline above all) are looked at again before the turn's."""
        spec = self.agents.spec(agent)
        view = model_view(transcript)
        covers_through = compaction_point(view, bound=spec.context_tokens)
        if covers_through is not None:
            return await self._compact(spec, conversation_id, view, covers_through)
        request = ModelRequest(agent, spec.system, view, spec.tools)
        try:
            turn = await spec.model.complete(request)
        except TurnDeferred as exc:
            log.info(
                "%s: the run's deadline has passed; the next run goes on (%s)", conversation_id, exc
            )
            return None
        if not turn.tool_calls:
            return await self.bus.finish(conversation_id, turn)
        turn_tools = self.bus.extensions.tools
        calls = [c for c in turn.tool_calls if c.name in BUS_TOOLS or c.name in turn_tools]
        bus_calls = [c for c in calls if spec.may_call(c.name)]
        resolved = resolve_bus_calls(bus_calls, sender=agent, router=self.router, tools=turn_tools)
        resolved.refusals += [not_yours(spec, c) for c in calls if not spec.may_call(c.name)]
        return await self.bus.record_turn(conversation_id, turn, resolved)

    async def _compact(
        self, spec: AgentSpec, conversation_id: str, view: tuple[Message, ...], covers_through: int
    ) -> Step:
        covered = tuple(m for m in view if m.seq <= covers_through)
        instruction = Message(conversation_id, 0, "engine", "user", {"text": COMPACT_INSTRUCTION})
        request = ModelRequest(spec.address, spec.system, (*covered, instruction), ())
        summary = await spec.model.complete(request)
        text = summary.text
        if self.checkpoint is not None and (state := await self.checkpoint(conversation_id, spec)):
            text = f"{text}\n\n{state}"
        return await self.bus.record_compaction(
            conversation_id,
            spec.address,
            text,
            covers_through=covers_through,
            usage=summary.usage,
        )
