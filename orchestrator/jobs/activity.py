"""Who is at work in a job right now: what a live progress view shows beside the status.

A job's conversations form a tree in the store: the job, the office manager's dispatch to
the project lead, one task conversation per mini-team run, and under it one conversation
per team member. An agent is busy while a turn of its conversation is under way or mail
waits in its inbox; a team is a task's open run and its open members.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from orchestrator.bus import transactions as txn
from orchestrator.core.messages import ConversationKind
from orchestrator.jobs.driver import JobDriver
from orchestrator.jobs.office import Office
from orchestrator.jobs.ports import Forge, JobStatus
from orchestrator.store.sqlite import Tx


@dataclass(frozen=True)
class Member:
    """One agent of the job with an open conversation; `busy` while it has work."""

    agent: str
    busy: bool


@dataclass(frozen=True)
class Team:
    """An open mini-team run of task `task` (None: the job's own agents, lead and office)."""

    task: int | None
    members: tuple[Member, ...]


@dataclass(frozen=True)
class Progress:
    """A job as a live view shows it: its status and who works on it, as of `at`."""

    status: JobStatus
    teams: tuple[Team, ...]
    at: float

    def team(self, task: int | None) -> Team | None:
        """The open team of `task` (None: the job's own agents), if there is one."""
        return next((team for team in self.teams if team.task == task), None)


def open_teams(tx: Tx, job_id: int) -> tuple[Team, ...]:
    """The job's open teams: its own agents first, then each task's open run in order."""
    rows = txn.open_of_job(tx, job_id)
    task_of = {
        row.conversation_id: int(row.conversation_id.split(":")[2])
        for row in rows
        if row.kind == ConversationKind.TASK
    }
    parent_of = {row.conversation_id: row.parent_id for row in rows}

    def task(cid: str | None) -> int | None:  # the task run a conversation is under, if any
        while cid is not None and cid not in task_of:
            cid = parent_of.get(cid)
        return None if cid is None else task_of[cid]

    members: dict[int | None, list[Member]] = {None: []}
    for number in sorted(set(task_of.values())):
        members[number] = []
    for row in rows:
        if row.kind in (ConversationKind.JOB, ConversationKind.TASK):
            continue  # the job and a task run are the frames; their members do the work
        members[task(row.parent_id)].append(Member(str(row.agent), row.busy))
    return tuple(Team(task, tuple(found)) for task, found in members.items() if found)


async def progress(office: Office, job_id: int, *, clock: float | None = None) -> Progress:
    """The job's status and open teams, read from the store now."""
    status = await JobDriver(office, _no_forge).status(job_id)
    teams = await office.engine.store.read(lambda tx: open_teams(tx, job_id))
    return Progress(status, teams, time.time() if clock is None else clock)


async def _no_forge(job_id: int) -> Forge | None:
    return None
