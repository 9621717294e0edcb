"""What the sandbox refused a job's agents, kept as facts: the `network_refusals` table's owner.

Each row is one destination refused to one command of one agent (a task's, or the job's
own), with how often and since when, so the tracking comment and `teaparty jobs show` can
say what the job wanted and could not reach. The host is as the egress proxy normalised it;
the command is the agent's, clipped, and is made safe where it is shown, not here. A job
keeps at most MAX_ROWS of them: an agent looping over names fills no store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from orchestrator.sandbox.netproxy import Refusal
from orchestrator.store.sqlite import Tx, now

COMMAND_CHARS = 300  # of a command, kept
MAX_ROWS = 200  # per job
WHY = {
    "host": "not allowed",
    "port": "port not allowed",
    "address": "resolves to a non-public address",
}


@dataclass(frozen=True)
class Refused:
    """A destination refused to a job's agents: which, why, by which command of whom, how often."""

    host: str
    port: int
    why: str  # Refusal.why: host, port or address
    command: str
    agent: str
    task: int | None  # the task's number; None: one of the job's own agents
    count: int
    last_at: float

    @property
    def caller(self) -> str:
        """Who asked, as people read it (see `caller`)."""
        return caller(self.agent, self.task)

    @property
    def reason(self) -> str:
        """Why it was refused, in words."""
        return WHY.get(self.why, self.why)


def caller(agent: str, task: int | None) -> str:
    """Who made a call, as people read it: `task #2 (worker)`, `the job (project-lead)`."""
    role = agent.rsplit("/", 1)[-1]
    return f"task #{task} ({role})" if task is not None else f"the job ({role})"


def clip(command: str) -> str:
    """A command as kept: one line of at most COMMAND_CHARS characters."""
    line = " ".join(command.split())
    return line if len(line) <= COMMAND_CHARS else line[: COMMAND_CHARS - 1] + "…"


def record(
    tx: Tx,
    job_id: int,
    *,
    task: int | None,
    agent: str,
    command: str,
    refusals: Mapping[Refusal, int],
) -> None:
    """Count what one call was refused against the job."""
    kept = clip(command)
    at = now()
    for refusal, count in sorted(refusals.items(), key=lambda item: item[0].host):
        found = tx.execute(
            "SELECT refusal_id FROM network_refusals WHERE job_id = ? AND host = ? AND port = ?"
            " AND why = ? AND command = ? AND agent = ? AND task IS ?",
            (job_id, refusal.host, refusal.port, refusal.why, kept, agent, task),
        ).fetchone()
        if found is not None:
            tx.execute(
                "UPDATE network_refusals SET count = count + ?, last_at = ? WHERE refusal_id = ?",
                (count, at, found[0]),
            )
        elif _rows(tx, job_id) < MAX_ROWS:
            tx.execute(
                "INSERT INTO network_refusals (job_id, task, agent, host, port, why, command,"
                " count, first_at, last_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (job_id, task, agent, refusal.host, refusal.port, refusal.why, kept, count, at, at),
            )


def of_job(tx: Tx, job_id: int) -> tuple[Refused, ...]:
    """What the job's agents were refused, most recent first."""
    rows = tx.execute(
        "SELECT host, port, why, command, agent, task, count, last_at FROM network_refusals"
        " WHERE job_id = ? ORDER BY last_at DESC, refusal_id DESC",
        (job_id,),
    ).fetchall()
    return tuple(Refused(*row) for row in rows)


def _rows(tx: Tx, job_id: int) -> int:
    (count,) = tx.execute(
        "SELECT count(*) FROM network_refusals WHERE job_id = ?", (job_id,)
    ).fetchone()
    return int(count)
