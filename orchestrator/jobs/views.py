"""What `teaparty jobs` shows: every job in a line, one job's tracking view, its transcript.

Read from the store opened read-only beside whichever process holds it (`Store.attach`):
a look neither waits for `teaparty serve` or a `teaparty run` nor disturbs them. A job's
state is the one its requester sees (`JobDriver.status`): planning, working, waiting (at
a question), delivering, done, failed or cancelled, and what it waits out (a model outage,
a forge's rate limit) with when that ends. Nothing carries a job on while no process holds
the store, or only a `teaparty run` of another job (`Store.claim`): a local job then is
interrupted (its run was stopped; it goes on when resumed),
unless it waits at a question; a GitHub job goes on when `teaparty serve` runs; neither
shows a wait's end, which nobody would act on. Cost is counted and priced as the budget does it:
each agent's tokens (the proxy's at the job's gates included) at its model, found in the
project the job runs under, at the organisation's prices.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

from orchestrator.bus import failures as failure_rows
from orchestrator.bus import gates as gate_rows
from orchestrator.bus import jobs as job_rows
from orchestrator.bus import transactions as txn
from orchestrator.bus import waits as wait_rows
from orchestrator.bus.failures import Failure
from orchestrator.bus.gates import Gate
from orchestrator.bus.waits import Wait
from orchestrator.core.errors import JobNotFoundError
from orchestrator.core.messages import Message, Usage, job_conversation_id
from orchestrator.jobs import commands, control, refusals, sources
from orchestrator.jobs.budget import spent_by_agent
from orchestrator.jobs.checks import JobCheck
from orchestrator.jobs.checks import latest as latest_checks
from orchestrator.jobs.commands import JobCommand
from orchestrator.jobs.driver import job_phase
from orchestrator.jobs.ports import JobState
from orchestrator.jobs.pricing import JobPricing
from orchestrator.store.sqlite import Store, Tx, attach_beside, holder
from orchestrator.teams.board import Task, list_tasks
from orchestrator.workspace import spaces

ENDED: frozenset[str] = frozenset({"done", "cancelled"})
STATE_FILTERS = (
    "planning", "working", "waiting", "delivering", "interrupted", "done", "failed", "cancelled",
    "active", "ended",
)  # fmt: skip
ViewState = JobState | Literal["interrupted"]  # interrupted: local, and nothing runs it
Forge = Literal["local", "github", "other"]
Sleep = Callable[[float], Awaitable[None]]
Row = TypeVar("Row", Failure, Wait)


@dataclass(frozen=True)
class JobOrigin:
    """Where a job comes from, read from its key: a local repository, a GitHub issue."""

    forge: Forge
    repository: str | None  # owner/name, or the local repository's path
    issue: int | None = None

    @classmethod
    def of_key(cls, job_key: str) -> JobOrigin:
        """`local:{path}:{nonce}` and `github:{owner}/{name}#{number}`; other keys as they are."""
        kind, _, rest = job_key.partition(":")
        if kind == "local" and rest:
            return cls("local", rest.rsplit(":", 1)[0])
        name, _, number = rest.rpartition("#")
        if kind == "github" and name and number.isdigit():
            return cls("github", name, int(number))
        return cls("other", None)

    def matches(self, repo: str) -> bool:
        """Whether `repo` names this job's repository: owner/name or name on GitHub, the
        path or the directory's name of a local one."""
        if self.repository is None:
            return False
        if self.forge == "github":
            wanted = repo.lower()
            return wanted in (self.repository.lower(), self.repository.lower().split("/")[-1])
        return repo in (self.repository, Path(self.repository).name)


@dataclass(frozen=True)
class JobSummary:
    """A job in one line: where from, what state, what waits on it, what it cost."""

    job_id: int
    job_key: str
    origin: JobOrigin
    title: str
    state: ViewState
    step: str  # what it does, or (interrupted) what it was doing
    open_gates: int
    usage: Usage
    cost_usd: float | None  # None: not priced (its project or a model's price is unknown)
    created_at: float
    updated_at: float
    waiting: Wait | None = None  # the wait ending last, while the job is not ended
    held: bool = True  # a teaparty process that carries it on held the store as it was read


@dataclass(frozen=True)
class JobView:
    """One job as its tracking view shows it: tasks, gates, branch, errors, commands."""

    summary: JobSummary
    branch: str | None
    worktree: str | None  # where its worktree is (or was: see `worktree_present`)
    worktree_present: bool
    result: str | None
    tasks: tuple[Task, ...]
    gates: tuple[Gate, ...]
    failures: tuple[Failure, ...]
    commands: tuple[JobCommand, ...] = field(default=())
    preferences: tuple[str, ...] = ()  # what its project's decider asked to be remembered
    checks: tuple[JobCheck, ...] = ()  # the engine's checks: each task's latest, the job's
    refused: tuple[refusals.Refused, ...] = ()  # what the sandbox refused its agents

    @property
    def last_error(self) -> str | None:
        """Why the job last stopped, if it did."""
        return self.failures[-1].reason if self.failures else None


@dataclass(frozen=True)
class LogEntry:
    """One message of a job's transcript, in the conversation of `agent`."""

    message_id: int
    at: float
    agent: str
    message: Message


class JobViews:
    """The read side of `teaparty jobs`, over a store opened read-only (None: no store yet)."""

    def __init__(self, store: Store | None, pricing: JobPricing) -> None:
        self.store = store
        self.pricing = pricing

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, home: Path, *, org_dir: Path) -> AsyncIterator[JobViews]:
        """The views of the store under `home`, opened read-only beside any holder; one of
        an older version is migrated first when nobody holds it."""
        path = home / "teaparty.db"
        store = await attach_beside(path) if _exists(path) else None
        try:
            yield cls(store, JobPricing.of(org_dir))
        finally:
            if store is not None:
                await store.close()

    async def jobs(self, *, state: str | None = None, repo: str | None = None) -> list[JobSummary]:
        """Every job, newest first; only those in `state` (see STATE_FILTERS) or of `repo`."""
        if self.store is None:
            return []
        scope = self.holder()  # before the facts: a run that ends first has ended its job
        facts = await self.store.read(lambda tx: _every_job(tx, self.pricing.proxy))
        found = [self._summary(fact, scope) for fact in facts]
        return [
            s for s in found if _in_state(s, state) and (repo is None or s.origin.matches(repo))
        ]

    async def job(self, job_id: int) -> JobView:
        """The job's tracking view (JobNotFoundError: no such job)."""
        if self.store is None:
            raise JobNotFoundError(job_id)
        scope = self.holder()
        fact, detail = await self.store.read(lambda tx: _one_job(tx, job_id, self.pricing.proxy))
        branch, worktree, present, gates, failed, done = detail
        kept = await self.store.read(lambda tx: _preferences(tx, job_id))
        checks = await self.store.read(lambda tx: latest_checks(tx, job_id))
        refused = await self.store.read(lambda tx: refusals.of_job(tx, job_id))
        return JobView(
            self._summary(fact, scope), branch, worktree, present, fact.result,
            fact.tasks, tuple(gates), tuple(failed), tuple(done), kept, checks, refused,
        )  # fmt: skip

    async def log(self, job_id: int, *, after: int = 0) -> list[LogEntry]:
        """The job's messages after message `after`, in the order they were written."""
        if self.store is None:
            raise JobNotFoundError(job_id)
        return await self.store.read(lambda tx: _log(tx, job_id, after))

    async def follow(
        self, job_id: int, *, interval: float = commands.POLL_S, sleep: Sleep = asyncio.sleep
    ) -> AsyncIterator[LogEntry]:
        """The job's messages, then each new one as it is written, until the job is done,
        failed, cancelled or interrupted."""
        after = 0
        while True:
            # The state is read first: every message written before the job ended is shown.
            stopped = (await self.job(job_id)).summary.state in (*ENDED, "failed", "interrupted")
            for entry in await self.log(job_id, after=after):
                after = entry.message_id
                yield entry
            if stopped:
                return
            await sleep(interval)

    def holder(self) -> str | None:
        """What the process holding the store carries on (`run_scope` of a local run's job;
        "" every job, or it did not say); None when no process holds it."""
        return None if self.store is None else holder(self.store.path)

    def _summary(self, fact: _JobFact, scope: str | None) -> JobSummary:
        failure = fact.failures[-1].reason if fact.failures else None
        gates = list(range(fact.open_gates))
        state, step = job_phase(fact.state, fact.tasks, gates, fact.result, failure)
        usage = sum(fact.spent.values(), Usage())
        cost = self.pricing.cost(fact.project, fact.project_text, fact.spent)
        origin = JobOrigin.of_key(fact.job_key)
        going = state not in (*ENDED, "failed")
        attended = scope is not None and scope in ("", run_scope(fact.job_id))
        return JobSummary(
            fact.job_id, fact.job_key, origin, fact.title, _shown(state, origin, attended), step,
            fact.open_gates, usage, cost, fact.created_at, fact.updated_at,
            fact.waits[0] if fact.waits and going and attended else None, attended,
        )  # fmt: skip


def run_scope(job_id: int) -> str:
    """What a local run that holds the store says it carries on: its one job."""
    return f"job:{job_id}"


def _shown(state: JobState, origin: JobOrigin, attended: bool) -> ViewState:
    """A local job that has not ended, fails nothing and waits at no question is interrupted
    while no process holds the store: nothing carries it on until it is resumed."""
    if attended or origin.forge != "local" or state in (*ENDED, "failed", "waiting"):
        return state
    return "interrupted"


@dataclass(frozen=True)
class _JobFact(job_rows.Listed):  # its result: the job's own, else its root conversation's
    tasks: tuple[Task, ...] = ()
    open_gates: int = 0
    failures: tuple[Failure, ...] = ()
    waits: tuple[Wait, ...] = ()
    spent: dict[str, Usage] = field(default_factory=dict)


def _facts(tx: Tx, job_id: int | None, proxy: str) -> list[_JobFact]:
    rows = job_rows.listing(tx, job_id)
    spent = spent_by_agent(tx, proxy=proxy, job_id=job_id)  # as the budget counts it
    waiting_at = gate_rows.open_counts(tx, job_id)
    if job_id is None:
        failed = _by_job(failure_rows.every(tx))
        waiting = _by_job(sorted(wait_rows.every(tx), key=lambda w: -w.until))
    else:
        failed = {job_id: failure_rows.of_job(tx, job_id)}
        waiting = {job_id: wait_rows.of_job(tx, job_id)}  # the one ending last first
    facts = []
    for row in rows:
        job = row.job_id
        facts.append(
            _JobFact(
                job,
                row.job_key,
                row.project,
                row.title,
                row.state,
                row.created_at,
                row.updated_at,
                row.project_text,
                _result(tx, row),
                tuple(list_tasks(tx, job)),
                waiting_at.get(job, 0),
                tuple(failed.get(job, ())),
                tuple(waiting.get(job, ())),
                spent.get(job, {}),
            )  # fmt: skip
        )
    return facts


def _result(tx: Tx, row: job_rows.Listed) -> str | None:
    """The job's own result, else its root conversation's (the office manager's reply)."""
    if row.result is not None:
        return row.result
    root = txn.listed(tx, job_conversation_id(row.job_id))
    return None if root is None else root.result


def _every_job(tx: Tx, proxy: str) -> list[_JobFact]:
    return _facts(tx, None, proxy)


def _preferences(tx: Tx, job_id: int) -> tuple[str, ...]:
    """What the job's project's decider asked to be remembered (`/remember`), oldest first."""
    project = job_rows.project_of(tx, job_id)
    return () if project is None else tuple(control.preferences_of(tx, project))


def _one_job(
    tx: Tx, job_id: int, proxy: str
) -> tuple[
    _JobFact,
    tuple[str | None, str | None, bool, list[Gate], list[Failure], list[JobCommand]],
]:
    found = _facts(tx, job_id, proxy)
    if not found:
        raise JobNotFoundError(job_id)
    source = sources.of_job(tx, job_id)
    space = spaces.recorded_of(tx, job_id)
    branch = space.branch if space else source.branch if source else None
    worktree = space.path if space else None
    present = space is not None and not space.removed and Path(space.path).is_dir()
    gates = gate_rows.of_job(tx, job_id)
    detail = (
        branch,
        worktree,
        present,
        gates,
        list(found[0].failures),
        commands.of_job(tx, job_id),
    )
    return found[0], detail


def _log(tx: Tx, job_id: int, after: int) -> list[LogEntry]:
    if job_rows.get(tx, job_id) is None:
        raise JobNotFoundError(job_id)
    return [
        LogEntry(logged.message_id, logged.at, logged.agent, logged.message)
        for logged in txn.log_of_job(tx, job_id, after=after)
    ]


def _by_job(rows: list[Row]) -> dict[int, list[Row]]:
    grouped: dict[int, list[Row]] = {}
    for row in rows:
        if row.job_id is not None:
            grouped.setdefault(row.job_id, []).append(row)
    return grouped


def _in_state(summary: JobSummary, state: str | None) -> bool:
    if state is None or state == summary.state:
        return True
    if state == "active":
        return summary.state not in ENDED
    return state == "ended" and summary.state in ENDED


def _exists(path: Path) -> bool:
    return path.is_file()
