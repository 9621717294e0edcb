"""A decider's direct hold on a running job: pause it, resume it, steer its lead, set its
budget (answering its budget gate, if one is open), and have the project remember a
preference.

Pausing writes who paused the job; from then on none of its conversations starts a model
call (a call already under way finishes and is kept), and none is resumed after a restart
(the runnable query skips it). Resuming clears it and wakes what has work. Direction for
the lead (`/steer`) is kept with the job and delivered to the project lead's inbox, where
its next turn reads it; the same source (a comment) steers once, however often it is seen.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.agents.scheduler import Scheduler
from orchestrator.bus import answers, gates
from orchestrator.bus import jobs as job_rows
from orchestrator.bus.events import GateAnswered
from orchestrator.bus.extensions import Extensions
from orchestrator.bus.gates import Gate
from orchestrator.bus.runnable import runnable
from orchestrator.bus.transactions import deliver, of_job
from orchestrator.core.errors import OrchestratorError
from orchestrator.core.messages import ConversationKind, InboxKind
from orchestrator.jobs import budget_gate
from orchestrator.store.sqlite import Store, Tx, now

LEAD_ROLE = "project-lead"


class ControlError(OrchestratorError):
    """The job cannot take this now (it has ended, or has no lead at work)."""


@dataclass(frozen=True)
class Steer:
    """Direction a person gave a job's lead."""

    text: str
    given_by: str
    given_at: float


class JobControl:
    """Pause, resume and steer jobs, in the store."""

    def __init__(self, store: Store, scheduler: Scheduler) -> None:
        self.store = store
        self.scheduler = scheduler

    async def pause(self, job_id: int, *, by: str) -> bool:
        """Hold the job: no new model calls. False when it was held already."""
        return await self.store.write(lambda tx: _pause(tx, job_id, by))

    async def resume(self, job_id: int) -> bool:
        """Release a held job and wake what has work. False when it was not held."""
        released, woken = await self.store.write(lambda tx: _resume(tx, job_id))
        self.scheduler.wake(woken)
        return released

    async def close_idle(self, job_id: int, gate_id: int, *, by: str) -> bool:
        """Close the job because gate `gate_id` waited too long: pause it as `by`, and
        mark the gate so that, once resumed, the job is not closed for it again. False
        when the gate closed the job already."""
        return await self.store.write(lambda tx: _close_idle(tx, job_id, gate_id, by))

    async def paused_by(self, job_id: int) -> str | None:
        """Who holds the job, if anyone does."""
        row = await self.store.read(lambda tx: job_rows.get(tx, job_id))
        return None if row is None else row.paused_by

    async def steer(self, job_id: int, text: str, *, by: str, ref: str | None = None) -> bool:
        """Give the job's lead direction, read at its next turn. False when `ref` steered
        already (a redelivery); ControlError when the job has no lead at work."""
        delivered, woken = await self.store.write(lambda tx: _steer(tx, job_id, text, by, ref))
        self.scheduler.wake(woken)
        return delivered

    async def set_budget(
        self, job_id: int, usd: float, *, by: str, ref: str | None = None
    ) -> Gate | None:
        """The job's own spending cap, in place of its project's (from the next model call).

        With the job's budget gate open, `by` also approves it with this cap in place of the
        one proposed, and what has work is woken; the gate so answered, else None.
        """
        if not usd > 0:
            raise ControlError(f"a budget is a positive amount of dollars, not {usd}")
        extensions = self.scheduler.bus.extensions
        answered = await self.store.write(
            lambda tx: _set_budget(tx, job_id, usd, by, ref, extensions)
        )
        if answered is not None:
            self.scheduler.bus.events.publish(
                GateAnswered(answered.gate_id, answered.conversation_id, by, "human")
            )
            self.scheduler.wake(answered.woken)
        return answered

    async def remember(self, job_id: int, text: str, *, by: str, ref: str | None = None) -> bool:
        """Keep a preference for the job's project, read by its agents from now on. False
        when `ref` gave it already."""
        return await self.store.write(lambda tx: _remember(tx, job_id, text, by, ref))

    async def preferences(self) -> dict[str, list[str]]:
        """Every project's remembered preferences, oldest first."""
        rows = await self.store.read(
            lambda tx: tx.execute(
                "SELECT project, text FROM project_preferences ORDER BY preference_id"
            ).fetchall()
        )
        kept: dict[str, list[str]] = {}
        for project, text in rows:
            kept.setdefault(str(project), []).append(str(text))
        return kept

    async def steering(self, job_id: int) -> list[Steer]:
        """The direction given to the job, oldest first."""
        rows = await self.store.read(
            lambda tx: tx.execute(
                "SELECT text, given_by, given_at FROM job_steering WHERE job_id = ?"
                " ORDER BY steer_id",
                (job_id,),
            ).fetchall()
        )
        return [Steer(str(text), str(by), float(at)) for text, by, at in rows]


def _active(tx: Tx, job_id: int) -> None:
    row = job_rows.get(tx, job_id)
    if row is None:
        raise ControlError(f"no job {job_id}")
    if row.state != "active":
        raise ControlError(f"job {job_id} has ended ({row.state})")


def _remember(tx: Tx, job_id: int, text: str, by: str, ref: str | None) -> bool:
    project = job_rows.project_of(tx, job_id)
    if project is None:
        raise ControlError(f"no job {job_id}")
    if (
        ref is not None
        and tx.execute("SELECT 1 FROM project_preferences WHERE source_ref = ?", (ref,)).fetchone()
    ):
        return False
    tx.execute(
        "INSERT INTO project_preferences (project, text, given_by, source_ref, given_at)"
        " VALUES (?, ?, ?, ?, ?)",
        (project, text, by, ref, now()),
    )
    return True


def _set_budget(
    tx: Tx, job_id: int, usd: float, by: str, ref: str | None, extensions: Extensions
) -> Gate | None:
    _active(tx, job_id)
    gate = budget_gate.open_gate(tx, job_id)
    answered = None
    if gate is not None and (ref is None or gates.answered_from(tx, ref) is None):
        # Approved first (the settler raises every cap it proposed), then the dollars the
        # decider named replace the proposed ones.
        text = f"yes, with a cap of ${usd:.2f} (/budget)"
        answered = answers.answer(
            tx,
            gate.gate_id,
            text=text,
            answered_by=by,
            via="human",
            ref=ref,
            extensions=extensions,
        )
    job_rows.raise_caps(tx, job_id, usd=usd, tokens=None)
    return answered


def _pause(tx: Tx, job_id: int, by: str) -> bool:
    _active(tx, job_id)
    return job_rows.pause(tx, job_id, by)


def _close_idle(tx: Tx, job_id: int, gate_id: int, by: str) -> bool:
    if not gates.close_idle(tx, job_id, gate_id):
        return False
    job_rows.hold(tx, job_id, by)
    return True


def _resume(tx: Tx, job_id: int) -> tuple[bool, list[str]]:
    return job_rows.release(tx, job_id), runnable(tx, job_id)


def _steer(tx: Tx, job_id: int, text: str, by: str, ref: str | None) -> tuple[bool, list[str]]:
    _active(tx, job_id)
    if (
        ref is not None
        and tx.execute("SELECT 1 FROM job_steering WHERE source_ref = ?", (ref,)).fetchone()
    ):
        return False, []
    lead = next(
        (
            c
            for c in of_job(tx, job_id)
            if c.kind == ConversationKind.DISPATCH.value
            and c.active
            and (c.agent == LEAD_ROLE or c.agent.endswith(f"/{LEAD_ROLE}"))
        ),
        None,
    )
    if lead is None:
        raise ControlError(f"job {job_id} has no project lead at work to steer")
    tx.execute(
        "INSERT INTO job_steering (job_id, text, given_by, source_ref, given_at)"
        " VALUES (?, ?, ?, ?, ?)",
        (job_id, text, by, ref, now()),
    )
    deliver(
        tx,
        lead.conversation_id,
        kind=InboxKind.HUMAN,
        sender=by,
        content={"text": f"Direction from {by} (the job's decider): {text}"},
    )
    return True, runnable(tx, job_id)


# Named for the modules whose own SQL named these tables (issue 32).


def preferences_of(tx: Tx, project: str) -> list[str]:
    """What the project's decider asked to be remembered (`/remember`), oldest first."""
    rows = tx.execute(
        "SELECT text FROM project_preferences WHERE project = ? ORDER BY preference_id",
        (project,),
    ).fetchall()
    return [str(text) for (text,) in rows]
