"""Delivery's check of protected paths: what the job branch changes, and whether it may go.

Unless the job's `protected-path` mode is `never`, the driver asks `check` before it
pushes: the job branch's head is read once, its change against the job's base is read
from commits (never from a worktree an agent wrote), and when a changed file is protected
(a rename by its old or new path), unless it is exactly what the engine wrote there (a
learnings file, jobs/learned.py), the push waits for the decider's approval of exactly
that change (jobs/protected_gate.py). What is pushed is the head that was checked, so a
commit that lands in between is never published unseen.
"""

from __future__ import annotations

from orchestrator.bus.events import GateAsked
from orchestrator.bus.gates import mode as gate_mode
from orchestrator.core.protected import Matcher
from orchestrator.jobs import protected_gate
from orchestrator.jobs.handle import JobHandle
from orchestrator.jobs.office import Office
from orchestrator.jobs.protected_gate import KIND, Cleared, Held, Verdict
from orchestrator.workspace.changes import BranchChange, ChangedFile, branch_change, diff_excerpt
from orchestrator.workspace.git import rev


async def check(office: Office, job: JobHandle, *, head: str | None = None) -> Verdict:
    """Push (exactly which head), wait at a gate (opened here when new), or refuse;
    `head`: the commit to check (the one the secret scan passed), else the branch's.

    Raises GitError when git cannot read the branch.
    """
    store = office.engine.store
    mode = await store.read(lambda tx: gate_mode(tx, job.job_id, KIND))
    if mode == "never":
        return Cleared(head)
    space = job.space
    head = head or await rev(space.repo, f"refs/heads/{space.branch}")
    assert head is not None  # the driver checked the job has work on it
    change, protected = await _protected(office, job, head)
    if not protected:
        return Cleared(head)
    paths = list(dict.fromkeys(p for f in protected for p in f.paths))
    diff = await diff_excerpt(space.repo, change, paths, limit=protected_gate.DIFF_SHOWN)
    verdict = await store.write(
        lambda tx: protected_gate.decide(tx, job.job_id, change, protected, diff)
    )
    if isinstance(verdict, Held) and verdict.opened:
        office.engine.events.publish(
            GateAsked(verdict.gate_id, job.conversation_id, KIND.name, verdict.question)
        )
    return verdict


async def clear(office: Office, job: JobHandle, head: str) -> bool:
    """Whether `head` may be pushed without the protected-path gate (asks nothing: an early
    push, jobs/early_draft.py, waits for the gate the delivery asks)."""
    mode = await office.engine.store.read(lambda tx: gate_mode(tx, job.job_id, KIND))
    return mode == "never" or not (await _protected(office, job, head))[1]


async def _protected(
    office: Office, job: JobHandle, head: str
) -> tuple[BranchChange, list[ChangedFile]]:
    """The branch's change up to `head`, and its protected files (what the engine itself
    wrote there aside)."""
    space = job.space
    change = await branch_change(space.repo, base=space.base, head=head)
    matcher = await _matcher(office, job.job_id)
    protected = [
        f
        for f in change.files
        if matcher.protects(*f.paths)
        and not (
            f.old_path is None
            and await office.learned.engine_wrote(job.job_id, space.repo, head, f.path)
        )
    ]
    return change, protected


async def _matcher(office: Office, job_id: int) -> Matcher:
    """The built-in patterns and those of the job's project (as the office serves it)."""
    record = await office.records.job(job_id)
    project = office.projects.get(record.project) if record is not None else None
    return Matcher.of(project.protected_paths if project is not None else ())
