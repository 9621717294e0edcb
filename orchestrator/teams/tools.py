"""The engine's side of a mini-team: its worktree, review rounds, the merge, the ending.

The coordinator (team.py) calls these as tools, so each step's result is a committed
row before the next step is decided, and a restarted engine repeats at most the step it
was in. Every step is idempotent for that reason: leasing returns the task's own slot,
merging what is merged is a no-op, board updates set what is already set.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from orchestrator.bus import jobs as job_rows
from orchestrator.bus.gates import JobContent
from orchestrator.bus.transactions import first_request, listed
from orchestrator.config import Project, Workgroup
from orchestrator.core.errors import StoreError, ToolError
from orchestrator.core.messages import ToolCall, ToolResult
from orchestrator.memory.entries import Learning
from orchestrator.setup.checks import Checked
from orchestrator.store.sqlite import Store, Tx
from orchestrator.teams import conflict_gate
from orchestrator.teams.board import (
    RESULT_MAX,
    TaskBoard,
    count_events,
    create_task,
    get_task,
    locate,
    log_event,
    mark_merged,
    since_started,
)
from orchestrator.teams.instructions import TeamInstructions
from orchestrator.teams.protocol import (
    CHECK,
    DIFF_MAX,
    FINISH,
    MERGE,
    PHASE,
    PREPARE,
    REVIEW,
    Finished,
    Merged,
    PhaseTasks,
    Prepared,
    Reviewed,
    encode,
)
from orchestrator.workspace.git import IDENTITY, GitError, git, merge_tree, rev
from orchestrator.workspace.layout import Workspace
from orchestrator.workspace.spaces import JobSpace, TaskSpace, task_branch

TEAM_TOOLS = frozenset({PREPARE, REVIEW, CHECK, MERGE, PHASE, FINISH})
REQUEST_MAX = 4_000
PHASE_EVENT = "phase review"
CHECKS_TITLE = "Make the project's checks pass on the job branch"
Checks = Callable[[JobSpace, str, str, "int | None"], Awaitable["Checked | None"]]
"""The project's checks on a commit: (job, project, commit, task number or None for the job
branch) → the result (jobs/checks.py), None when the project names no check command."""
Recall = Callable[[JobSpace, str], Awaitable[tuple[Learning, ...]]]
"""The past learnings at a job's base most like a task's text (Office.recall_learnings)."""
log = logging.getLogger(__name__)
_POINT = re.compile(r"^\s*(\d+)[.)]\s+(.*)")


@dataclass(frozen=True)
class TeamRef:
    """Which task a mini-team conversation works on."""

    job_id: int
    number: int
    project: str
    workgroup: str


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class TeamTools:
    """A ToolRunner for the coordinator's team_* tools; `content` is what a job's gates pin
    of it (the bus's extensions say)."""

    def __init__(
        self,
        store: Store,
        workspace: Workspace,
        projects: Mapping[str, Project],
        checks: Checks | None = None,
        *,
        content: JobContent,
    ) -> None:
        self.store = store
        self.content = content
        self.board = TaskBoard(store)
        self.workspace = workspace
        self.projects = projects
        self.checks = checks
        self.instructions = TeamInstructions(projects, self.board)  # the repository's own
        self.recall: Recall | None = None  # past learnings for a task's brief (memory/)
        self._restating: dict[int, asyncio.Lock] = {}

    async def run(self, agent: str, conversation_id: str, call: ToolCall) -> ToolResult:
        """Run one step; a failure comes back as an error result the coordinator acts on."""
        try:
            ref = await self._ref(conversation_id)
            job = await self.workspace.job(ref.job_id)
            if job is None:
                raise ToolError(f"job {ref.job_id} has no workspace")
            output = await self._step(call.name, ref, job, call.args)
        except ToolError as exc:
            return ToolResult(call.call_id, f"{call.name}: {exc}", is_error=True)
        return ToolResult(call.call_id, encode(output))

    async def _ref(self, conversation_id: str) -> TeamRef:
        ref = await self.store.read(lambda tx: _team_ref(tx, conversation_id))
        if ref is None:
            raise ToolError(f"{conversation_id!r} is not a mini-team of a task")
        return ref

    def _workgroup(self, ref: TeamRef) -> Workgroup:
        project = self.projects.get(ref.project)
        found = [w for w in project.workgroups if w.name == ref.workgroup] if project else []
        if not found:
            raise ToolError(f"project {ref.project!r} has no workgroup {ref.workgroup!r}")
        return found[0]

    async def _step(
        self, name: str, ref: TeamRef, job: JobSpace, args: Mapping[str, Any]
    ) -> Prepared | Reviewed | Checked | Merged | PhaseTasks | Finished:
        if name == PREPARE:
            return await self._prepare(ref, job)
        if name == REVIEW:
            return await self._review(ref, job, str(args.get("result", "")))
        if name == CHECK:
            return await self._check(ref, job, job_branch=args.get("scope") == "job")
        if name == MERGE:
            return await self._merge(ref, job, str(args.get("result", "")))
        if name == PHASE:
            verdict = "" if args.get("approved") else str(args.get("verdict", ""))
            return await self._phase(ref, verdict, checks=bool(args.get("checks")))
        if name == FINISH:
            return await self._finish(ref, job, args)
        raise ToolError(f"unknown step; the steps are {sorted(TEAM_TOOLS)}")

    async def _prepare(self, ref: TeamRef, job: JobSpace) -> Prepared:
        task = await self.board.get(ref.job_id, ref.number)
        workgroup = self._workgroup(ref)
        space = await self.workspace.lease(job, ref.number)
        conflicts: list[str] = []
        base = await self.board.merge_base(ref.job_id, ref.number)
        if task.resolves is not None or base is not None:
            source = base if base is not None else task_branch(job, task.resolves or 0)
            conflicts = await _merge_in(space, source)
            await self.workspace.hand_over(space.path)
        if task.state != "in_progress":
            await self.board.update(ref.job_id, ref.number, state="in_progress")
        await self._log(ref, "started", space.path.name)
        return Prepared(
            task=task.number,
            title=task.title,
            spec=task.spec,
            review=task.review,
            rounds=workgroup.review_rounds,
            worker=workgroup.worker_name(),
            reviewers=tuple(workgroup.reviewers(task.review)),
            fallback_reviewers=tuple(workgroup.reviewers("full")),
            phase_reviewer=workgroup.phase_reviewer,
            branch=space.branch,
            job_branch=job.branch,
            resolves=task.resolves,
            conflicts=tuple(conflicts),
            merges_base=base,
            checks=self._check_commands(ref),
            instructions=await self.instructions.for_task(
                job, ref.project, f"{task.title}\n{task.spec}"
            ),
            learned=await self._recalled(job, f"{task.title}\n{task.spec}"),
        )

    async def _recalled(self, job: JobSpace, text: str) -> tuple[str, ...]:
        """The past learnings most like the task, as its briefs show them (none when they
        cannot be read: a brief without them is still a brief)."""
        if self.recall is None:
            return ()
        try:
            found = await self.recall(job, text)
        except (GitError, StoreError) as exc:
            log.warning("job %d: no past learnings: %s", job.job_id, exc)
            return ()
        return tuple(learning.brief_line() for learning in found)

    def _check_commands(self, ref: TeamRef) -> tuple[str, ...]:
        project = self.projects.get(ref.project)
        setup = None if project is None or self.checks is None else project.setup
        return () if setup is None else tuple(command for _, command in setup.checks())

    async def _check(self, ref: TeamRef, job: JobSpace, *, job_branch: bool) -> Checked:
        """The project's checks on the task branch's head (the commit review reads and the
        merge takes), or after the last merge on the job branch's."""
        branch = job.branch if job_branch else task_branch(job, ref.number)
        commit = await rev(job.repo, f"refs/heads/{branch}")
        if commit is None:
            raise ToolError(f"the branch {branch} is gone")
        found = (
            None
            if self.checks is None
            else await self.checks(job, ref.project, commit, (None if job_branch else ref.number))
        )
        if found is None:
            raise ToolError("the project names no check command (setup.test or setup.lint)")
        await self._log(ref, "checked", f"{commit[:12]} {found.status}")
        return found

    async def _commit(self, ref: TeamRef, job: JobSpace, result: str) -> list[str]:
        """The engine commits what the worker left in the slot: agents cannot write git data.

        Returns the nested repositories it had to strip (their `.git`), for the record.
        """
        space = await self.workspace.task(job, ref.number)
        if space is None:
            return []
        task = await self.board.get(ref.job_id, ref.number)
        worker = self._workgroup(ref).worker_name()
        message = f"Task #{ref.number}: {task.title}\n\n{_commit_text(result)}"
        author = (f"{worker} (teaparty)", IDENTITY[1])
        committed = await self.workspace.commit_task(space, message, author=author)
        return list(committed.stripped)

    async def _review(self, ref: TeamRef, job: JobSpace, result: str) -> Reviewed:
        stripped = await self._commit(ref, job, result)
        branch = task_branch(job, ref.number)
        head = await rev(job.repo, f"refs/heads/{branch}")
        _, base = await git(job.repo, "merge-base", job.branch, branch)
        _, count = await git(job.repo, "rev-list", "--count", f"{base.strip()}..{head}")
        await self.board.update(ref.job_id, ref.number, state="in_review")
        await self._log(ref, "review", f"{base.strip()[:12]}..{(head or '')[:12]}")
        # The worker's change, for the reviewers' brief: no diff driver or textconv runs.
        shown = ""
        if head is not None:
            span = f"{base.strip()}..{head}"
            plain = ("--no-color", "--no-ext-diff", "--no-textconv")
            _, diff = await git(job.repo, "diff", *plain, span)
            shown = diff if len(diff) <= DIFF_MAX else ""
        return Reviewed(base.strip(), head, int(count.strip() or 0), tuple(stripped), shown)

    async def _merge(self, ref: TeamRef, job: JobSpace, result: str) -> Merged:
        await self._commit(ref, job, result)
        task = await self.board.get(ref.job_id, ref.number)
        merged = await self.workspace.merge_task(job, ref.number, task.title)
        if merged.commit is None:
            hunks = await self.workspace.conflict_hunks(job, merged)
            return Merged(
                conflicts=tuple(merged.conflicts),
                hunks=hunks,
                job_head=merged.target,
                task_head=merged.source,
            )
        summary = _clip(" ".join(result.split()) or "done", RESULT_MAX)
        last = await self.store.write(
            lambda tx: mark_merged(tx, ref.job_id, ref.number, summary, merged.commit)
        )
        await self._restate_conflicts(job)
        if not last:
            return Merged(merged=merged.commit)
        space = await self.workspace.task(job, ref.number)
        if space is not None:  # the phase reviewer reads the whole job in this slot
            await space.checkout.git("checkout", "--quiet", "--detach", job.branch)
            self.workspace.wrote(space.path)
        return Merged(
            merged=merged.commit,
            last=True,
            base=job.base,
            request=await self._request(ref),
            board=await self.board.summary(ref.job_id),
            phase_reviews=await self._count(ref, PHASE_EVENT),
            solo=await self._solo(ref),
        )

    async def _solo(self, ref: TeamRef) -> bool:
        """Whether the job is this one reviewed task: its reviewers read the job's whole
        change, so a phase review would read the same diff again (seed 000, "the hierarchy
        flattens"). A job that grew (more tasks, a review round's) is reviewed as a whole."""
        tasks = await self.board.list(ref.job_id)
        return len(tasks) == 1 and tasks[0].number == ref.number and tasks[0].review != "none"

    async def _restate_conflicts(self, job: JobSpace) -> None:
        """The job branch moved: each open merge-conflict gate of the job is restated with
        its conflict as it now stands (one job at a time, so the newest head is kept)."""
        async with self._restating.setdefault(job.job_id, asyncio.Lock()):
            head = await rev(job.repo, f"refs/heads/{job.branch}")
            found = await self.store.read(lambda tx: conflict_gate.open_conflicts(tx, job.job_id))
            for gate in found:
                task_head = str(gate.payload.get("task_head", ""))
                if head is None or not task_head or gate.payload.get("job_head") == head:
                    continue
                try:
                    now = await merge_tree(job.repo, head, task_head)
                except GitError as exc:  # the gate keeps what it showed; this merge stands
                    log.warning("gate %d: the conflict was not restated: %s", gate.gate_id, exc)
                    continue
                hunks = await self.workspace.conflict_hunks(job, now)
                restate = partial(
                    conflict_gate.restate,
                    gate_id=gate.gate_id,
                    job_head=head,
                    files=now.conflicts,
                    hunks=hunks,
                    content=self.content,
                )
                await self.store.write(restate)

    async def _phase(self, ref: TeamRef, verdict: str, *, checks: bool = False) -> PhaseTasks:
        """The tasks a phase review's points become; with `checks`, the one task that makes
        the failing checks of the job branch pass (`verdict` their report)."""
        reviewer = f"{ref.project}/{ref.workgroup}/{self._workgroup(ref).phase_reviewer}"
        if checks:
            reviewer = "the engine's checks"
        created = await self.store.write(
            lambda tx: _phase_tasks(tx, ref, reviewer, verdict, checks=checks)
        )
        return PhaseTasks(tuple(created))

    async def _finish(self, ref: TeamRef, job: JobSpace, args: Mapping[str, Any]) -> Finished:
        outcome = str(args.get("outcome", "merged"))
        reason = str(args.get("reason", ""))
        if outcome != "merged":
            task = await self.board.get(ref.job_id, ref.number)
            if task.state != "blocked":
                why = _clip(f"{outcome}: {' '.join(reason.split())}", RESULT_MAX)
                await self.board.update(ref.job_id, ref.number, state="blocked", blocked_reason=why)
        await self.workspace.release(job, ref.number)
        await self._log(ref, "ended", outcome)
        return Finished(outcome)

    async def _log(self, ref: TeamRef, event: str, detail: str) -> None:
        await self.store.write(lambda tx: log_event(tx, ref.job_id, ref.number, event, detail))

    async def _count(self, ref: TeamRef, event: str) -> int:
        return await self.store.read(lambda tx: count_events(tx, ref.job_id, event))

    async def _request(self, ref: TeamRef) -> str:
        content = await self.store.read(lambda tx: first_request(tx, ref.job_id))
        text = str(json.loads(content).get("text", "")) if content is not None else ""
        return _clip(text, REQUEST_MAX)


def _phase_tasks(
    tx: Tx, ref: TeamRef, reviewer: str, verdict: str, *, checks: bool = False
) -> list[int]:
    """Create a task per point of the phase review (with `checks`, one task to make the
    checks pass), once per mini-team run (a retry finds them)."""
    recorded = since_started(tx, ref.job_id, ref.number, PHASE_EVENT)
    if recorded is not None:
        return [int(n) for n in recorded.split(",") if n]
    if checks and verdict:
        spec = (
            "Every task is merged, but the project's checks fail on the job branch. Make "
            f"them pass without weakening them.\n\n{verdict}"
        )
        task = create_task(
            tx,
            ref.job_id,
            title=CHECKS_TITLE,
            spec=spec,
            created_by=reviewer,
            workgroup=ref.workgroup,
        )
        log_event(tx, ref.job_id, ref.number, PHASE_EVENT, str(task.number))
        return [task.number]
    created = (
        []
        if not verdict
        else [
            create_task(
                tx,
                ref.job_id,
                title=_clip(point.splitlines()[0], 70),
                spec=f"The phase review of the whole job asked for this change:\n\n{point}",
                created_by=reviewer,
                workgroup=ref.workgroup,
            ).number
            for point in _points(verdict)
        ]
    )
    log_event(tx, ref.job_id, ref.number, PHASE_EVENT, ",".join(map(str, created)))
    return created


def _team_ref(tx: Tx, conversation_id: str) -> TeamRef | None:
    """The task whose mini-team the conversation is part of (None: it is of no task)."""
    found = listed(tx, conversation_id)
    place = None if found is None or found.task_id is None else locate(tx, found.task_id)
    if place is None:
        return None
    job_id, number = place
    project = job_rows.project_of(tx, job_id)
    workgroup = get_task(tx, job_id, number).workgroup
    return TeamRef(job_id, number, project or "", workgroup or "")


async def _merge_in(space: TaskSpace, branch: str) -> list[str]:
    """Start merging `branch` into the slot, leaving conflict markers; the conflicting files."""
    checkout = space.checkout
    code, _ = await checkout.git("merge-base", "--is-ancestor", branch, "HEAD", check=False)
    if code != 0 and not (checkout.admin / "MERGE_HEAD").exists():
        name, email = IDENTITY
        await checkout.git(
            *("-c", f"user.name={name}", "-c", f"user.email={email}"),
            *("merge", "--no-ff", "--no-commit", branch),
            check=False,
        )
    _, out = await checkout.git("diff", "--name-only", "--diff-filter=U")
    return out.split()


# Forges close an issue named after these words when the commit reaches the default branch;
# in a message an agent wrote they must not (the pull request closes the job's own issue).
_CLOSING = re.compile(
    r"\b(close[sd]?|fix(?:e[sd])?|resolve[sd]?)(\s*:?\s+)(?=[\w./-]*#\d|gh-\d|https?://)",
    re.IGNORECASE,
)


def _commit_text(reply: str) -> str:
    """The worker's reply as a commit message body: printable, bounded, closing nothing."""
    kept = "".join(c for c in reply if c.isprintable() or c in "\n\t")
    kept = _CLOSING.sub(r"\1 (reference only)\2", kept)
    return _clip(kept.strip(), 2_000) or "(the worker gave no summary)"


def _points(verdict: str) -> list[str]:
    """The numbered points of a `request changes` verdict (the whole text if it has none)."""
    body = verdict.split("\n", 1)[1] if "\n" in verdict else ""
    points: list[list[str]] = []
    for line in body.splitlines():
        match = _POINT.match(line)
        if match:
            points.append([match.group(2)])
        elif points and line.strip():
            points[-1].append(line.strip())
    found = ["\n".join(p) for p in points]
    return found or ([body.strip()] if body.strip() else ["Address the phase review: " + verdict])
