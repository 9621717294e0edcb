"""The early draft (`pull_request: {draft: early}`): the job's change request opens as a
draft once its plan is approved, the job branch is pushed as each task merges, and the
change request is marked ready when the job is done.

The driver calls `advance` on each sync of a job in its first run (no review round has
started) whose forge can open drafts (a `DraftForge`; the terminal's cannot: there, early
is the default delivery):
- Once the plan is approved (with the plan gate off, once a task has started), an empty
  engine commit goes on the job branch where it is still at its base: GitHub opens no pull
  request without a commit, and this one changes no file.
- Each first-parent commit of the job branch not pushed yet (that plan commit, each task's
  merge) is pushed on its own, oldest first, never forced: one push per task merge. The
  last one pushed is recorded after its push (`forge_objects`, key `early-push`); after a
  crash in between the same commit is pushed again, which moves no ref (git sends nothing).
- A commit whose change from the job's base holds a secret or touches a protected path is
  not pushed, nor anything after it: the delivery's gates ask about the job's head as they
  always do, and once its head is cleared (`catch_up`), the rest is pushed one commit at a
  time before the delivery's own push.
- Once something is pushed, the draft opens, once (recorded as the job's change request,
  state `draft`); at delivery the forge brings its text up to date and `jobs/delivery.py`
  marks it ready.
- A job that ends with its draft never made ready (cancelled; done with no file changed
  from its base, which the plan's empty commit alone does not count as work; its change
  refused at a gate) has the draft closed, saying why (`close_unfinished`); its branch stays.
  A failed job's draft stays open: a retry may finish it.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from orchestrator.bus import gates
from orchestrator.core.errors import ForgeWaitError, OrchestratorError
from orchestrator.core.messages import job_conversation_id
from orchestrator.jobs import protection, secret_check
from orchestrator.jobs.handle import JobHandle
from orchestrator.jobs.office import Office
from orchestrator.jobs.ports import DraftForge, Forge, JobStatus, PushTarget
from orchestrator.store.sqlite import Tx
from orchestrator.teams import plan_gate
from orchestrator.teams.board import list_tasks
from orchestrator.workspace.git import GitError, git, rev
from orchestrator.workspace.spaces import JobSpace

log = logging.getLogger(__name__)
PUSHED = "early-push"  # the forge object keeping the last commit pushed early
PLAN_COMMIT = "Plan approved: the work follows, one merge per task"


async def enabled(office: Office, forge: Forge, job_id: int) -> bool:
    """Whether the job's project asks for an early draft and its forge can open one."""
    if not isinstance(forge, DraftForge):
        return False
    record = await office.records.job(job_id)
    project = office.projects.get(record.project) if record is not None else None
    return project is not None and project.pull_request.draft == "early"


async def advance(office: Office, forge: Forge, status: JobStatus, space: JobSpace) -> None:
    """Push what merged since the last sync, one commit at a time, and open the draft once
    the plan is approved (see the module). A failure is logged and retried next sync: the
    delivery says what fails for good."""
    job_id = status.job_id
    if not isinstance(forge, DraftForge) or not await enabled(office, forge, job_id):
        return
    if not await office.engine.store.read(lambda tx: _first_run_started(tx, job_id)):
        return
    if any(r.state != "queued" for r in await office.rounds.of_job(job_id)):
        return  # a review round pushes through its own delivery
    job = JobHandle(job_id, job_conversation_id(job_id), space, created=False)
    try:
        await _plan_commit(office, job)
        before = await office.records.forge_object(job_id, PUSHED)
        head = await catch_up(office, forge, job)
        if head is None:
            return
        if await office.rounds.pull(job_id) is None:
            made = await forge.open_draft(status, job)
            if made.number is not None:
                await office.rounds.pull_opened(job_id, made.number, made.link, state="draft")
        elif before is None or before.external_id != head:
            await forge.draft_pushed(status, head)
    except ForgeWaitError:
        raise
    except OrchestratorError as exc:  # ForgeError, GitError: the next sync tries again
        log.warning("job %d: the early draft waits: %s", job_id, exc)


async def catch_up(
    office: Office, forge: Forge, job: JobHandle, *, cleared: str | None = None
) -> str | None:
    """Push each first-parent commit of the job branch not pushed yet, oldest first, one
    push each, up to the branch's head (`cleared`: up to that head, which the delivery's
    gates cleared, asking nothing more); the last commit pushed (None: none ever was).

    Without `cleared`, it stops before a commit a gate would hold. Raises GitError (a push
    refused: never forced) or ForgeError.
    """
    space = job.space
    known = await office.records.forge_object(job.job_id, PUSHED)
    pushed = None if known is None else known.external_id
    upto = cleared or await rev(space.repo, f"refs/heads/{space.branch}")
    if upto is None or upto == pushed:
        return pushed
    if pushed is not None and not await _ancestor(space, pushed, upto):
        return pushed  # the branch went elsewhere: the delivery's push says so
    _, listed = await git(
        space.repo, "rev-list", "--first-parent", "--reverse", f"{pushed or space.base}..{upto}"
    )
    target: PushTarget | None = None
    for commit in listed.split():
        if cleared is None and not await _may_push(office, job, commit):
            break
        target = target or await forge.push_target(job)
        if target is None:
            break
        await office.publish(replace(job, head=commit), target.remote, auth=target.auth)
        await office.records.record_forge_object(job.job_id, PUSHED, commit, "")
        pushed = commit
    return pushed


async def _may_push(office: Office, job: JobHandle, commit: str) -> bool:
    """Whether the change up to `commit` passes the secret scan and touches no protected
    path: what the delivery's gates would let through without asking."""
    return await secret_check.clean(office, job, commit) and await protection.clear(
        office, job, commit
    )


async def _plan_commit(office: Office, job: JobHandle) -> None:
    """The empty commit a draft opens with, where the branch has nothing yet."""
    space = job.space
    if await office.records.forge_object(job.job_id, PUSHED) is not None:
        return
    if await rev(space.repo, f"refs/heads/{space.branch}") != space.base:
        return  # a task merged already (or a crash came after the commit): that goes first
    try:
        await office.workspace.commit_engine_files(space, {}, head=space.base, message=PLAN_COMMIT)
    except GitError:  # a task merged meanwhile: its merge opens the draft
        return


async def changes_nothing(office: Office, forge: Forge, job: JobHandle) -> bool:
    """Whether the job has an early draft and its branch changes no file from its base (the
    plan's empty commit, and perhaps changes undone since): nothing to deliver."""
    if not await enabled(office, forge, job.job_id):
        return False
    space = job.space
    _, trees = await git(
        space.repo, "rev-parse", f"refs/heads/{space.branch}^{{tree}}", f"{space.base}^{{tree}}"
    )
    ours, base = trees.split()
    return ours == base


async def close_unfinished(office: Office, forge: Forge, status: JobStatus) -> None:
    """Close the early draft of a job that ended without making it ready, saying why."""
    job_id = status.job_id
    if status.state not in ("done", "cancelled") or not isinstance(forge, DraftForge):
        return
    pull = await office.rounds.pull(job_id)
    if pull is None or pull.state != "draft" or not await enabled(office, forge, job_id):
        return
    if status.state == "cancelled":
        why = "the job was cancelled, so this draft will not be finished."
    else:
        said = (status.result or "").strip().splitlines()
        why = "the job ended without a change to deliver"
        why += f": {said[0][:300]}" if said else "."
    await forge.close_draft(status, pull.number, why)
    await office.rounds.pull_state(job_id, "closed")


async def _ancestor(space: JobSpace, older: str, newer: str) -> bool:
    code, _ = await git(space.repo, "merge-base", "--is-ancestor", older, newer, check=False)
    return code == 0


def _first_run_started(tx: Tx, job_id: int) -> bool:
    """Whether the job's plan is approved (with the plan gate off: a task has started)."""
    if plan_gate.approved(tx, job_id):
        return True
    if gates.mode(tx, job_id, plan_gate.KIND) != "never":
        return False
    return any(t.state not in ("pending", "cancelled") for t in list_tasks(tx, job_id))
