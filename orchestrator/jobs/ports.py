"""The Forge port: where a job comes from and goes back to (the GitHub App's forge,
`teaparty run`'s local one, the tests' FakeForge), and the job's status as it sees it.

The port runs one way: a forge talks to the outside and returns what it made there (a
pull request, a gate's comment); the engine records those facts itself (jobs/delivery.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from orchestrator.core.messages import Usage
from orchestrator.jobs.levels import LevelCost
from orchestrator.jobs.refusals import Refused
from orchestrator.memory.entries import Learning

if TYPE_CHECKING:
    from orchestrator.bus.gates import Gate
    from orchestrator.jobs.checks import JobCheck
    from orchestrator.jobs.handle import JobHandle
    from orchestrator.jobs.records import ForgeObject
    from orchestrator.jobs.round_records import Pull, PullState, ReviewRound
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
    gates: tuple[Gate, ...] = ()  # every question it asked, oldest first, answered or open


@dataclass(frozen=True)
class PushTarget:
    """Where the engine pushes a job branch: a git remote (no credentials in it) and the
    HTTP header git sends to it alone (None: none needed)."""

    remote: str
    auth: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Delivered:
    """What a delivery made: the change request's link, and its number where it is a pull
    request the engine follows (None: a branch, a test's link)."""

    link: str
    number: int | None = None


@dataclass(frozen=True)
class GatePosted:
    """Where a gate's question was put (its comment's reference) and who may answer it."""

    comment_ref: str
    decider: str


class RoundLedger(Protocol):
    """The engine's half of a review round's delivery, handed to the forge, which calls it
    in the order crash recovery needs: `push` once it has read what it compares the push
    with, `replied` after each reply it posts and before the next."""

    @property
    def pull(self) -> Pull | None:
        """The job's change request as recorded (None: none is)."""
        ...

    async def push(self) -> str | None:
        """Push the job branch (never forcing); the commit it is at."""
        ...

    async def replied(self, number: int, ref: str) -> None:
        """Record that the answer to point `number` was posted as `ref`."""
        ...


class ForgeObjects(Protocol):
    """What a forge keeps in the engine's store: each object it made outside for a job (a
    comment, a pull request) under a stable key, found again after a crash."""

    async def forge_object(self, job_id: int, key: str) -> ForgeObject | None:
        """What was recorded for the job under `key`."""
        ...

    async def forge_object_ids(self, job_id: int) -> frozenset[str]:
        """The outside ids of everything recorded for the job."""
        ...

    async def record_forge_object(
        self, job_id: int, key: str, external_id: str, digest: str, *, at: float | None = None
    ) -> None:
        """Remember what was made outside for the job under `key`."""
        ...


class Forge(Protocol):
    """Where a job came from and goes back to (GitHub, a terminal, a test)."""

    async def show(self, status: JobStatus) -> None:
        """Create or update the job's one status report."""
        ...

    async def ask(
        self, status: JobStatus, gate: Gate, *, suggestion: ProxyDecision | None = None
    ) -> GatePosted | None:
        """Put a gate's question to its decider, once per gate, with the proxy's prediction
        as a suggestion where it made one; where it was put (None: nowhere to record)."""
        ...

    async def proxy_answered(self, status: JobStatus, gate: Gate, decision: ProxyDecision) -> None:
        """Say, once per gate, that the proxy answered it for the decider: its answer,
        confidence, measured agreement and reasons, and how to override it."""
        ...

    async def push_target(self, job: JobHandle) -> PushTarget | None:
        """Where the engine pushes the job branch (None: nowhere).

        Raises ForgeError when the branch may not be pushed there now.
        """
        ...

    async def deliver(self, status: JobStatus, job: JobHandle) -> Delivered:
        """Open (or update) the change request of the job branch the engine pushed; what it
        is.

        Raises ForgeError when that fails.
        """
        ...

    async def deliver_round(
        self, status: JobStatus, job: JobHandle, review: ReviewRound, ledger: RoundLedger
    ) -> str | None:
        """Deliver a review round: have the engine push once (`ledger.push`), reply once to
        each point the lead answered (never resolving a thread; each reply recorded through
        `ledger.replied`), say what the round did, and ask its reviewers to review again;
        the commit pushed (None: nothing was).

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


@runtime_checkable
class DraftForge(Protocol):
    """A forge whose change request can open as a draft and be made ready (GitHub's pull
    request), for a project's early draft (jobs/early_draft.py); a forge without one (the
    terminal's) delivers at the end only."""

    async def open_draft(self, status: JobStatus, job: JobHandle) -> Delivered:
        """Open the job branch's change request as a draft, or find the one opened; what it is.

        Raises ForgeError when that fails.
        """
        ...

    async def draft_pushed(self, status: JobStatus, head: str) -> None:
        """The open draft's branch moved to `head` (what the forge shows on a head, such as
        GitHub's check run, moves with it).

        Raises ForgeError when that fails.
        """
        ...

    async def close_draft(self, status: JobStatus, number: int, why: str) -> None:
        """Close the draft change request `number` unmerged, saying `why` on it (its branch
        stays); nothing if it is closed.

        Raises ForgeError when that fails.
        """
        ...

    async def mark_ready(self, status: JobStatus, number: int) -> None:
        """Mark the draft change request `number` ready for review (nothing if it is).

        Raises ForgeError when that fails.
        """
        ...
