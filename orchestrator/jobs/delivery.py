"""The engine's half of a delivery: it pushes the job branch, asks the forge to open the
change request (or answer a review round, or put a gate's question), and records what the
forge says it made there.

Each fact is recorded after the forge made it outside, as the forge returned it: a crash in
between leaves it unrecorded, and the retry finds what was made (the forge looks its
objects up before making them) and records it then. A round's replies are recorded one by
one as they are posted (`RoundLedger.replied`), so a delivery that fails halfway never
posts the same answer twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.bus.gates import Gate
from orchestrator.jobs import early_draft
from orchestrator.jobs.handle import JobHandle
from orchestrator.jobs.office import Office
from orchestrator.jobs.ports import DraftForge, Forge, JobStatus
from orchestrator.jobs.round_records import Pull, ReviewRound
from orchestrator.proxy.decisions import ProxyDecision


async def push(office: Office, forge: Forge, job: JobHandle) -> None:
    """Push the job branch where the forge says it goes (nowhere, if it names no place)."""
    target = await forge.push_target(job)
    if target is not None:
        await office.publish(job, target.remote, auth=target.auth)


async def deliver(
    office: Office, forge: Forge, status: JobStatus, job: JobHandle, *, early: bool = False
) -> str:
    """Push the job branch, have the forge open (or update) its change request, and record
    the pull request it opened; the change request's link.

    `early` (the project's early draft, jobs/early_draft.py): what merged since the last
    early push goes first, one push per merge, and the draft is then marked ready.
    """
    if early:
        await early_draft.catch_up(office, forge, job, cleared=job.head)
    await push(office, forge, job)
    made = await forge.deliver(status, job)
    if made.number is not None:
        await office.rounds.pull_opened(status.job_id, made.number, made.link)
        if early and isinstance(forge, DraftForge):
            await forge.mark_ready(status, made.number)
            await office.rounds.pull_state(status.job_id, "open")  # its own webhook is ignored
    return made.link


async def deliver_round(
    office: Office, forge: Forge, status: JobStatus, job: JobHandle, review: ReviewRound
) -> str | None:
    """Deliver a review round through the forge, which pushes and records each reply it
    posts through the engine's `RoundLedger`; the commit pushed (None: nothing was)."""
    ledger = _Ledger(office, forge, job, review, await office.rounds.pull(status.job_id))
    return await forge.deliver_round(status, job, review, ledger)


async def ask(
    office: Office,
    forge: Forge,
    status: JobStatus,
    gate: Gate,
    *,
    suggestion: ProxyDecision | None = None,
) -> None:
    """Put a gate's question through the forge and record where it was put (again where a
    crash came between the forge posting it and this record)."""
    posted = await forge.ask(status, gate, suggestion=suggestion)
    if posted is not None and posted.comment_ref != gate.comment_ref:
        await office.gate_posted(
            gate.gate_id, comment_ref=posted.comment_ref, decider=posted.decider
        )


@dataclass(frozen=True)
class _Ledger:
    """One review round's `RoundLedger`: the engine's push and records, for its forge."""

    office: Office
    forge: Forge
    job: JobHandle
    review: ReviewRound
    pull: Pull | None

    async def push(self) -> str | None:
        await push(self.office, self.forge, self.job)
        return self.job.head or await self.office.head(self.job)

    async def replied(self, number: int, ref: str) -> None:
        await self.office.rounds.replied(self.review.round_id, number, ref)
