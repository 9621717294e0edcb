"""A review round's work on the job's repository: its start (what people pushed, a base the
pull request now conflicts with) and its end (the job rests again, the next round starts).
The rounds' rows are jobs/rounds.py's; the forge pushes and answers (Forge.deliver_round)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from orchestrator.bus import jobs as job_rows
from orchestrator.jobs import rounds, sources
from orchestrator.jobs.review_desk import ReviewDesk
from orchestrator.store.sqlite import Store, Tx
from orchestrator.workspace.git import GitError, merge_tree, rev
from orchestrator.workspace.layout import Workspace
from orchestrator.workspace.spaces import JobSpace


class RoundWork:
    """What the engine does to a job's repository around a review round."""

    def __init__(
        self,
        store: Store,
        workspace: Workspace,
        desk: ReviewDesk,
        workgroups: Mapping[str, Sequence[str]],
    ) -> None:
        self._store = store
        self._workspace = workspace
        self._desk = desk
        self._workgroups = workgroups  # per project, the default first (the board's)

    async def start(self, job_id: int, space: JobSpace, *, auth: str | None) -> None:
        """Before a round's first turn: people's pushes taken in, a conflicting base given a
        task that merges it."""
        await self.catch_up(job_id, auth=auth)
        await self._base_conflict(job_id, space)

    async def catch_up(self, job_id: int, *, auth: str | None = None) -> None:
        """Fetch the job's source and take into the job branch what people pushed to it.

        Raises GitError when their commits conflict with the job's: nothing is pushed over
        them, and the job fails saying so until a retry.
        """
        space = await self._workspace.job(job_id)
        kept = await self._store.read(lambda tx: sources.of_job(tx, job_id))
        if space is None or kept is None:
            return
        await self._workspace.mirror(kept.repo, kept.source, auth=auth)
        merged = await self._workspace.catch_up(
            space, message="Merge the commits people pushed to the pull request's branch"
        )
        if merged is not None and merged.conflicts:
            files = ", ".join(merged.conflicts)
            raise GitError(
                f"commits pushed to {space.branch} conflict with the job's work in {files}; "
                "merge them into the branch (or revert them), then retry the job"
            )

    async def _base_conflict(self, job_id: int, space: JobSpace) -> None:
        """A pull request its base now conflicts with gets a task that merges the base in
        (jobs/rounds.py `base_conflict`); a base that merges cleanly needs nothing (the
        forge merges it)."""
        row = await self._store.read(lambda tx: _start_and_project(tx, job_id))
        base = None if row is None else await rev(space.mirror, row[0])
        head = await rev(space.repo, f"refs/heads/{space.branch}")
        if row is None or base is None or head is None:
            return
        merged = await merge_tree(space.repo, head, base)
        if not merged.conflicts:
            return
        first = next(iter(self._workgroups.get(row[1]) or ()), None)
        files = merged.conflicts
        await self._store.write(
            lambda tx: rounds.base_conflict(tx, job_id, base=base, files=files, workgroup=first)
        )

    async def finish(
        self, job_id: int, space: JobSpace, round_id: int, *, head: str | None, outcome: str
    ) -> None:
        """A review round is pushed and answered: the job rests again (its worktrees given
        back), and the next round (feedback that came meanwhile) starts if it may."""

        def write(tx: Tx) -> None:
            rounds.delivered(tx, round_id, head=head, outcome=outcome)
            # its result stays the job's own: the pull request's summary
            job_rows.set_state(tx, job_id, "complete", was="active")

        await self._store.write(write)
        await self._workspace.close_job(space)
        await self._desk.next_round(job_id)


def _start_and_project(tx: Tx, job_id: int) -> tuple[str, str] | None:
    """What the job branch started from and the job's project (None: a job without a kept
    source)."""
    kept = sources.of_job(tx, job_id)
    project = job_rows.project_of(tx, job_id)
    return None if kept is None or project is None else (kept.start, project)
