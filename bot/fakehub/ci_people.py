"""What CI does on a repository, as helpers of the local GitHub stand-in (FakeGitHub).

A test says what a commit's checks concluded (`run_checks`: a completed suite, for Actions a
workflow run whose jobs have logs), starts a suite that is still running (`start_checks`,
finished later with `finish_checks`), holds a workflow for approval (`await_approval`: a
first-time contributor's, concluded `action_required` with no runs), and plans what the next
re-run of a check concludes (`plan_rerun`: pass, a flaky check; fail again, a real one).
Each completed suite sends `check_suite.completed` (and `workflow_run.completed` for Actions)
as GitHub does.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.fakehub.checks import completed, run_json
from bot.fakehub.ci_state import ACTIONS_APP, Check, CheckRun, CheckSuite
from bot.fakehub.pulls import refresh
from bot.fakehub.roles import HubRole
from bot.fakehub.shapes import Json
from bot.fakehub.state import HubRepo


class CiPeople(HubRole):
    """FakeGitHub's helpers that play CI."""

    async def start_checks(
        self,
        owner: str,
        name: str,
        sha: str,
        *,
        app: str = ACTIONS_APP,
        app_name: str = "GitHub Actions",
        workflow: str | None = "CI",
    ) -> int:
        """A suite on `sha` whose checks are still to come (queued); its id."""
        repo = self.state.repo(owner, name)
        for issue in list(repo.issues.values()):  # pushes move heads: read them as GitHub has them
            if issue.pull is not None and issue.state == "open":
                await refresh(repo, issue)
        with self.state.lock:
            now = self.state.clock()
            suite = CheckSuite(
                self.state.next_id(),
                repo.full_name.lower(),
                sha,
                _branch_of(repo, sha) or repo.default_branch,
                None,
                app,
                app_name,
                now,
                now,
                workflow=workflow if app == ACTIONS_APP else None,
                workflow_run_id=self.state.next_id() if app == ACTIONS_APP else None,
                run_number=1 + len(self.state.ci.suites),
                open=True,
            )
            self.state.ci.suites[suite.suite_id] = suite
            return suite.suite_id

    async def finish_checks(
        self, owner: str, name: str, suite_id: int, checks: Sequence[Check]
    ) -> None:
        """Complete suite `suite_id` with `checks` and deliver what its completion sends."""
        repo = self.state.repo(owner, name)
        with self.state.lock:
            suite = self.state.ci.suites[suite_id]
            now = self.state.clock()
            for check in checks:
                run = CheckRun(self.state.next_id(), suite_id, check, suite.created_at, now)
                self.state.ci.runs[run.run_id] = run
                suite.run_ids.append(run.run_id)
            suite.open, suite.updated_at = False, now
            deliveries = completed(self.state, repo, suite, self.urls)
        await self._deliver_all(deliveries)

    async def run_checks(
        self,
        owner: str,
        name: str,
        sha: str,
        checks: Sequence[Check],
        *,
        app: str = ACTIONS_APP,
        app_name: str = "GitHub Actions",
        workflow: str | None = "CI",
    ) -> int:
        """A suite on `sha` that ran `checks` and completed; its id."""
        suite_id = await self.start_checks(
            owner, name, sha, app=app, app_name=app_name, workflow=workflow
        )
        await self.finish_checks(owner, name, suite_id, checks)
        return suite_id

    async def await_approval(self, owner: str, name: str, sha: str, *, workflow: str = "CI") -> int:
        """A workflow run on `sha` waiting for a maintainer's approval (`action_required`)."""
        suite_id = await self.start_checks(owner, name, sha, workflow=workflow)
        repo = self.state.repo(owner, name)
        with self.state.lock:
            suite = self.state.ci.suites[suite_id]
            suite.open, suite.waiting = False, "action_required"
            deliveries = completed(self.state, repo, suite, self.urls)
        await self._deliver_all(deliveries)
        return suite_id

    def plan_rerun(self, owner: str, name: str, check: Check) -> None:
        """The next re-run of the check called `check.name` concludes as `check` says."""
        repo = self.state.repo(owner, name)
        with self.state.lock:
            self.state.ci.plan_rerun(repo.full_name.lower(), check)

    def ci_reruns(self) -> list[tuple[str, int]]:
        """The re-runs the App asked for: (operationId, check run id), oldest first."""
        with self.state.lock:
            return list(self.state.ci.reruns)

    def app_check_runs(self, owner: str, name: str, *, check: str) -> list[Json]:
        """The App's own check runs called `check` in a repository, oldest first, each as
        `checks/get` answers it (bot/fakehub/app_checks.py)."""
        with self.state.lock:
            repo = self.state.repo(owner, name)
            runs = [
                run
                for suite in self.state.ci.suites.values()
                if suite.repo == repo.full_name.lower() and suite.app_id == self.state.app_id
                for run in (self.state.ci.runs[i] for i in suite.run_ids)
                if run.check.name == check
            ]
            return [run_json(self.state, repo, r, self.urls) for r in runs]

    def log_reads(self) -> list[tuple[int, bool]]:
        """Each download of a job's log: (job id, whether it carried a token)."""
        with self.state.lock:
            return list(self.state.ci.log_reads)


def _branch_of(repo: HubRepo, sha: str) -> str | None:
    """The head branch of the pull request whose head is `sha` (None: none is; the suite is
    then taken to be of the default branch)."""
    for issue in repo.issues.values():
        if issue.pull is not None and issue.pull.head_sha == sha:
            return issue.pull.head_ref
    return None
