"""The edge's way into review rounds (jobs/rounds.py): a job's change request and what
becomes of it, feedback taken, answers posted, rounds delivered. Each call is one write."""

from __future__ import annotations

from collections.abc import Mapping

from orchestrator.bus import jobs as job_rows
from orchestrator.bus.conversations import ConversationBus
from orchestrator.config import Project
from orchestrator.config.schema import Rounds
from orchestrator.jobs import rounds
from orchestrator.jobs.round_records import Feedback, Pull, PullState, ReviewRound, Taken
from orchestrator.store.sqlite import Store, Tx


class ReviewDesk:
    """Review rounds over the engine's store; woken conversations are handed to the bus."""

    def __init__(self, store: Store, bus: ConversationBus, projects: Mapping[str, Project]) -> None:
        self._store = store
        self._bus = bus
        self._projects = projects

    def _settings(self, tx: Tx, job_id: int) -> Rounds:
        name = job_rows.project_of(tx, job_id)
        project = self._projects.get(name) if name is not None else None
        return project.rounds if project else Rounds()

    def settings(self, project: str) -> Rounds:
        """The project's rounds settings (the defaults for a project not served)."""
        found = self._projects.get(project)
        return found.rounds if found else Rounds()

    async def pull_opened(
        self, job_id: int, number: int, url: str, *, state: PullState = "open"
    ) -> None:
        """The job's change request is `number` at `url` (`state`: a draft when it opened
        as one)."""
        await self._store.write(lambda tx: rounds.record_pull(tx, job_id, number, url, state=state))

    async def pull(self, job_id: int) -> Pull | None:
        """The job's change request, if it has one."""
        return await self._store.read(lambda tx: rounds.pull(tx, job_id))

    async def resting_with_open_pull(self) -> list[int]:
        """The jobs that rest with their change request open (CI on it is watched)."""
        return await self._store.read(rounds.resting_with_open_pull)

    async def job_of_pull(self, repo: str, number: int) -> int | None:
        """The job whose change request is `number` of `repo` (its source's name)."""
        return await self._store.read(lambda tx: rounds.job_of_pull(tx, repo, number))

    async def pull_state(self, job_id: int, state: PullState) -> None:
        """The change request is now `state`; a round waiting on it may start."""

        def write(tx: Tx) -> tuple[str, ...]:
            limit = self._settings(tx, job_id).max_rounds
            return rounds.set_pull_state(tx, job_id, state, max_rounds=limit)

        self._bus.on_wake(await self._store.write(write))

    async def feedback(self, job_id: int, feedback: Feedback) -> Taken:
        """Take a review's points into the job's next round; it starts if it may."""

        def write(tx: Tx) -> Taken:
            limit = self._settings(tx, job_id).max_rounds
            return rounds.take(tx, job_id, feedback, max_rounds=limit)

        taken = await self._store.write(write)
        self._bus.on_wake(taken.woken)
        return taken

    async def next_round(self, job_id: int) -> None:
        """Start the job's waiting round, if it may start now (after one was delivered)."""

        def write(tx: Tx) -> tuple[str, ...]:
            limit = self._settings(tx, job_id).max_rounds
            return rounds.maybe_start(tx, job_id, max_rounds=limit)

        self._bus.on_wake(await self._store.write(write))

    async def watchdog(self, job_id: int, *, at: float) -> str | None:
        """Stop the job's running round if it stalled (jobs/rounds.py `watchdog`): why."""

        def write(tx: Tx) -> str | None:
            stall_s = self._settings(tx, job_id).stall_minutes * 60
            return rounds.watchdog(tx, job_id, at=at, stall_s=stall_s)

        return await self._store.write(write)

    async def handled(self, job_id: int) -> dict[str, int]:
        """Per review thread, the newest comment a round took."""
        return await self._store.read(lambda tx: rounds.handled(tx, job_id))

    async def running(self, job_id: int) -> ReviewRound | None:
        """The job's running round, if any."""
        return await self._store.read(lambda tx: rounds.running(tx, job_id))

    async def of_job(self, job_id: int) -> list[ReviewRound]:
        """The job's rounds, oldest first."""
        return await self._store.read(lambda tx: rounds.rounds_of(tx, job_id))

    async def replied(self, round_id: int, number: int, ref: str) -> None:
        """A point's answer was posted as `ref`."""
        await self._store.write(lambda tx: rounds.replied(tx, round_id, number, ref))

    async def delivered(self, round_id: int, *, head: str | None, outcome: str) -> None:
        """The round is pushed and answered."""
        await self._store.write(
            lambda tx: rounds.delivered(tx, round_id, head=head, outcome=outcome)
        )
