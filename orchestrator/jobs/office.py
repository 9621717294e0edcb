"""The organisation at work on one machine: engine, workspace, agents and tools, wired once.

A job enters at the office manager, who hands it to the project lead; the lead plans it on
the task board and dispatches tasks to mini-teams (directly, or through a workgroup lead);
the engine merges approved task branches into the job branch. `Office` is what the CLI,
the App and the tests drive.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Unpack

from orchestrator.bus import jobs as job_rows
from orchestrator.bus.conversations import JobStart
from orchestrator.bus.events import Event
from orchestrator.bus.failures import Failure
from orchestrator.bus.gates import AnsweredVia, Gate
from orchestrator.bus.routing import project_teams
from orchestrator.bus.waits import Wait, forge_key
from orchestrator.config import Project, load_project
from orchestrator.config.schema import Rounds, RunnerSettings
from orchestrator.core.clock import Deadline
from orchestrator.core.errors import ConfigError, OrchestratorError
from orchestrator.core.gate_kinds import GateKinds
from orchestrator.core.secret_scan import Scanner
from orchestrator.jobs import sources, wiring
from orchestrator.jobs.assembly import Assembly, Opening, assemble
from orchestrator.jobs.ci_desk import CiDesk
from orchestrator.jobs.control import JobControl
from orchestrator.jobs.handle import JobHandle
from orchestrator.jobs.issue_edits import IssueEdits
from orchestrator.jobs.learned import JobLearned, JobOrigin
from orchestrator.jobs.learnings import JobLearnings
from orchestrator.jobs.levels import LevelCost, by_level
from orchestrator.jobs.network_gate import NetworkDesk
from orchestrator.jobs.preserved import PreservedWork
from orchestrator.jobs.records import JobRecords
from orchestrator.jobs.review_desk import ReviewDesk
from orchestrator.jobs.round_work import RoundWork
from orchestrator.jobs.sources import KeptSource
from orchestrator.memory.entries import Learning
from orchestrator.memory.index import LearningIndex
from orchestrator.proxy.proxy import Proxy
from orchestrator.sandbox.confine import Network
from orchestrator.setup.checks import Checked
from orchestrator.store.deliveries import DeliveryQueue
from orchestrator.store.sqlite import Tx
from orchestrator.teams.transactions import mini_teams
from orchestrator.workspace.git import GitError, rev
from orchestrator.workspace.inventory import describe
from orchestrator.workspace.marks import job_mark
from orchestrator.workspace.preserve import Preserved
from orchestrator.workspace.spaces import JobSpace

log = logging.getLogger(__name__)

Approver = Callable[[Gate], Awaitable[str]]


class JobFailedError(RuntimeError):
    """A conversation of the job raised; the job stays in the store for a restart."""


@dataclass(frozen=True)
class JobSource:
    """Where a job's repository comes from and where its branch starts.

    `repo` names the mirror, `source` is where it is fetched from, `start` the commit the
    job branch starts at, `branch(job_id)` the job branch's name.
    """

    repo: str
    source: str
    start: str
    branch: Callable[[int], str]
    slug: str


@dataclass(frozen=True)
class Resumed:
    """Active jobs after a restart: those whose project is back, and those without one stored."""

    jobs: tuple[int, ...]
    without_project: tuple[int, ...]


class Office:
    """One engine over one state directory, with every project it serves.

    Built whole by `open`: the store first, then the workspace and every tool, then the
    engine with its budget and checkpoint. The edge reads and writes the store only
    through its methods and the ports `orchestrator.api.Ports` makes of its collaborators.
    """

    def __init__(self, parts: Assembly) -> None:
        engine, workspace, projects = parts.engine, parts.workspace, parts.served
        org, agents, board = parts.org, parts.agents, parts.board
        self.engine = engine
        self.setups = parts.setups
        self.checks = parts.checks  # the project's checks, run by the engine
        self.inventories = parts.inventories  # what agents' shells have (None: they run none)
        self.instructions = parts.team.instructions  # the repository's, for agents
        self.secrets = parts.secrets  # never pushed
        self.sandbox = parts.sandbox
        self.scripted = parts.scripted
        self.workspace = workspace
        self.org = org
        self.projects = projects
        self.agents = agents
        self.router = parts.router
        self.board = board
        self.budget = parts.budget
        self.records = JobRecords(engine.store)
        self.deliveries = DeliveryQueue(engine.store)
        self.learnings = JobLearnings(engine.store)
        self.memory = LearningIndex(engine.store)  # what merged jobs learned, searched
        self.learned = JobLearned(engine.store, self.memory, workspace)
        self.control = JobControl(engine.store, engine.scheduler)
        self.issue_edits = IssueEdits(engine.store, engine.events)
        self.rounds = ReviewDesk(engine.store, engine.bus, projects)
        self.ci = CiDesk(engine.store, engine.bus, projects, self.secrets)  # CI on its PR
        self.round_work = RoundWork(engine.store, workspace, self.rounds, board.workgroups)
        self.preserved = PreservedWork(engine.store, workspace)
        self.proxy = Proxy(engine.store, engine.bus, agent=org.proxy, models=agents.models)
        # agents' shell calls: the hosts approved for their job, what they were refused
        self.egress = NetworkDesk(
            engine.store, engine.events, asks=functools.partial(wiring.asks, projects)
        )

    @classmethod
    async def open(cls, home: Path, **opening: Unpack[Opening]) -> Office:
        """Open the store under `home`, wire the organisation (`Opening` says what each
        argument is), and clean up after a crash."""
        parts = await assemble(home, **opening)
        office = cls(parts)
        parts.files.egress = office.egress  # before any call: it publishes on the engine's events
        parts.files.noted = parts.team.instructions.noted
        parts.team.recall = office.recall_learnings
        await parts.workspace.recover()
        await parts.checks.checker.sweep()  # checkouts a crash left behind
        parts.agents.remember(await office.control.preferences())
        return office

    @property
    def gate_kinds(self) -> GateKinds:
        """The kinds of gate this office's features ask."""
        return self.engine.bus.extensions.kinds

    async def remember(self, job_id: int, text: str, *, by: str, ref: str | None = None) -> bool:
        """Keep a preference for the job's project (`/remember`): its agents read it from now
        on. False when `ref` gave it already."""
        kept = await self.control.remember(job_id, text, by=by, ref=ref)
        self.agents.remember(await self.control.preferences())
        return kept

    def project(self, name: str) -> Project | None:
        """The project this office serves under `name`, if it serves one."""
        return self.projects.get(name)

    def network(self, project: str) -> Network:
        """What the project's agents' processes may reach (its `sandbox.network`)."""
        return wiring.network(self.projects, project)

    def sandbox_summary(self, project: str) -> str:
        """One line on how the project's agents are confined, for its status report."""
        network = self.network(project).describe()
        if self.sandbox.mode == "off":
            return (
                "OFF (TEAPARTY_SANDBOX=off): agents' processes run unconfined on the App's "
                f"host; network: {network}"
            )
        if self.sandbox.mode == "unavailable":
            return "none on this host: agents' shells do not run"
        name = {"bwrap": "bubblewrap", "landlock": "Landlock"}[self.sandbox.mode]
        return f"{name}, the task's worktree only; network: {network}"

    def require_sandbox(self, project: str) -> None:
        """Raise SandboxError when the project's agents have a shell this host cannot confine."""
        found = self.projects.get(project)
        if found is None or self.scripted:
            return
        agents = [found.lead, *(a for w in found.workgroups for a in (w.lead, *w.members))]
        if any("shell" in agent.tools for agent in agents):
            self.sandbox.require()

    def add_project(self, project: Project, *, learnings: str | None = None) -> None:
        """Serve one more project (or a changed one) from now on: routes, agents, budget."""
        known = self.projects.get(project.name)
        self.projects[project.name] = project
        self.board.workgroups[project.name] = wiring.workgroup_order(project)
        if known != project:
            self.router.extend(project_teams(self.org, project, added=mini_teams))
        self.agents.add_project(project, learnings=learnings)

    async def start_job(
        self,
        *,
        project: str,
        key: str,
        title: str,
        brief: str,
        source: JobSource,
        project_text: str | None = None,
        learnings: str | None = None,
    ) -> JobStart:
        """Start a job once per key at the office manager; its workspace comes with `prepare`.

        The job keeps `project_text` (its project file) and `learnings` (else those it has, or
        `prepare` reads), so `resume` rebuilds its project after a restart. Its first turn
        waits for `prepare`. Raises SandboxError when its agents need a sandbox the host lacks.
        """
        self.require_sandbox(project)

        def keep_source(tx: Tx, job_id: int) -> None:
            kept = KeptSource(
                source.repo, source.source, source.start, source.branch(job_id), source.slug
            )
            sources.keep(tx, job_id, kept)
            modes = json.dumps(dict(self.projects[project].gates))  # the policy it started under
            job_rows.set_gate_modes(tx, job_id, modes)

        async with self.learnings.lock:  # `prepare` may be storing the job's learnings
            return await self.engine.bus.start_job(
                job_key=key,
                project=project,
                title=title,
                agent=self.org.office_manager.name,
                brief=brief,
                max_parallel=self.projects[project].parallel,
                wake=False,
                project_text=project_text,
                learnings=learnings or await self.learnings.of_key(key),
                also=keep_source,
            )

    async def start_here(
        self,
        *,
        project: str,
        key: str,
        title: str,
        brief: str,
        source: JobSource,
        project_text: str | None = None,
        auth: str | None = None,
    ) -> JobHandle:
        """`start_job`, then `prepare` at once: for a caller with nothing else waiting on it."""
        started = await self.start_job(
            project=project,
            key=key,
            title=title,
            brief=brief,
            source=source,
            project_text=project_text,
        )
        space = await self.prepare(started.job_id, auth=auth)
        return JobHandle(started.job_id, started.conversation_id, space, started.created)

    async def prepare(self, job_id: int, *, auth: str | None = None) -> JobSpace:
        """The job's workspace, made from its source the first time, then its first turn runs.

        Slow the first time (a clone or fetch): call it in the job's own time, not on a path
        other jobs wait on. `auth` is an HTTP header git sends to the source alone. A job
        without learnings gets its repository's here, before its first turn. A workspace the
        store records but this machine lacks (a runner's next run) is made again from the
        source and the work preserved there (jobs/preserved.py).
        """
        space = await self.workspace.job(job_id)
        if space is not None and not self.workspace.present(space):  # a fresh machine
            space = await self.preserved.rebuild(job_id, space, auth=auth)
            if await self.is_ready(job_id):
                return space
        if space is None:
            kept, key = await self.engine.store.read(
                lambda tx: (sources.of_job(tx, job_id), job_rows.key_of(tx, job_id))
            )
            if kept is None or key is None:
                raise OrchestratorError(f"job {job_id} has no workspace and no source to make one")
            mirror = await self.workspace.mirror(kept.repo, kept.source, auth=auth)
            space = await self.workspace.open_job(
                job_id,
                mirror=mirror,
                branch=kept.branch,
                start=kept.start,
                slug=kept.slug,
                mark=job_mark(key),
            )
        elif await self.is_ready(job_id):
            return space
        elif not space.path.exists():  # a review round of a job that rested: back again
            await self.workspace.reopen(space)
        if await self.rounds.running(job_id) is not None:
            await self._serve_again(job_id)  # it rested through a restart: not resumed then
            await self.round_work.start(job_id, space, auth=auth)
        await self._learn(job_id, space)  # again after a crash before `ready`: it checks
        if self.setups is not None:  # the environment before the first turn: tasks use it
            await self.setups.ensure(space, await self._project(job_id))
        await self._tell_shell(space, await self._project(job_id))
        await self._tell_instructions(space, await self._project(job_id))
        await self.engine.bus.ready(job_id)
        return space

    async def is_ready(self, job_id: int) -> bool:
        """Whether the job's workspace was made and its first turn may run."""
        return await self.engine.store.read(lambda tx: job_rows.is_ready(tx, job_id))

    async def resume(self) -> Resumed:
        """After a restart: each active job's project back as it started, its worktree back
        (a workspace this machine lacks comes back at the job's next `prepare`)."""
        stored = await self.engine.store.read(job_rows.active_projects)
        resumed: list[int] = []
        without: list[int] = []
        for job_id, name, text, learnings in (
            (kept.job_id, kept.project, kept.text, kept.learnings) for kept in stored
        ):
            if text is None:
                without.append(job_id)
                continue
            try:
                self.add_project(self._stored_project(job_id, name, text), learnings=learnings)
            except ConfigError as exc:  # one job's project no longer loads: the rest go on
                log.error("job %d not resumed: %s", job_id, exc)
                continue
            if (space := await self._reopen(job_id)) is not None:
                await self._tell_shell(space, name)
                await self._tell_instructions(space, name)
            resumed.append(job_id)
        return Resumed(tuple(resumed), tuple(without))

    async def _serve_again(self, job_id: int) -> None:
        """Serve the project of a job a review round woke, as it started, if this process
        does not (it was complete when the process resumed its jobs)."""
        kept = await self.engine.store.read(lambda tx: job_rows.stored_project(tx, job_id))
        if kept is None or kept.project in self.projects or kept.text is None:
            return
        project = self._stored_project(job_id, kept.project, kept.text)
        self.add_project(project, learnings=kept.learnings)

    async def round_settings(self, job_id: int) -> Rounds:
        """The review-round settings of the job's project as it started: served again first
        when this process does not serve it (a runner's next run, a restarted server, where
        only active jobs' projects come back), else a comment on its pull request would be
        gathered for the default window, not the project's."""
        try:
            await self._serve_again(job_id)
        except ConfigError as exc:  # its project no longer loads: the defaults stand
            log.warning("job %d: review rounds use the defaults: %s", job_id, exc)
        return self.rounds.settings(await self._project(job_id))

    async def runner_settings(self, job_id: int) -> RunnerSettings:
        """What a runner's step summary may show of the job (its project's `runner:`), its
        project served again first, as for `round_settings`; the defaults when it no longer
        loads."""
        try:
            await self._serve_again(job_id)
        except ConfigError as exc:
            log.warning("job %d: the run's summary uses the defaults: %s", job_id, exc)
        project = self.projects.get(await self._project(job_id))
        return RunnerSettings() if project is None else project.runner

    async def restore_project(
        self, job_id: int, text: str, *, learnings: str | None = None
    ) -> None:
        """Give a job whose project text was never stored this one, stored, and serve it.

        Without `learnings` the job keeps its own, or gets its repository's. Raises
        ConfigError when the text does not load against the organisation.
        """
        found = await self.records.job(job_id)
        if found is None:
            raise OrchestratorError(f"no job {job_id}")
        project = self._stored_project(job_id, found.project, text)
        async with self.learnings.lock:
            await self.engine.store.write(
                lambda tx: job_rows.keep_project(tx, job_id, text, learnings)
            )
        self.add_project(project, learnings=await self.learnings.of(job_id))
        space = await self._reopen(job_id)
        if space is not None:
            await self._learn(job_id, space)
            await self._tell_shell(space, found.project)

    async def _reopen(self, job_id: int) -> JobSpace | None:
        """The job's worktree back, when its workspace is on this machine (else its next
        `prepare` makes it again, with the source's credentials: None here)."""
        space = await self.workspace.job(job_id)
        if space is None:
            return None
        if not self.workspace.present(space):
            log.info("job %d: its workspace is not on this machine; prepare rebuilds it", job_id)
            return None
        return await self.workspace.reopen(space)

    async def _tell_shell(self, space: JobSpace, project: str) -> None:
        """Tell the project's agents that have a shell what it has (workspace/inventory.py),
        surveyed once with the job's prepared environment, if any."""
        if self.inventories is None or project not in self.projects:
            return
        outcome = None if self.setups is None else await self.setups.ensure(space, project)
        found = await self.inventories.of(None if outcome is None else outcome.prepared())
        if found is not None:
            said = None if outcome is None else outcome.brief()  # incomplete, it says so
            text = describe(found, network=self.network(project), prepared=said)
            self.agents.tell_shell(project, text)

    async def _tell_instructions(self, space: JobSpace, project: str) -> None:
        """Give the project's agents the repository-wide instruction files of the job's base
        commit (teams/instructions.py); a mirror that cannot be read gives none, said."""
        if self.instructions is None or project not in self.projects:
            return
        try:
            text = await self.instructions.wide(space, project)
        except GitError as exc:
            log.warning("job %d: the repository's instructions not read: %s", space.job_id, exc)
            return
        self.agents.tell_instructions(project, text)

    async def _learn(self, job_id: int, space: JobSpace) -> None:
        """A job without learnings gets its repository's: stored, then served to its agents."""
        kept = await self.learnings.learn(job_id, space)
        served = self.projects.get(await self._project(job_id))
        if kept is not None and served is not None:  # else they come back with its project
            self.add_project(served, learnings=kept)

    def _stored_project(self, job_id: int, name: str, text: str) -> Project:
        source = f"job {job_id}: the project file it started with"
        kinds = self.gate_kinds
        project = load_project(text, org=self.org, source=source, default_name=name, kinds=kinds)
        return project.model_copy(update={"name": name})

    async def failures(self, job_id: int) -> list[Failure]:
        """Why the job is stopped: its failed conversations and a failed delivery, if any."""
        return await self.engine.scheduler.failures(job_id)

    async def delivery_failed(self, job_id: int, reason: str) -> None:
        """Publishing the job's work failed: it stays failed until a retry is asked for."""
        await self.engine.bus.record_job_failure(job_id, "delivery", reason)

    async def waits(self, job_id: int) -> list[Wait]:
        """What the job waits out (a model outage, its forge's rate limit), longest first."""
        return await self.engine.bus.waits(job_id)

    async def wait_for_forge(self, job_id: int, reason: str, *, until: float, at: float) -> Wait:
        """The job's forge asked it to wait (a rate limit): nothing is sent before `until`."""
        return await self.engine.bus.wait(
            forge_key(job_id), job_id=job_id, kind="forge", reason=reason, at=at, until=until
        )

    async def forge_ready(self, job_id: int) -> None:
        """The job's forge took its calls again."""
        await self.engine.bus.end_wait(forge_key(job_id))

    async def workspace_failed(self, job_id: int, reason: str) -> None:
        """The job's workspace could not be made: it stays failed until a retry is asked for."""
        await self.engine.bus.record_job_failure(job_id, "workspace", reason)

    async def retry(self, job_id: int) -> list[Failure]:
        """Forget the job's failures and run what failed again; what was retried."""
        return await self.engine.scheduler.retry(job_id)

    async def open_gates(self, job_id: int | None = None) -> list[Gate]:
        """The job's unanswered questions (every job's, without one), oldest first."""
        return await self.engine.bus.open_gates(job_id)

    async def answer_gate(
        self,
        gate_id: int,
        *,
        text: str,
        answered_by: str,
        ref: str | None = None,
        via: AnsweredVia = "human",
    ) -> Gate:
        """Record a person's answer (`via="auto"`: one given on the decider's behalf, which the
        proxy never learns from) and wake the agent that asked; `ref` names its source (a
        comment's id), which answers one gate, once (else GateClosedError)."""
        return await self.engine.bus.answer_gate(
            gate_id, text=text, answered_by=answered_by, ref=ref, via=via
        )

    async def answered_from(self, ref: str) -> int | None:
        """The gate the source `ref` (a comment's id) answered, if it answered one."""
        return await self.engine.bus.answered_from(ref)

    async def advise(self, gate_id: int, *, text: str, advisor: str) -> Gate:
        """An advisor's reply: advice for the agent that asked; the gate stays open."""
        return await self.engine.bus.advise(gate_id, text=text, advisor=advisor)

    async def reassign_gate(self, gate_id: int, *, decider: str) -> Gate:
        """Hand an open gate to another decider (`/decider @login`)."""
        return await self.engine.bus.reassign_gate(gate_id, decider=decider)

    async def gate_posted(self, gate_id: int, *, comment_ref: str, decider: str) -> None:
        """Record where a gate was asked and who may answer it."""
        await self.engine.bus.gate_posted(gate_id, comment_ref=comment_ref, decider=decider)

    def subscribe(self, handler: Callable[[Event], Awaitable[None]]) -> None:
        """Call `handler` with each engine event (never the source of truth)."""
        self.engine.events.subscribe(handler)

    async def run_until_idle(
        self, job_id: int | None = None, *, deadline: Deadline | None = None
    ) -> None:
        """Run every conversation with work (of one job, if given) until none has any (a
        gate, an end, or a stall), or, past `deadline`, none starts any more."""
        await self.engine.scheduler.run_until_idle(job_id, deadline=deadline)

    async def serve(self) -> None:
        """Run every conversation with work, resuming from the store, until cancelled."""
        await self.engine.scheduler.serve()

    async def run(self, job: JobHandle, approve: Approver) -> str | None:
        """Run the job until it ends, asking `approve` at each gate; its final reply."""
        scheduler = self.engine.scheduler
        while True:
            await scheduler.run_until_idle()
            if failed := await self.failures(job.job_id):
                reasons = "; ".join(f"{f.failure_key}: {f.reason}" for f in failed)
                raise JobFailedError(f"job {job.job_id} stopped: {reasons}")
            gates = await self.engine.bus.open_gates(job.job_id)
            if not gates:
                break
            for gate in gates:
                project = self.projects[await self._project(job.job_id)]
                answer = await approve(gate)
                await self.engine.bus.answer_gate(
                    gate.gate_id, text=answer, answered_by=project.humans.decider
                )
        snapshot = await self.engine.bus.snapshot(job.conversation_id)
        return snapshot.conversation.result

    async def publish(self, job: JobHandle, remote: str, *, auth: str | None = None) -> None:
        """Push the job branch to `remote`, at `job.head` when set (`auth`: an HTTP header
        git sends to it alone)."""
        await self.workspace.publish(job.space, remote, auth=auth, commit=job.head)

    async def preserve(
        self, job_id: int, remote: str, *, auth: str | None = None
    ) -> Preserved | None:
        """Push the job's branch and task branches to `refs/teaparty/work/{job_id}/*` on
        `remote`, its source (jobs/preserved.py); None without a workspace here."""
        return await self.preserved.preserve(job_id, remote, auth=auth)

    async def preserve_all(self, remote: str, *, auth: str | None = None) -> tuple[Preserved, ...]:
        """`preserve` every active job from `remote`: before the store is saved."""
        return await self.preserved.preserve_all(remote, auth=auth)

    async def forget_preserved(
        self, job_id: int, remote: str, *, auth: str | None = None
    ) -> tuple[str, ...]:
        """Delete the job's preserved refs on `remote`; the refs deleted."""
        return await self.preserved.forget(job_id, remote, auth=auth)

    async def forget_ended(self, remote: str, *, auth: str | None = None) -> tuple[str, ...]:
        """Delete the preserved refs of every ended job from `remote`: after the store is saved."""
        return await self.preserved.forget_ended(remote, auth=auth)

    async def cost_by_level(self, job_id: int) -> tuple[LevelCost, ...]:
        """What each level of the organisation spent on the job (jobs/levels.py)."""
        leads = {w.lead.name for p in self.projects.values() for w in p.workgroups}
        return by_level(
            await self.budget.by_agent(job_id),
            self.budget.price,
            proxy=self.budget.proxy,
            workgroup_leads=leads,
        )

    async def branch_head(self, job_id: int) -> str | None:
        """The commit the job's branch is at (None before its workspace exists)."""
        space = await self.workspace.job(job_id)
        return None if space is None else await rev(space.repo, f"refs/heads/{space.branch}")

    async def head(self, job: JobHandle) -> str | None:
        """The commit the job branch is at."""
        return await rev(job.space.repo, f"refs/heads/{job.space.branch}")

    async def busy(self, job_id: int) -> bool:
        """Whether a conversation of the job has work it could do now: none while the job
        waits at its budget gate, where each stops at its next model call (the store still
        says it has work, so a caller looping on this would spin until the gate is answered)."""
        if await self.budget.waiting(job_id):
            return False
        return bool(await self.engine.bus.runnable(job_id))

    async def close_workspace(self, job_id: int) -> None:
        """Give back the job's worktrees (its branches stay); nothing when it has none."""
        space = await self.workspace.job(job_id)
        if space is not None:
            await self.workspace.close_job(space)

    async def has_work(self, job: JobHandle) -> bool:
        """Whether the job branch holds commits beyond the one it started from."""
        return await self.workspace.has_commits(job.space)

    async def finish_job(self, job: JobHandle, result: str | None) -> None:
        """Record the job complete and give back its worktrees (its branches stay)."""
        await self.engine.store.write(lambda tx: job_rows.complete(tx, job.job_id, result))
        await self.workspace.close_job(job.space)
        if self.setups is not None:
            self.setups.release(job.job_id)

    async def learning_origin(self, job_id: int) -> JobOrigin | None:
        """The job's key, repository and project lead, as its learnings need them (None: a
        job without a source)."""
        record = await self.records.job(job_id)
        repo = await wiring.repository(self.engine.store, job_id)
        if record is None or repo is None:
            return None
        project = self.projects.get(record.project)
        lead = project.lead.name if project is not None else self.org.project_lead
        return JobOrigin(record.job_key, repo, f"{record.project}/{lead}")

    async def propose_learnings(self, job: JobHandle) -> str | None:
        """Commit what the job learned on its branch (jobs/learned.py); the commit, if any
        (none when git fails: the work is worth more than what it taught)."""
        origin = await self.learning_origin(job.job_id)
        if origin is None:
            return None
        redact = Scanner(self.secrets.values()).redact
        try:
            return await self.learned.propose(job.space, origin, redact=redact)
        except GitError as exc:  # the work is delivered all the same, without its learnings
            log.warning("job %d: its learnings were not committed: %s", job.job_id, exc)
            return None

    async def recall_learnings(self, space: JobSpace, text: str) -> tuple[Learning, ...]:
        """The learnings at the job's base most like `text` (a task's title and spec)."""
        repo = await wiring.repository(self.engine.store, space.job_id)
        if repo is None:
            return ()
        shelf = await self.memory.shelf(space.mirror, space.base)
        return await self.memory.recall(repo, shelf, text)

    async def forget_learning(self, job_id: int, entry_id: str, *, by: str) -> bool:
        """Forget a learning in the job's repository (`/forget`): never given again, and
        removed from its file by the next job's branch. False when it was forgotten."""
        repo = await wiring.repository(self.engine.store, job_id)
        if repo is None:
            raise OrchestratorError(f"job {job_id} has no repository")
        return await self.memory.forget(repo, entry_id, by=by)

    async def check_head(self, job_id: int, space: JobSpace, head: str) -> Checked | None:
        """The project's checks of the job branch's `head`, about to be pushed: run now
        unless this job has them (None: the project names no check command)."""
        if self.checks is None:
            return None
        return await self.checks.check(space, await self._project(job_id), head, None)

    async def _project(self, job_id: int) -> str:
        project = await self.engine.store.read(lambda tx: job_rows.project_of(tx, job_id))
        if project is None:
            raise OrchestratorError(f"no job {job_id}")
        return project

    async def close(self) -> None:
        """Close the engine (the store is flushed) and the sandbox's proxies."""
        await self.sandbox.close()
        await self.engine.close()
