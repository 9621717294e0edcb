"""The Forge port: where a job comes from and goes back to (the GitHub App's forge,
`teaparty run`'s local one, the tests' FakeForge), and the job's status as it sees it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from orchestrator.core.messages import Usage
from orchestrator.jobs.levels import LevelCost
from orchestrator.jobs.refusals import Refused
from orchestrator.memory.entries import Learning

if TYPE_CHECKING:
    from orchestrator.bus.gates import Gate
    from orchestrator.jobs.checks import JobCheck
    from orchestrator.jobs.handle import JobHandle
    from orchestrator.jobs.rounds import PullState, ReviewRound
    from orchestrator.proxy.decisions import ProxyDecision
    from orchestrator.teams.board import Task

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
    setup: str | None = None  # its environment's setup, one line (None: no `setup:`)
    setup_log: str | None = None  # the end of a failed setup step's output
    checks: tuple[JobCheck, ...] = ()  # the engine's checks: each task's latest, the job's last
    checks_missing: str | None = None  # why no check can run (the project names no command)
    refused: tuple[Refused, ...] = ()  # what the sandbox refused its agents (jobs/refusals.py)
    learned: tuple[Learning, ...] = ()  # what it learned, proposed in its branch (jobs/learned.py)
    ci: tuple[str, ...] = ()  # what CI on its change request did, newest first (ci_rounds.py)


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
