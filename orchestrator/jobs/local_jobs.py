"""What the edge's local run (bot/local_run.py) asks of the engine beyond the Office's own
methods: which branch a job to resume has, and that this process drives that one job."""

from __future__ import annotations

from pathlib import Path

from orchestrator.core.errors import OrchestratorError
from orchestrator.jobs import sources
from orchestrator.jobs.office import Office
from orchestrator.jobs.views import run_scope


class ResumeError(OrchestratorError):
    """The job asked to resume is not there, not local, or not this repository's."""


def local_job_prefix(repo: Path) -> str:
    """The start of the key of every local job of `repo` (a nonce follows it)."""
    return f"local:{repo}:"


async def resumable_branch(office: Office, repo: Path, job_id: int) -> str:
    """The branch of the job to resume, if it is an unfinished local job of `repo`
    (ResumeError saying why not otherwise): the branch it took, or the one it wanted."""
    record = await office.records.job(job_id)
    if record is None:
        raise ResumeError(f"no job {job_id} in this state directory")
    if not record.job_key.startswith(local_job_prefix(repo)):
        where = record.job_key.split(":", 1)[0]
        owner = "a GitHub issue" if where == "github" else record.job_key.rsplit(":", 1)[0]
        raise ResumeError(f"job {job_id} is not a local job of {repo} (it is {owner}'s)")
    if record.state == "withdrawn":
        raise ResumeError(f"job {job_id} was cancelled; start a new one instead")
    space = await office.workspace.job(job_id)
    if record.state == "complete":
        done = f": its branch was {space.branch}" if space is not None else ""
        raise ResumeError(f"job {job_id} is done{done}; nothing to resume")
    if space is not None:  # the branch it took, which may not be the one it wanted
        return space.branch
    kept = await office.engine.store.read(lambda tx: sources.of_job(tx, job_id))
    if kept is None:
        raise ResumeError(f"job {job_id} has no source to resume from")
    return kept.branch


def claim_run(office: Office, job_id: int) -> None:
    """This process drives job `job_id` alone (what `teaparty jobs` shows as running)."""
    office.engine.store.claim(run_scope(job_id))
