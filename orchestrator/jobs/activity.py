"""Who is at work in a job right now: what a live progress view shows beside the status.

A job's conversations form a tree in the store: the job, the office manager's dispatch to
the project lead, one task conversation per mini-team run, and under it one conversation
per team member. An agent is busy while a turn of its conversation is under way or mail
waits in its inbox; a team is a task's open run and its open members.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

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


_OPEN = """
SELECT c.conversation_id, c.kind, c.agent, c.parent_id,
       c.in_turn OR EXISTS (SELECT 1 FROM inbox i WHERE i.conversation_id = c.conversation_id)
FROM conversations c
WHERE c.job_id = ? AND c.state = 'active'
ORDER BY c.created_at, c.conversation_id
"""


def open_teams(tx: Tx, job_id: int) -> tuple[Team, ...]:
    """The job's open teams: its own agents first, then each task's open run in order."""
    rows = tx.execute(_OPEN, (job_id,)).fetchall()
    task_of = {
        cid: int(cid.split(":")[2]) for cid, kind, *_ in rows if kind == ConversationKind.TASK
    }
    parent_of = {cid: parent for cid, _, _, parent, _ in rows}

    def task(cid: str | None) -> int | None:  # the task run a conversation is under, if any
        while cid is not None and cid not in task_of:
            cid = parent_of.get(cid)
        return None if cid is None else task_of[cid]

    members: dict[int | None, list[Member]] = {None: []}
    for number in sorted(set(task_of.values())):
        members[number] = []
    for _, kind, agent, parent, busy in rows:
        if kind in (ConversationKind.JOB, ConversationKind.TASK):
            continue  # the job and a task run are the frames; their members do the work
        members[task(parent)].append(Member(str(agent), bool(busy)))
    return tuple(Team(task, tuple(found)) for task, found in members.items() if found)


async def progress(office: Office, job_id: int, *, clock: float | None = None) -> Progress:
    """The job's status and open teams, read from the store now."""
    status = await JobDriver(office, _no_forge).status(job_id)
    teams = await office.engine.store.read(lambda tx: open_teams(tx, job_id))
    return Progress(status, teams, time.time() if clock is None else clock)


async def _no_forge(job_id: int) -> Forge | None:
    return None
