"""The conversation bus: durable conversations, inboxes and Send over the store.

Each method is one committed step (see transactions.py). After the commit it publishes
events and tells the scheduler which conversations may now have work (`on_wake`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from orchestrator.bus import answers, dispatch, failures, gates
from orchestrator.bus import jobs as job_rows
from orchestrator.bus import runnable as may_run
from orchestrator.bus import transactions as txn
from orchestrator.bus import waits as wait_rows
from orchestrator.bus.dispatch import BusCalls
from orchestrator.bus.events import (
    DispatchCompleted,
    DispatchStarted,
    EventBus,
    GateAnswered,
    GateAsked,
    JobStarted,
    StateChanged,
    UsageRecorded,
)
from orchestrator.bus.extensions import Extensions
from orchestrator.bus.failures import Failure
from orchestrator.core.messages import (
    AssistantTurn,
    ConversationKind,
    InboxItem,
    InboxKind,
    Message,
    ToolResult,
    Usage,
    job_conversation_id,
)
from orchestrator.store.sqlite import Store, Tx


@dataclass(frozen=True)
class Tail:
    """A conversation's state right after a step committed."""

    inbox_size: int
    pending_count: int
    awaiting_input: bool
    active: bool


@dataclass(frozen=True)
class Step:
    """What one committed step appended, and the conversation's state after it."""

    appended: tuple[Message, ...]
    tail: Tail


@dataclass(frozen=True)
class JobStart:
    """The job a key names, and whether this call created it."""

    job_id: int
    conversation_id: str
    created: bool


def _tail(tx: Tx, conversation_id: str) -> Tail:
    return Tail(*txn.tail(tx, conversation_id))


def _job_of(tx: Tx, conversation_id: str) -> int | None:
    """The job a conversation belongs to (None: none, or no such conversation)."""
    found = txn.listed(tx, conversation_id)
    return None if found is None else found.job_id


class ConversationBus:
    """Async face of the store's conversation tables."""

    def __init__(
        self, store: Store, events: EventBus, extensions: Extensions | None = None
    ) -> None:
        self.store = store
        self.events = events
        # What features add to its steps; the composition root fills it before anything runs.
        self.extensions = extensions or Extensions()
        self.on_wake: Callable[[Iterable[str]], None] = lambda ids: None

    async def start_job(
        self,
        *,
        job_key: str,
        project: str,
        title: str,
        agent: str,
        brief: str,
        max_parallel: int = 3,
        wake: bool = True,
        project_text: str | None = None,
        learnings: str | None = None,
        also: Callable[[Tx, int], None] | None = None,
    ) -> JobStart:
        """Create a job and its root conversation once per key; later calls find it.

        The job keeps `project_text` (its project file) and `learnings` so that a restart
        rebuilds its project as it was; a later call for the same key replaces them. With
        `wake=False` the job waits until `ready` says its workspace exists; nothing runs
        it before, not even a restart. `also(tx, job_id)` writes what the caller keeps
        with the job in the same transaction, so no crash leaves the job without it.
        """

        def start(tx: Tx) -> JobStart:
            started = create(tx)
            if also is not None:
                also(tx, started.job_id)
            return started

        def create(tx: Tx) -> JobStart:
            found = job_rows.find(tx, job_key)
            if found is not None:
                job_rows.keep_project(tx, found, project_text, learnings, replace=True)
                return JobStart(found, job_conversation_id(found), created=False)
            job_id = job_rows.create(
                tx,
                job_key=job_key,
                project=project,
                title=title,
                max_parallel=max_parallel,
                project_text=project_text,
                learnings=learnings,
                ready=wake,
            )
            root = job_conversation_id(job_id)
            txn.create_conversation(
                tx,
                conversation_id=root,
                kind=ConversationKind.JOB,
                agent=agent,
                initiator="engine",
                parent_id=None,
                job_id=job_id,
            )
            txn.deliver(tx, root, kind=InboxKind.REQUEST, sender="engine", content={"text": brief})
            return JobStart(job_id, root, created=True)

        started = await self.store.write(start)
        if started.created:
            self.events.publish(JobStarted(started.job_id, title))
            if wake:
                self.on_wake([started.conversation_id])
        return started

    async def ready(self, job_id: int) -> None:
        """The job's workspace exists: its first turn may run."""
        await self.store.write(lambda tx: job_rows.set_ready(tx, job_id))
        self.on_wake([job_conversation_id(job_id)])

    async def record_failure(self, conversation_id: str, reason: str) -> None:
        """A conversation raised: a row says so, and it waits for a retry."""
        await self.store.write(
            lambda tx: failures.record_conversation(
                tx, conversation_id, reason, job_id=_job_of(tx, conversation_id)
            )
        )
        self.events.publish(StateChanged(conversation_id, "failed"))

    async def record_job_failure(
        self, job_id: int, kind: failures.JobFailureKind, reason: str
    ) -> None:
        """Publishing a job's work, or making its workspace, failed: it waits for a retry."""
        await self.store.write(lambda tx: failures.record_job(tx, job_id, kind, reason))

    async def wait(
        self,
        key: str,
        *,
        job_id: int | None,
        kind: wait_rows.WaitKind,
        reason: str,
        at: float,
        until: float,
    ) -> wait_rows.Wait:
        """`key` (a conversation, or a job's forge) waits until `until`; the wait as stored.
        A conversation's wait belongs to the conversation's job when `job_id` is None."""

        def record(tx: Tx) -> wait_rows.Wait:
            job = job_id if job_id is not None else _job_of(tx, key)
            return wait_rows.record(
                tx, key, job_id=job, kind=kind, reason=reason, at=at, until=until
            )

        return await self.store.write(record)

    async def waits(self, job_id: int | None = None) -> list[wait_rows.Wait]:
        """A job's waits, or with no job every wait in the store."""
        if job_id is None:
            return await self.store.read(wait_rows.every)
        return await self.store.read(lambda tx: wait_rows.of_job(tx, job_id))

    async def wait_of(self, key: str) -> wait_rows.Wait | None:
        """The wait under `key`, if any."""
        return await self.store.read(lambda tx: wait_rows.of_key(tx, key))

    async def end_wait(self, key: str) -> None:
        """What waited under `key` went through."""
        await self.store.write(lambda tx: wait_rows.clear(tx, key))

    async def failures(self, job_id: int | None = None) -> list[Failure]:
        """A job's failures, or with no job every failure in the store."""
        if job_id is None:
            return await self.store.read(failures.every)
        return await self.store.read(lambda tx: failures.of_job(tx, job_id))

    async def clear_failures(self, job_id: int) -> list[Failure]:
        """Forget a job's failures (a retry); the ones forgotten."""
        return await self.store.write(lambda tx: failures.clear(tx, job_id))

    async def snapshot(self, conversation_id: str, *, after_seq: int = 0) -> txn.Snapshot:
        """A conversation, its transcript after `after_seq` and its inbox, at one instant."""
        return await self.store.read(
            lambda tx: txn.snapshot(tx, conversation_id, after_seq=after_seq)
        )

    async def transcript(self, conversation_id: str) -> tuple[Message, ...]:
        """Every message of a conversation, in order."""
        return await self.store.read(lambda tx: txn.transcript(tx, conversation_id))

    async def peek(self, conversation_id: str) -> list[InboxItem]:
        """What waits in a conversation's inbox, left in place."""
        return await self.store.read(lambda tx: txn.inbox(tx, conversation_id))

    async def held(self, job_id: int | None) -> bool:
        """Whether the job is held (paused, or its issue's edit awaits an answer): its
        conversations make no new model call."""
        if job_id is None:
            return False
        return await self.store.read(lambda tx: may_run.held(tx, job_id))

    async def runnable(self, job_id: int | None = None) -> list[str]:
        """Every conversation with work to do (of one job, if given), as the store has it."""
        return await self.store.read(lambda tx: may_run.runnable(tx, job_id))

    async def consume(self, conversation_id: str) -> Step:
        """Take the whole inbox into the transcript (receive-and-clear).

        A mini-team that would exceed its job's bound takes nothing: the step appends no
        message, and the team is woken again when another of its job's teams ends.
        """

        def consume(tx: Tx) -> txn.Outcome:
            if not self.extensions.admits(tx, txn.conversation(tx, conversation_id)):
                return txn.Outcome()  # not yet (a mini-team over its job's bound waits)
            return txn.consume(tx, conversation_id)

        outcome, tail = await self._write(conversation_id, consume)
        if outcome.appended:
            self.events.publish(StateChanged(conversation_id, "running"))
        return Step(tuple(outcome.appended), tail)

    async def record_turn(self, conversation_id: str, turn: AssistantTurn, calls: BusCalls) -> Step:
        """Persist a tool-calling turn and carry out its sends and messages with it."""
        outcome, tail = await self._write(
            conversation_id,
            lambda tx: dispatch.record_turn(
                tx, conversation_id, turn, calls, extensions=self.extensions
            ),
        )
        agent = outcome.appended[0].sender
        self.events.publish(UsageRecorded(conversation_id, agent, turn.usage))
        for opened in outcome.opened:
            self.events.publish(
                DispatchStarted(
                    conversation_id, opened.conversation_id, agent, opened.recipient, opened.queued
                )
            )
        for gate_id, kind, question in outcome.gates:
            self.events.publish(GateAsked(gate_id, conversation_id, kind, question))
        if tail.awaiting_input:
            self.events.publish(StateChanged(conversation_id, "awaiting_input"))
        elif tail.pending_count:
            self.events.publish(StateChanged(conversation_id, "parked"))
        self.on_wake(outcome.woken)
        return Step(tuple(outcome.appended), tail)

    async def record_results(
        self, conversation_id: str, sender: str, results: list[ToolResult]
    ) -> Step:
        """Persist results of tools the engine ran."""
        outcome, tail = await self._write(
            conversation_id,
            lambda tx: dispatch.record_results(tx, conversation_id, sender, results),
        )
        return Step(tuple(outcome.appended), tail)

    async def record_compaction(
        self, conversation_id: str, agent: str, summary: str, *, covers_through: int, usage: Usage
    ) -> Step:
        """Persist a compaction summary; the model sees it in place of what it covers."""
        content: dict[str, Any] = {
            "text": summary,
            "kind": "compaction",
            "covers_through": covers_through,
        }

        def compact(tx: Tx) -> txn.Outcome:
            return txn.Outcome(
                appended=txn.append(tx, conversation_id, [(agent, "user", content, usage)])
            )

        outcome, tail = await self._write(conversation_id, compact)
        self.events.publish(UsageRecorded(conversation_id, agent, usage))
        return Step(tuple(outcome.appended), tail)

    async def finish(
        self, conversation_id: str, turn: AssistantTurn, *, error: bool = False
    ) -> Step:
        """Persist a final turn; its text goes back as the reply to the request it served."""
        outcome, tail = await self._write(
            conversation_id,
            lambda tx: dispatch.finish(
                tx, conversation_id, turn, extensions=self.extensions, error=error
            ),
        )
        agent = outcome.appended[0].sender
        self.events.publish(UsageRecorded(conversation_id, agent, turn.usage))
        if outcome.replied_to is not None:
            self.events.publish(DispatchCompleted(outcome.replied_to, conversation_id, agent))
            for gate_id, kind, question in outcome.gates:  # the reply is held at a gate
                self.events.publish(GateAsked(gate_id, outcome.replied_to, kind, question))
        self.events.publish(StateChanged(conversation_id, "closed" if outcome.closed else "idle"))
        self.on_wake(outcome.woken)
        return Step(tuple(outcome.appended), tail)

    async def post(
        self,
        conversation_id: str,
        *,
        kind: InboxKind,
        sender: str,
        text: str,
        call_id: str | None = None,
        **extra: Any,
    ) -> None:
        """Deliver a message from outside the agents (a person, the engine) to an inbox."""
        await self.store.write(
            lambda tx: txn.deliver(
                tx,
                conversation_id,
                kind=kind,
                sender=sender,
                content={"text": text, **extra},
                call_id=call_id,
            )
        )
        self.on_wake([conversation_id])

    async def open_gates(self, job_id: int | None = None) -> list[gates.Gate]:
        """Unanswered gates, oldest first."""
        return await self.store.read(lambda tx: gates.open_gates(tx, job_id))

    async def answer_gate(
        self,
        gate_id: int,
        *,
        text: str,
        answered_by: str,
        via: gates.AnsweredVia = "human",
        ref: str | None = None,
    ) -> gates.Gate:
        """Record an answer, carry it out and wake who now has work (see `answers.answer`)."""
        gate = await self.store.write(
            lambda tx: answers.answer(
                tx,
                gate_id,
                text=text,
                answered_by=answered_by,
                via=via,
                ref=ref,
                extensions=self.extensions,
            )
        )
        self.events.publish(GateAnswered(gate_id, gate.conversation_id, answered_by, via))
        self.on_wake(gate.woken)
        return gate

    async def answered_from(self, ref: str) -> int | None:
        """The gate the source `ref` (a comment's id) answered, if it answered one."""
        return await self.store.read(lambda tx: gates.answered_from(tx, ref))

    async def advise(self, gate_id: int, *, text: str, advisor: str) -> gates.Gate:
        """Hand an advisor's reply to the agent that asked the open gate (see `gates.advise`)."""
        return await self.store.write(
            lambda tx: gates.advise(
                tx, gate_id, text=text, advisor=advisor, kinds=self.extensions.kinds
            )
        )

    async def reassign_gate(self, gate_id: int, *, decider: str) -> gates.Gate:
        """Hand an open gate to another decider."""
        return await self.store.write(lambda tx: gates.reassign(tx, gate_id, decider=decider))

    async def gate_posted(self, gate_id: int, *, comment_ref: str, decider: str) -> None:
        """Record where a gate was asked and who may answer it."""
        await self.store.write(
            lambda tx: gates.posted(tx, gate_id, comment_ref=comment_ref, decider=decider)
        )

    async def close(self, conversation_id: str) -> None:
        """Close a conversation; an unanswered Send to it is answered with an error."""
        outcome = await self.store.write(lambda tx: dispatch.close(tx, conversation_id))
        self.events.publish(StateChanged(conversation_id, "closed"))
        self.on_wake(outcome.woken)

    async def _write(
        self, conversation_id: str, fn: Callable[[Tx], txn.Outcome]
    ) -> tuple[txn.Outcome, Tail]:
        return await self.store.write(lambda tx: (fn(tx), _tail(tx, conversation_id)))
