"""A job's workspace made again on a machine that lacks it (a runner's next workflow run).

The store says where the job's repository, worktree and task slots are; on a fresh machine
none of them is there. `rebuild` lays them out again under this machine's state directory,
from what outlives the machine:

- the mirror, fetched from the job's source;
- the job's own repository, made again borrowing the mirror's objects;
- its branches, from the refs `preserve` pushed (workspace/preserve.py): the job branch at
  its preserved commit, else at the branch published on the source (a delivered job back
  for a review round), else where the job started (its recorded base; logged, since any
  work merged but never preserved or published is not there); each preserved task branch;
- the job worktree, and a fresh slot for each task still leased, on its task branch.

- in each such slot, what its worker had changed and the engine had not yet committed when
  the run ended mid-task (at the time limit, or while the worker waits on a question), from
  the slot's preserved snapshot, uncommitted again: the worker's conversation goes on with
  the files it left.

The store's rows are moved to the new layout in one transaction: the job's workspace row
names the new paths, and its old slot rows are dropped (those still leased are leased again).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from dataclasses import replace

from orchestrator.workspace import preserve
from orchestrator.workspace.git import GitError, git, rev
from orchestrator.workspace.layout import Workspace, job_repo
from orchestrator.workspace.preserve import Fetched
from orchestrator.workspace.spaces import JobSpace, record_moved, task_branch

log = logging.getLogger(__name__)


async def rebuild(
    workspace: Workspace,
    recorded: JobSpace,
    *,
    name: str,
    source: str,
    slug: str,
    auth: str | None = None,
) -> JobSpace:
    """Make the job's workspace again from `source` (see the module); the new JobSpace.

    `name` and `slug` are the job's (job_sources), `auth` an HTTP header git sends to
    `source` alone. GitError when the branch's commit cannot be found.
    """
    mirror = await workspace.mirror(name, source, auth=auth)
    if mirror == recorded.mirror and (recorded.repo / "HEAD").is_file():
        return await workspace.reopen(recorded)  # only the mirror was gone: fetched again
    folder = mirror.parent / "jobs" / f"job-{recorded.job_id}--{slug}"
    await asyncio.to_thread(shutil.rmtree, folder, True)  # what a rebuild cut short left
    repo = await job_repo(folder, mirror)
    fetched = await preserve.fetch(repo, source, recorded.job_id, auth=auth)
    space = replace(recorded, repo=repo, mirror=mirror, path=folder / "worktree")
    start = await _start(space, fetched.job, source)
    await git(repo, "update-ref", f"refs/heads/{space.branch}", start)
    for number, commit in sorted(fetched.tasks.items()):
        await git(repo, "update-ref", f"refs/heads/{task_branch(space, number)}", commit)
    leased = await workspace.store.write(
        lambda tx: record_moved(tx, workspace.tasks, recorded, space)
    )
    await workspace.reopen(space)
    for number, merged in leased:
        await _lease_again(workspace, space, number, merged=merged, fetched=fetched)
    return space


async def _lease_again(
    workspace: Workspace, space: JobSpace, number: int, *, merged: bool, fetched: Fetched
) -> None:
    """A fresh slot for a task whose slot was leased: on its branch with its uncommitted work
    back, or, once it is merged, detached at the job branch, where its phase reviewer reads
    the whole job (teams/tools.py)."""
    if number not in fetched.tasks:
        log.warning(
            "job %d task #%d: nothing of its branch was preserved; it starts again from the "
            "job branch",
            space.job_id,
            number,
        )
    slot = await workspace.lease(space, number)
    if merged:
        await slot.checkout.git("checkout", "--quiet", "--detach", space.branch)
        workspace.wrote(slot.path)
    elif (snapshot := fetched.snapshots.get(number)) is not None:
        workspace.wrote(slot.path)
        if await preserve.restore(slot.checkout, snapshot):
            log.info("job %d task #%d: its uncommitted work is back", space.job_id, number)


async def _start(space: JobSpace, preserved: str | None, source: str) -> str:
    """The commit the job branch is made at, said in the log (see the module)."""
    if preserved is not None:
        log.info("job %d: its branch is back at %s, as preserved", space.job_id, preserved[:12])
        return preserved
    published = await rev(space.mirror, f"refs/remotes/origin/{space.branch}")
    if published is not None:
        log.info(
            "job %d: nothing preserved; its branch is back at %s, as published on %s",
            space.job_id,
            published[:12],
            source,
        )
        return published
    base = await rev(space.repo, space.base)
    if base is None:
        raise GitError(
            f"cannot rebuild job {space.job_id}: nothing was preserved on {source} and the "
            f"commit it started from, {space.base}, is not there"
        )
    log.warning(
        "job %d: nothing of its work was preserved on %s; its branch starts again at %s, "
        "where the job started",
        space.job_id,
        source,
        base[:12],
    )
    return base
