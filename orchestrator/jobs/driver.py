"""Jobs carried to their end through a Forge: status shown, gates asked, the branch delivered.

The engine's scheduler runs conversations on its own; the driver looks at one job at a
time, as the store has it, and makes the world outside agree: the status where the
requester reads it, each open gate asked, and once the office manager has replied, the
job branch published and its change request opened. Every Forge call is idempotent, so
`sync` may run any number of times, after any crash.

A forge that asks to wait (GitHub's rate limit) parks the job in the store until the time
it names: nothing fails and no attempt is spent, and its status says what it waits for.
A job whose workspace cannot be made, or that ends with nothing to deliver, says so and
pushes nothing. A cancelled job (jobs/withdraw.py) is shown as such, and nothing more.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

from orchestrator.bus import gates as gate_rows
from orchestrator.bus import jobs as job_rows
from orchestrator.bus import transactions as txn
from orchestrator.bus.failures import Failure
from orchestrator.bus.gates import Gate, open_gates
from orchestrator.bus.waits import Wait
from orchestrator.config.schema import Waiting
from orchestrator.core.clock import Clock
from orchestrator.core.errors import ForgeWaitError, OrchestratorError
from orchestrator.core.messages import job_conversation_id
from orchestrator.jobs import delivery, early_draft, protection, secret_check
from orchestrator.jobs.budget import Limits, Spent
from orchestrator.jobs.checks import NO_COMMAND, JobCheck
from orchestrator.jobs.handle import JobHandle
from orchestrator.jobs.office import Office
from orchestrator.jobs.ports import Forge, JobState, JobStatus
from orchestrator.jobs.protected_gate import Cleared, Held, Refused, Verdict, refusal
from orchestrator.jobs.round_records import CI_AUTHOR, ReviewRound
from orchestrator.jobs.secret_gate import Stopped
from orchestrator.proxy.decisions import ProxyDecision
from orchestrator.store.sqlite import Tx
from orchestrator.teams.board import Task, list_tasks
from orchestrator.workspace import spaces
from orchestrator.workspace.git import rev
from orchestrator.workspace.spaces import JobSpace

log = logging.getLogger(__name__)
DAY_S = 86_400.0

Forges = Callable[[int], Awaitable[Forge | None]]


class JobDriver:
    """Brings each job's outside world in line with the store, one sync at a time per job."""

    def __init__(self, office: Office, forges: Forges, *, clock: Clock = time.time) -> None:
        self.office = office
        self.forges = forges
        self.clock = clock
        self._locks: dict[int, asyncio.Lock] = {}

    async def status(self, job_id: int, *, link: str | None = None) -> JobStatus:
        """The job's status from the store."""
        row, tasks, gates, result, asked = await self.office.engine.store.read(
            lambda tx: _job_facts(tx, job_id)
        )
        title, state, branch, project = row
        spent = await self.office.budget.spent(job_id)
        failed = await self.office.failures(job_id)
        failure = "; ".join(_describe(f) for f in failed) or None
        phase, step = job_phase(state, tasks, gates, result, failure)
        waits = await self.office.waits(job_id) if phase not in ("done", "cancelled") else []
        sandbox = self.office.sandbox_summary(project)
        paused_by = await self.office.control.paused_by(job_id) if phase != "done" else None
        steering = tuple(s.text for s in await self.office.control.steering(job_id))
        review = await self.office.rounds.running(job_id) if phase != "done" else None
        if review is not None and phase in ("planning", "working"):
            step = f"review round {review.number}: {step}"
        pull = await self.office.rounds.pull(job_id)
        setup = None if self.office.setups is None else self.office.setups.known(job_id)
        setup_failed = None if setup is None else setup.failed
        if paused_by is not None and phase in ("planning", "working"):
            step = f"paused by {paused_by}: {step}"
        return JobStatus(
            job_id,
            title,
            phase,
            step,
            tasks,
            spent.usage,
            spent.usd,
            branch,
            result,
            link,
            failure,
            sandbox,
            _waiting(waits[0]) if waits and failure is None else None,
            paused_by,
            steering,
            tuple(round_line(r) for r in await self.office.rounds.of_job(job_id)),
            await self.office.cost_by_level(job_id),
            budget_note(spent, await self.office.budget.limits(job_id)),
            None if pull is None else pull.state,
            None if setup is None else setup.summary(),
            None if setup_failed is None else setup_failed.tail,
            *await self._checks(job_id, project),
            refused=await self.office.egress.of_job(job_id),
            learned=await self.office.learned.of(job_id),
            ci=await self.office.ci.notes(job_id),
            gates=asked,
        )

    async def _checks(self, job_id: int, project: str) -> tuple[tuple[JobCheck, ...], str | None]:
        checks = self.office.checks
        if checks is None:
            return (), None
        missing = None if checks.commands(project) else NO_COMMAND
        return await checks.of_job(job_id), missing

    async def sync(self, job_id: int) -> JobState:
        """Make the outside agree with the store for one job; the state it is in."""
        lock = self._locks.setdefault(job_id, asyncio.Lock())
        async with lock:
            forge = await self.forges(job_id)
            if forge is None:
                return (await self.status(job_id)).state
            held = next((w for w in await self.office.waits(job_id) if w.kind == "forge"), None)
            if held is not None and held.until > self.clock():
                return (await self.status(job_id)).state  # the sweep comes back after `until`
            try:
                state = await self._sync(job_id, forge)
            except ForgeWaitError as exc:
                return await self._hold(job_id, forge, exc)
            if held is not None:
                await self.office.forge_ready(job_id)
            return state

    async def _hold(self, job_id: int, forge: Forge, wait: ForgeWaitError) -> JobState:
        """Park the job until the forge's reset, and say so where it can still be said."""
        log.warning("job %d: %s; held until %s", job_id, wait, _clock_time(wait.retry_at))
        await self.office.wait_for_forge(job_id, str(wait), until=wait.retry_at, at=self.clock())
        status = await self.status(job_id)
        try:
            await forge.show(status)
        except ForgeWaitError:
            pass  # every call is held back: the comment says it once the limit resets
        return status.state

    async def _sync(self, job_id: int, forge: Forge) -> JobState:
        status = await self.status(job_id)
        if status.state == "failed":
            await forge.fail(status, status.error or "unknown failure")
            return status.state
        if status.state != "delivering":  # delivering is shown by its outcome, a moment later
            await forge.show(status)
        if status.state in ("done", "cancelled"):
            await self._ended(status, forge)
            return status.state
        space = await self._space(job_id, forge)
        if space is None:
            return await self._failed(job_id, forge)
        await self._announce(status, forge)
        if status.state in ("planning", "working") and await self.office.rounds.watchdog(
            job_id, at=self.clock()
        ):
            return await self._failed(job_id, forge)
        if status.state in ("planning", "working", "waiting"):
            await early_draft.advance(self.office, forge, status, space)
        if status.state == "waiting":
            await self._ask_open(status, forge)
        if status.state != "delivering":
            return status.state
        return await self._deliver(status, forge, space)

    async def _ask_open(self, status: JobStatus, forge: Forge) -> None:
        for gate in await self.office.open_gates(status.job_id):
            if await self._gate(status, forge, gate):  # asked: it may wait too long
                await self._wait_well(status, forge, gate)

    async def _gate(self, status: JobStatus, forge: Forge, gate: Gate) -> bool:
        """Consult the proxy on a gate first: it answers alone, or its prediction goes with
        the question as a suggestion. Whether the gate was put to the decider."""
        decision = await self._consult(status, gate)
        if decision is not None and decision.alone:
            await self._announce(status, forge)
            return False
        suggestion = decision if decision is not None and decision.answer is not None else None
        await delivery.ask(self.office, forge, status, gate, suggestion=suggestion)
        return True

    async def _consult(self, status: JobStatus, gate: Gate) -> ProxyDecision | None:
        known = await self.office.proxy.decision(gate.gate_id)
        if known is not None:
            return known
        job = await self.office.records.job(status.job_id)
        assert job is not None  # its status was just read
        project = self.office.projects.get(job.project)
        if project is None:  # a job whose project is not served (yet): no proxy
            return None
        spent = await self.office.budget.exhausted(status.job_id)
        if status.paused_by is not None:  # a held job makes no model call, the proxy's included
            spent = f"the job is paused by {status.paused_by}"
        elif (edit := await self.office.issue_edits.waiting(status.job_id)) is not None:
            spent = f"the issue was edited: the job waits at question {edit}"
        return await self.office.proxy.consult(
            gate,
            project=project,
            job_title=status.title,
            learnings=await self.office.learnings.of(status.job_id),
            preferences=(await self.office.control.preferences()).get(project.name, []),
            spent=spent,
        )

    async def _announce(self, status: JobStatus, forge: Forge) -> None:
        """Say each answer the proxy gave alone that is not said yet (once said, recorded)."""
        for gate, decision in await self.office.proxy.unannounced(status.job_id):
            await forge.proxy_answered(status, gate, decision)
            await self.office.proxy.announced(decision.gate_id)

    async def _deliver(self, status: JobStatus, forge: Forge, space: JobSpace) -> JobState:
        """Publish the job's work, or with nothing changed publish nothing, and finish it.

        What the branch adds is scanned for secrets first, then a change to protected paths
        waits for the decider's approval of exactly it (each asked here, in this sync);
        refused, or holding a secret value the App holds, nothing is published and the job
        ends saying so.
        """
        job_id = status.job_id
        job = JobHandle(job_id, job_conversation_id(job_id), space, created=False)
        link, result, head, early = None, status.result, None, False
        review = await self.office.rounds.running(job_id)
        verdict: Cleared | Held | Stopped = Cleared(None)
        try:
            if review is not None:  # people's pushes during the round are merged, not overwritten
                await self.office.round_work.catch_up(job_id, auth=await forge.credentials())
            if await self.office.has_work(job) and not await early_draft.changes_nothing(
                self.office, forge, job
            ):
                # What the job learned goes on its branch first: scanned and checked with it.
                await self.office.propose_learnings(job)
                verdict = await self._checked(job)
                if isinstance(verdict, Stopped):
                    result = verdict.result
                elif isinstance(verdict, Cleared):
                    status = await self._head_checked(job, verdict.head)
                    pushed = replace(job, head=verdict.head)
                    if review is not None:
                        head = await delivery.deliver_round(
                            self.office, forge, status, pushed, review
                        )
                    else:
                        early = await early_draft.enabled(self.office, forge, job_id)
                        link = await delivery.deliver(
                            self.office, forge, status, pushed, early=early
                        )
        except ForgeWaitError:
            raise
        except OrchestratorError as exc:  # ForgeError, GitError: said once, retried on request
            log.warning("job %d: delivery failed: %s", job_id, exc)
            await self.office.delivery_failed(job_id, f"delivering the work failed: {exc}")
            return await self._failed(job_id, forge)
        if isinstance(verdict, Held):  # asked now, outside: nobody to ask is no failure
            waiting = await self.status(job_id)
            await forge.show(waiting)
            await self._ask_open(waiting, forge)
            return waiting.state
        if review is not None:
            outcome = result if isinstance(verdict, Stopped) else "pushed and answered"
            await self.office.round_work.finish(
                job_id, space, review.round_id, head=head, outcome=outcome or ""
            )
        else:
            await self._finish(job, result, ready=early and link is not None)
        done = await self.status(job_id, link=link)
        await forge.show(done)
        await self._ended(done, forge)
        return done.state

    async def _ended(self, status: JobStatus, forge: Forge) -> None:
        """An ended job's early draft, never made ready, is closed (early_draft.py); a
        failure doing so is logged and tried again with the next sync."""
        try:
            await early_draft.close_unfinished(self.office, forge, status)
        except ForgeWaitError:
            raise
        except OrchestratorError as exc:
            log.warning("job %d: its draft is not closed yet: %s", status.job_id, exc)

    async def _finish(self, job: JobHandle, result: str | None, *, ready: bool) -> None:
        """End the job; `ready`: its early draft was made ready, so a round queued on the
        draft while the job worked starts now."""
        await self.office.finish_job(job, result)
        if ready:
            await self.office.rounds.pull_state(job.job_id, "open")

    async def _head_checked(self, job: JobHandle, head: str | None) -> JobStatus:
        """The status to deliver with: the project's checks of the very head pushed."""
        space = job.space
        found = head or await rev(space.repo, f"refs/heads/{space.branch}")
        if found is not None:
            await self.office.check_head(job.job_id, space, found)
        return await self.status(job.job_id)

    async def _checked(self, job: JobHandle) -> Cleared | Held | Stopped:
        """The secret scan, then the protected-path check of the very head it passed."""
        verdict: Verdict | Stopped = await secret_check.check(self.office, job)
        if isinstance(verdict, Cleared):
            verdict = await protection.check(self.office, job, head=verdict.head)
        return Stopped(refusal(verdict.gate)) if isinstance(verdict, Refused) else verdict

    async def _failed(self, job_id: int, forge: Forge) -> JobState:
        failed = await self.status(job_id)
        await forge.fail(failed, failed.error or "unknown failure")
        return "failed"

    async def _space(self, job_id: int, forge: Forge) -> JobSpace | None:
        """The job's workspace; made here, in the job's own sync, the first time (a clone).

        None when it cannot be made: the job fails with the reason, until a retry.
        """
        space = await self.office.workspace.job(job_id)
        here = space is not None and self.office.workspace.present(space)
        if here and await self.office.is_ready(job_id):
            return space
        # Made, but a crash came before the job was ready: finish it, no clone needed; a
        # review round fetches what people pushed to the branch meanwhile. Recorded but not
        # on this machine (a runner's next run): made again from the source.
        fetches = not here or await self.office.rounds.running(job_id) is not None
        auth = await forge.credentials() if fetches else None
        try:
            return await self.office.prepare(job_id, auth=auth)
        except OrchestratorError as exc:
            log.warning("job %d: no workspace: %s", job_id, exc)
            await self.office.workspace_failed(job_id, f"the job's workspace failed: {exc}")
            return None

    async def _wait_well(self, status: JobStatus, forge: Forge, gate: Gate) -> None:
        """A question open past the project's `waiting` times: a reminder, then the job
        closes (paused, resumable with `/resume`), each said once."""
        record = await self.office.records.job(status.job_id)
        project = self.office.projects.get(record.project) if record else None
        waiting = project.waiting if project else Waiting()
        days = (self.clock() - gate.asked_at) / DAY_S
        if days >= waiting.close_after_days:
            if gate.closed_idle_at is None:
                by = f"TeaParty (no answer in {waiting.close_after_days:g} days)"
                if await self.office.control.close_idle(status.job_id, gate.gate_id, by=by):
                    log.info("job %d: closed, gate %d unanswered", status.job_id, gate.gate_id)
            await forge.close_idle(status, gate, days=waiting.close_after_days)
        elif days >= waiting.remind_after_days:
            await forge.remind(status, gate, days=waiting.remind_after_days)

    async def retry(self, job_id: int) -> list[str]:
        """Forget the job's failures and run again what failed; what was retried."""
        return [f.failure_key for f in await self.office.retry(job_id)]


NOTE_AT = 0.8  # of a cap, when the job says how much of it is used


def budget_note(spent: Spent, limits: Limits) -> str | None:
    """How much of its budget the job has used, once that is 80% of a cap or more."""
    max_usd, max_tokens = limits
    notes = []
    if max_usd and spent.usd >= NOTE_AT * max_usd:
        notes.append(f"${spent.usd:.2f} of its ${max_usd:.2f}")
    if max_tokens and spent.tokens >= NOTE_AT * max_tokens:
        notes.append(f"{spent.tokens:,} of its {max_tokens:,} tokens")
    if not notes:
        return None
    return f"{' and '.join(notes)} used; at the cap the job waits for its decider"


def round_line(review: ReviewRound) -> str:
    """One review round as the requester reads it: who asked, how much, what came of it."""
    ci = any(p.point.author == CI_AUTHOR for p in review.points)
    who = ", ".join(f"@{login}" for login in review.reviewers) or ("CI" if ci else "a reviewer")
    said = {
        "queued": "waiting for the round before it",
        "asked": "waiting for the decider (past the rounds limit)",
        "running": "running",
        "delivered": f"pushed {review.head[:7]}" if review.head else "answered, nothing to push",
        "stopped": f"stopped: {review.outcome}",
    }[review.state]
    answered = sum(p.action is not None for p in review.points)
    return (
        f"round {review.number} ({who}): {len(review.points)} point(s), {answered} answered; {said}"
    )


def _describe(failure: Failure) -> str:
    if failure.kind in ("delivery", "workspace"):
        return failure.reason
    return f"{failure.failure_key}: {failure.reason}"


def _waiting(wait: Wait) -> str:
    what = "GitHub's rate limit" if wait.kind == "forge" else "the model, which is unavailable"
    return f"waiting for {what}; trying again at {_clock_time(wait.until)}"


def _clock_time(at: float) -> str:
    return time.strftime("%H:%M:%S UTC", time.gmtime(at))


def _job_facts(
    tx: Tx, job_id: int
) -> tuple[tuple[str, str, str, str], tuple[Task, ...], list[int], str | None, tuple[Gate, ...]]:
    job = job_rows.get(tx, job_id)
    if job is None:
        raise OrchestratorError(f"no job {job_id}")
    waiting = [gate.gate_id for gate in open_gates(tx, job_id)]
    root = txn.listed(tx, job_conversation_id(job_id))
    if root is None:
        raise OrchestratorError(f"no conversation of job {job_id}")
    # the job's own once it ended (a refusal says so), else the reply
    kept = job_rows.result_of(tx, job_id) if job.state != "active" else None
    result = root.result if kept is None else kept
    facts = (job.title, job.state, spaces.branch_of(tx, job_id) or "", job.project)
    asked = tuple(gate_rows.of_job(tx, job_id))
    return facts, tuple(list_tasks(tx, job_id)), waiting, result, asked


def job_phase(
    state: str, tasks: tuple[Task, ...], gates: list[int], result: str | None, failure: str | None
) -> tuple[JobState, str]:
    """The job's state as its requester sees it, and its current step, from the store's facts:
    its row's state, its tasks, its open gates, the office manager's reply, its failures."""
    if state == "complete":
        return "done", "done"
    if state == "withdrawn":
        return "cancelled", "cancelled"
    if failure is not None:
        return "failed", "stopped by an error"
    if gates:
        asked = "a question" if len(gates) == 1 else f"{len(gates)} questions"
        return "waiting", f"waiting for an answer to {asked}"
    if result is not None:
        return "delivering", "delivering the work: the job branch and its change request"
    if not tasks:
        return "planning", "planning the work"
    active = [t for t in tasks if t.state in ("in_progress", "in_review")]
    if active:
        names = ", ".join(f"#{t.number} {t.title}" for t in active)
        return "working", f"working on {names}"
    pending = sum(t.state in ("pending", "blocked") for t in tasks)
    to_go = "1 task to go" if pending == 1 else f"{pending} tasks to go"
    return "working", to_go if pending else "reviewing the job"
