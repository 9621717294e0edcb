"""Delivery's scan for secrets: what the job branch adds, before anything is pushed.

The driver asks `check` before every push of a job's branch (a delivery, a review round's),
and before the protected-path check: the branch's head is read once, its change against the
job's base is read from commits (never from a worktree an agent wrote) and scanned
(core/secret_scan.py) for the secret values the engine holds (`Office.secrets`, the
SecretValues port the edge fills) and for credential patterns. Clean, the head that was
scanned is what may be pushed (the protected-path check then looks at that same head); a
finding waits at the `secret` gate (jobs/secret_gate.py), or ends the job.
"""

from __future__ import annotations

from orchestrator.bus.events import GateAsked
from orchestrator.bus.gates import mode as gate_mode
from orchestrator.core.secret_scan import Scan, scan
from orchestrator.jobs import secret_gate
from orchestrator.jobs.handle import JobHandle
from orchestrator.jobs.office import Office
from orchestrator.jobs.protected_gate import Cleared, Held
from orchestrator.jobs.secret_gate import KIND, SecretVerdict
from orchestrator.workspace.changes import added_lines, branch_change
from orchestrator.workspace.git import rev


async def check(office: Office, job: JobHandle) -> SecretVerdict:
    """Push exactly the head scanned, wait at a gate (opened here when new), or stop.

    Raises GitError when git cannot read the branch.
    """
    space = job.space
    head = await rev(space.repo, f"refs/heads/{space.branch}")
    assert head is not None  # the driver checked the job has work on it
    found, clear = await _scanned(office, job, head)
    if clear:
        return Cleared(head)
    store = office.engine.store
    verdict = await store.write(
        lambda tx: secret_gate.decide(tx, job.job_id, base=space.base, head=head, scanned=found)
    )
    if isinstance(verdict, Held) and verdict.opened:
        office.engine.events.publish(
            GateAsked(verdict.gate_id, job.conversation_id, KIND.name, verdict.question)
        )
    return verdict


async def clean(office: Office, job: JobHandle, head: str) -> bool:
    """Whether `head` may be pushed without the secret gate (asks nothing: an early push,
    jobs/early_draft.py, stops short of what the delivery's scan would hold)."""
    return (await _scanned(office, job, head))[1]


async def _scanned(office: Office, job: JobHandle, head: str) -> tuple[Scan, bool]:
    """What the scan of the change up to `head` found, and whether it may be pushed as it is."""
    space = job.space
    change = await branch_change(space.repo, base=space.base, head=head)
    names = [f.path for f in change.files if f.status in ("A", "R", "C")]  # new names
    found = scan(await added_lines(space.repo, change), office.secrets.values(), names=names)
    mode = await office.engine.store.read(lambda tx: gate_mode(tx, job.job_id, KIND))
    return found, found.clean or (mode == "never" and not found.values)
