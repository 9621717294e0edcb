"""The Forge of `teaparty run`: the terminal for status and gates, the local repository the branch.

The same `JobDriver` that keeps a GitHub issue in line with the store drives a local job
through it: `show` prints the status when it changes, `ask` puts a gate to the person at
the terminal (through `approve`; `--yes` answers for them, and says so, but never raises a
job's budget; with nobody to ask, the job stays parked: UnansweredGateError) and records
the answer, `push_target` names the local repository the engine pushes the job branch into
(the user's checkout is never touched; the engine's `local_push_target` checks it may) and
`deliver` says how its checks fared, `fail` says what failed and how to resume the job to
retry it. It reaches the engine through orchestrator/api.py only: the Office's own
`answer_gate` and the repository check, never git.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from orchestrator.api import (
    AnsweredVia,
    Delivered,
    Gate,
    JobHandle,
    JobStatus,
    Office,
    OrchestratorError,
    ProxyDecision,
    PushTarget,
    ReviewRound,
    RoundLedger,
    local_push_target,
)

Approver = Callable[[Gate], Awaitable[str]]


class UnansweredGateError(OrchestratorError):
    """A gate was asked where nobody can answer it (no terminal, `--no-input`): the job
    stays parked at it, saved, until a run that can answer resumes it."""

    def __init__(self, job_id: int, gate: Gate) -> None:
        super().__init__(f"job {job_id} waits at gate {gate.gate_id}: {gate.question}")
        self.job_id = job_id
        self.gate = gate


class LocalForge:
    """One local job's Forge: lines on the terminal, answers from it, the branch into `repo`."""

    def __init__(
        self,
        office: Office,
        repo: Path,
        *,
        decider: str,
        approve: Approver | None,
        say: Callable[[str], None],
        auto: str | None = None,
    ) -> None:
        self.office = office
        self.repo = repo
        self.decider = decider
        self.approve = approve  # None: nobody here can answer
        self.auto = auto  # an answer given to every gate on the decider's behalf (`--yes`)
        self.say = say
        self._shown: tuple[str, str] | None = None
        self._failed: set[str] = set()

    async def show(self, status: JobStatus) -> None:
        """Print the job's state and step when they change."""
        view = (status.state, status.step)
        if view != self._shown:
            self._shown = view
            step = "" if status.step == status.state else f" {status.step}"  # not `[done] done`
            self.say(f"  [{status.state}]{step}")

    async def ask(
        self, status: JobStatus, gate: Gate, *, suggestion: ProxyDecision | None = None
    ) -> None:
        """Ask the gate at the terminal and record the answer as the decider's (with `auto`,
        answer it so on their behalf, and say so); the proxy's suggestion is shown first."""
        self.say(f"gate {gate.gate_id} ({_who(gate)}): {gate.question}")
        if suggestion is not None:
            self.say(f"  the proxy suggests: {suggestion.answer} ({proxy_figures(suggestion)})")
        via: AnsweredVia = "human"
        if self.auto is not None and gate.engine_made and gate.kind == "budget":
            # `--yes` spends no more than the budget: the job stops at it, as it says.
            answer, by, via = "no", f"{self.decider} (--yes)", "auto"
            self.say("  answered 'no' automatically: --yes does not raise a job's budget")
        elif self.auto is not None:  # no decision of the decider's: the proxy never learns it
            answer, by, via = self.auto, f"{self.decider} (--yes)", "auto"
            self.say(f"  answered {answer!r} automatically (--yes)")
        elif self.approve is None:
            raise UnansweredGateError(status.job_id, gate)
        else:
            answer, by = await self.approve(gate), self.decider
            self.say(f"  {self.decider} answered: {answer}")
        await self.office.answer_gate(gate.gate_id, text=answer, answered_by=by, via=via)

    async def proxy_answered(self, status: JobStatus, gate: Gate, decision: ProxyDecision) -> None:
        """Print the answer the proxy gave alone, and why."""
        self.say(f"gate {gate.gate_id} ({_who(gate)}): {gate.question}")
        self.say(
            f"  the proxy answered for {decision.decider}: {decision.answer} "
            f"({proxy_figures(decision)})"
        )
        self.say(f"  its reasons: {decision.reasons or '(none given)'}")

    async def deliver(self, status: JobStatus, job: JobHandle) -> Delivered:
        """Say how the checks of the job branch the engine pushed fared; the branch is the
        link."""
        self.say(f"job {status.job_id}: {checks_line(status)}")
        for line in learned_lines(status):
            self.say(line)
        return Delivered(job.space.branch)

    async def deliver_round(
        self, status: JobStatus, job: JobHandle, review: ReviewRound, ledger: RoundLedger
    ) -> str | None:
        """Have the round's work pushed into the local repository (no threads to answer)."""
        await ledger.push()
        self.say(f"job {status.job_id}: review round {review.number} pushed to {job.space.branch}")
        return job.head

    async def push_target(self, job: JobHandle) -> PushTarget:
        """The local repository; ForgeError, saying what to do, when a worktree there has
        the job branch checked out (git would refuse to move it under the files) or the
        branch there is not this job's."""
        return await local_push_target(self.repo, job)

    async def fail(self, status: JobStatus, error: str) -> None:
        """Say once what failed, and that the same command again retries it."""
        if error not in self._failed:
            self._failed.add(error)
            self.say(f"job {status.job_id} failed: {error}")
            self.say(f"  to retry what failed: teaparty run --resume {status.job_id}")

    async def remind(self, status: JobStatus, gate: Gate, *, days: float) -> None:
        """A local run asks at the terminal, or stops (exit 4): nobody to remind."""

    async def close_idle(self, status: JobStatus, gate: Gate, *, days: float) -> None:
        """A local job waits, saved, until a run resumes it: nothing to say."""

    async def credentials(self) -> str | None:
        """A local repository needs none."""
        return None


def proxy_figures(decision: ProxyDecision) -> str:
    """The proxy's figures at a gate in words: stated and measured confidence, agreement."""
    stated = "?" if decision.confidence is None else f"{decision.confidence:.2f}"
    if decision.comparable == 0:  # an agreement over nothing is no figure
        return (
            f"stated confidence {stated}; no earlier {decision.kind} decision of "
            f"{decision.decider}'s to measure it against yet; {decision.why}"
        )
    measured = "none" if decision.measured is None else f"{decision.measured:.2f}"
    decisions = "decision" if decision.comparable == 1 else "decisions"
    return (
        f"stated confidence {stated}, measured {measured}; agreement with "
        f"{decision.decider} {decision.agreement:.2f} over {decision.comparable} comparable "
        f"{decision.kind} {decisions}; {decision.why}"
    )


def _who(gate: Gate) -> str:
    """Who asks: the agent, or for the engine's own gates their kind (`plan`, `budget`)."""
    return f"{gate.kind}, {gate.short_hash}" if gate.engine_made else gate.asked_by


def learned_lines(status: JobStatus) -> list[str]:
    """What the job learned, as a local run says it: kept once its branch is merged into the
    branch later jobs start from."""
    if not status.learned:
        return []
    return [
        f"job {status.job_id} learned (in {status.branch}'s .teaparty/learnings/; kept for "
        "later jobs once you merge that branch; `teaparty learnings forget ID` drops one):",
        *(f"  {learning.entry_id}  {learning.text}" for learning in status.learned),
    ]


def checks_line(status: JobStatus) -> str:
    """What the engine's checks of the delivered commit found, never silent when none ran."""
    head = next((c for c in reversed(status.checks) if c.task is None), None)
    if head is None:
        return f"no check ran: {status.checks_missing or 'none was recorded for this commit'}"
    return head.checked.summary().replace("\n", "\n  ")
