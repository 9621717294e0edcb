"""The project's checks, run by the engine on a job's commits and kept as facts.

A mini-team's `team_check` step (teams/tools.py) asks for a task's commit and, after the
last merge, for the job branch's; the driver asks for the very head it is about to push
(jobs/driver.py), so the pull request says how that commit fared, never an older one. A
commit is checked once per job: asking again (a restarted step, the delivery of a head
already checked) reads the stored result. This module owns the `checks` table.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from orchestrator.config.schema import Project
from orchestrator.jobs.setups import JobSetups
from orchestrator.sandbox.confine import Network
from orchestrator.setup.checks import Checked, Checker
from orchestrator.store.sqlite import Store, Tx
from orchestrator.workspace.spaces import JobSpace

NO_COMMAND = "the project names no test command (`setup.test` in .teaparty/project.yaml)"


@dataclass(frozen=True)
class JobCheck:
    """A check the engine ran for a job: of a task's commit, or (`task` None) the job
    branch's."""

    task: int | None
    checked: Checked


class JobChecks:
    """Runs and records the checks of every job (`setups` gives a job its prepared
    environment, `network(project)` what its agents may reach)."""

    def __init__(
        self,
        store: Store,
        checker: Checker,
        projects: Mapping[str, Project],
        *,
        setups: JobSetups | None,
        network: Callable[[str], Network],
    ) -> None:
        self.store = store
        self.checker = checker
        self.projects = projects
        self.setups = setups
        self.network = network

    def commands(self, project: str) -> tuple[tuple[str, str], ...]:
        """The project's check commands, (name, command line); () when it names none."""
        found = self.projects.get(project)
        setup = None if found is None else found.setup
        return () if setup is None else setup.checks()

    async def check(
        self, space: JobSpace, project: str, commit: str, task: int | None
    ) -> Checked | None:
        """The checks of `commit` for a task (or the job branch), run now unless this job
        has them already; None when the project names no check command."""
        commands = self.commands(project)
        if not commands:
            return None
        found = await self.store.read(lambda tx: _recorded(tx, space.job_id, commit))
        if found is None:
            prepared = None if self.setups is None else await self.setups.prepared(space, project)
            setup = self.projects[project].setup
            assert setup is not None  # it named commands
            found = await self.checker.check(
                repo=space.repo,
                commit=commit,
                commands=commands,
                prepared=prepared,
                network=self.network(project),
                timeout_s=setup.timeout_minutes * 60,
            )
        checked = found
        await self.store.write(lambda tx: _record(tx, space.job_id, task, checked))
        return checked

    async def of_job(self, job_id: int) -> tuple[JobCheck, ...]:
        """The latest check of each task, then the job branch's latest, for its status."""
        return await self.store.read(lambda tx: latest(tx, job_id))


def _recorded(tx: Tx, job_id: int, commit: str) -> Checked | None:
    row = tx.execute(
        "SELECT record FROM checks WHERE job_id = ? AND commit_sha = ?"
        " ORDER BY check_id DESC LIMIT 1",
        (job_id, commit),
    ).fetchone()
    return None if row is None else Checked.from_json(row[0])


def _record(tx: Tx, job_id: int, task: int | None, checked: Checked) -> None:
    """Keep the result for `task`'s scope, unless the latest of that scope is this one."""
    last = tx.execute(
        "SELECT commit_sha FROM checks WHERE job_id = ? AND task IS ?"
        " ORDER BY check_id DESC LIMIT 1",
        (job_id, task),
    ).fetchone()
    if last is not None and last[0] == checked.commit:
        return
    tx.execute(
        "INSERT INTO checks (job_id, task, commit_sha, status, record, checked_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (job_id, task, checked.commit, checked.status, checked.to_json(), time.time()),
    )


def latest(tx: Tx, job_id: int) -> tuple[JobCheck, ...]:
    """The latest check of each scope of the job: tasks by number, the job branch last."""
    rows = tx.execute(
        "SELECT task, record FROM checks WHERE check_id IN (SELECT max(check_id) FROM checks"
        " WHERE job_id = ? GROUP BY task) ORDER BY task IS NULL, task",
        (job_id,),
    ).fetchall()
    return tuple(JobCheck(task, Checked.from_json(record)) for task, record in rows)
