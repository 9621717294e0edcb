"""What becomes of a job when its change request ends, and of a repository the App leaves.

Merged, the change request's state is recorded (a round waiting on it is stopped); a review
round that runs is stopped as a withdrawal stops work (`withdraw.stop_work`) and the job ends
complete; its worktrees and its task branches are removed. The job branch stays in the job's
repository: it is what was merged. Its branch deleted (`gone`) ends the job the same way.
Closed unmerged, only the state is recorded: the job rests with everything kept, and a round
may run again once the change request is open again.

A repository the App no longer serves (uninstalled, or taken out of the installation) keeps
nothing here: once no active job comes from it, its directory under the state directory
(mirror, job repositories, worktrees) is deleted.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from orchestrator.bus import jobs as job_rows
from orchestrator.jobs import sources
from orchestrator.jobs.office import Office
from orchestrator.jobs.round_records import PullState
from orchestrator.jobs.withdraw import Withdrawn, stop_work
from orchestrator.store.sqlite import Tx
from orchestrator.workspace import spaces as slots
from orchestrator.workspace.git import git
from orchestrator.workspace.spaces import JobSpace

Ended = Literal["merged", "closed", "gone"]
_SAID = {"merged": "merged", "closed": "closed", "gone": "closed by deleting its branch"}


@dataclass(frozen=True)
class PullEnded:
    """What the end of a job's change request changed."""

    job_id: int
    state: PullState
    stopped: Withdrawn | None = None  # the review round's work stopped, if one ran
    branches: tuple[str, ...] = ()  # the task branches removed

    def describe(self) -> str:
        """One line on what changed."""
        said = f"job {self.job_id}: pull request {_SAID.get(self.state, self.state)}"
        if self.stopped is not None:
            said += "; the review round that ran was stopped"
        if self.branches:
            said += f"; {len(self.branches)} task branch(es) removed"
        return said


async def pull_ended(office: Office, job_id: int, state: Ended) -> PullEnded:
    """The job's change request is `state` now (see the module)."""
    await office.rounds.pull_state(job_id, state)
    if state == "closed":
        return PullEnded(job_id, state)
    why = f"the pull request was {_SAID[state]} while the round ran"
    stopped = await stop_work(office, job_id, why=why)
    space = await office.workspace.job(job_id)
    branches: tuple[str, ...] = ()
    if space is not None:
        await office.workspace.close_job(space)
        branches = await remove_task_branches(space)
    return PullEnded(job_id, state, stopped, branches)


async def remove_task_branches(space: JobSpace) -> tuple[str, ...]:
    """Delete the job's task branches (`{job branch}--task-N`, layout.task_branch) from its
    own repository; the names deleted. The job branch stays."""
    _, refs = await git(
        space.repo, "for-each-ref", "--format=%(refname)", f"refs/heads/{space.branch}--task-*"
    )
    names = tuple(refs.split())
    for ref in names:
        await git(space.repo, "update-ref", "-d", ref)
    return tuple(name.removeprefix("refs/heads/") for name in names)


async def forget_repository(office: Office, name: str) -> Path | None:
    """Delete the directory of repository `name` (a job source's, `github/owner/repo`) under
    the state directory once no active job comes from it; the path deleted, or None (in use,
    or not there)."""
    root = (office.workspace.home / "repos").resolve()
    folder = office.workspace.repo_dir(name)
    if not folder.is_dir() or folder.is_symlink() or not _inside(folder, root):
        return None
    mirror = str(folder / "mirror.git")
    if await office.engine.store.write(lambda tx: _forget(tx, name, mirror)):
        return None
    await asyncio.to_thread(shutil.rmtree, folder, True)
    return folder


def _forget(tx: Tx, name: str, mirror: str) -> bool:
    """Whether an active job still comes from `name`; else its jobs' workspaces recorded gone."""
    rows = (job_rows.get(tx, job_id) for job_id in sources.jobs_of_repo(tx, name))
    if any(row is not None and row.state == "active" for row in rows):
        return True
    slots.forget_mirror(tx, mirror)
    return False


def _inside(path: Path, root: Path) -> bool:
    """Whether `path` is below `root` once every link is followed (nothing outside is removed)."""
    real = Path(os.path.realpath(path))
    return real != root and real.is_relative_to(root)
