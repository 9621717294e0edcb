"""Jobs' unpublished work carried between machines on their remote (runner mode).

A runner's workflow run starts on a fresh machine with the store and nothing else. Before it
saves the store, the run preserves every active job's branches on the job's remote
(`preserve_all`, workspace/preserve.py), with a snapshot of what each working slot holds
uncommitted; the next run's `Office.prepare` finds a recorded
workspace missing and makes it again from them (`rebuild`, workspace/rebuild.py). Once a
job has ended its refs are deleted (`forget`, or `forget_ended` for every ended job at
once; `forget_ended_work` with no engine open), only after the run's store is saved: a run
whose store lost the race for the state ref may be one whose jobs are older than the refs.
A refused preserve (PreservedRaceError) is such a lost race too: the run must save nothing,
and its retry must start from no job repositories (`{home}/repos` removed), so that each
job is rebuilt from the winner's refs, not from this run's diverged branches.

The remote is the job's source, as recorded when it started (`job_sources.source`), so the
loops only touch the jobs of the repository they are given.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from orchestrator.bus import jobs as job_rows
from orchestrator.core.errors import OrchestratorError
from orchestrator.jobs import sources
from orchestrator.store.sqlite import Store, Tx
from orchestrator.teams import board
from orchestrator.workspace import preserve as refs
from orchestrator.workspace import spaces as slots
from orchestrator.workspace.git import Checkout
from orchestrator.workspace.layout import Workspace
from orchestrator.workspace.preserve import Preserved
from orchestrator.workspace.rebuild import rebuild
from orchestrator.workspace.spaces import JobSpace

log = logging.getLogger(__name__)
ENDED = ("complete", "withdrawn")


@dataclass(frozen=True)
class _Source:
    name: str  # the mirror's (job_sources.repo)
    source: str
    slug: str


class PreservedWork:
    """Preserving, forgetting and rebuilding jobs' work over one store and workspace."""

    def __init__(self, store: Store, workspace: Workspace) -> None:
        self._store = store
        self._workspace = workspace

    async def preserve(
        self, job_id: int, remote: str, *, auth: str | None = None
    ) -> Preserved | None:
        """Push the job's branch and task branches to its refs on `remote`; None when the
        job has no workspace on this machine (what the remote has stays as it is).
        PreservedRaceError when another run preserved newer work."""
        space = await self._workspace.job(job_id)
        if space is None or not self._workspace.present(space):
            return None
        rows = await self._store.read(lambda tx: _working(tx, job_id, str(space.repo)))
        slots = [(number, Checkout(space.repo, Path(path))) for number, path in rows]
        present = [(number, slot) for number, slot in slots if slot.exists()]
        return await refs.preserve(space, remote, auth=auth, slots=present)

    async def preserve_all(self, remote: str, *, auth: str | None = None) -> tuple[Preserved, ...]:
        """`preserve` every active job that comes from `remote` and has a workspace here."""
        jobs = await self._store.read(lambda tx: _jobs_of(tx, remote, ("active",)))
        kept = [await self.preserve(job_id, remote, auth=auth) for job_id in jobs]
        return tuple(found for found in kept if found is not None)

    async def forget(self, job_id: int, remote: str, *, auth: str | None = None) -> tuple[str, ...]:
        """Delete the job's preserved refs on `remote` (each only while it names the commit
        just listed); the refs deleted."""
        listed = await refs.listed(remote, auth=auth, job_id=job_id)
        found = listed.get(job_id, {})
        if not found:
            return ()
        return await refs.delete(await self._git_dir(job_id), remote, found, auth=auth)

    async def forget_ended(self, remote: str, *, auth: str | None = None) -> tuple[str, ...]:
        """Delete the preserved refs on `remote` of every job from it that has ended, in one
        push; the refs deleted. Refs of jobs this store does not know stay (another run's
        newer store may have them). Call it after this run's store is saved."""
        listed = await refs.listed(remote, auth=auth)
        ended = await self._store.read(lambda tx: _jobs_of(tx, remote, ENDED))
        doomed = {ref: commit for job_id in ended for ref, commit in listed.get(job_id, {}).items()}
        if not doomed:
            return ()
        return await refs.delete(await self._git_dir(ended[0]), remote, doomed, auth=auth)

    async def rebuild(self, job_id: int, recorded: JobSpace, *, auth: str | None) -> JobSpace:
        """Make the job's recorded workspace again from its source (workspace/rebuild.py)."""
        source = await self._source(job_id)
        log.info("job %d: its workspace is not on this machine; rebuilding it", job_id)
        return await rebuild(
            self._workspace,
            recorded,
            name=source.name,
            source=source.source,
            slug=source.slug,
            auth=auth,
        )

    async def _git_dir(self, job_id: int) -> Path:
        """A repository to push deletions from: the mirror of the job's source (made empty
        when missing; a deletion sends no objects)."""
        return await self._workspace.bare_mirror((await self._source(job_id)).name)

    async def _source(self, job_id: int) -> _Source:
        kept = await self._store.read(lambda tx: sources.of_job(tx, job_id))
        if kept is None:
            raise OrchestratorError(f"job {job_id} has no source recorded")
        return _Source(kept.repo, kept.source, kept.slug)


async def forget_ended_work(home: Path, remote: str, *, auth: str | None = None) -> tuple[str, ...]:
    """`PreservedWork.forget_ended` on the store under state directory `home`, with no engine
    open: for a runner once its store is saved and its engine closed; the refs deleted."""
    store = await Store.open(home / "teaparty.db")
    try:
        return await PreservedWork(store, Workspace(home, store, tasks=board)).forget_ended(
            remote, auth=auth
        )
    finally:
        await store.close()


def _working(tx: Tx, job_id: int, repo: str) -> list[tuple[int, str]]:
    """The slots leased to the job's tasks not yet merged: (task number, path)."""
    working = []
    for task_id, path in slots.leases(tx, repo).items():
        found = board.locate(tx, task_id)
        if found is not None and found[0] == job_id:
            if board.get_task(tx, job_id, found[1]).state != "done":
                working.append((found[1], path))
    return sorted(working)


def _jobs_of(tx: Tx, remote: str, states: tuple[str, ...]) -> list[int]:
    """The jobs from `remote` in one of `states`, by id."""
    rows = (job_rows.get(tx, job_id) for job_id in sources.jobs_from(tx, remote))
    return [row.job_id for row in rows if row is not None and row.state in states]
