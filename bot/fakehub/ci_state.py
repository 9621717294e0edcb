"""CI in the local GitHub stand-in: check suites, their check runs, and Actions' jobs and logs.

A check suite is one app's checks of one commit (GitHub Actions makes one per workflow run);
each check run is one check (for Actions, one job: the check run's id is the job's id, as on
GitHub). A run keeps its output (title, summary, text), its annotations and, for Actions, the
job's log. A re-run makes a new check run of the same name in the same suite (a new attempt),
and the suite is completed again with it; what the re-run concludes is what a test planned
(`HubCi.plan_rerun`), else what the run it repeats concluded. Everything here is guarded by
`HubState.lock`.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field

ACTIONS_APP = "github-actions"  # GitHub Actions' app slug; its check runs are jobs
ACTIONS_APP_ID = 15368  # GitHub Actions' app id on github.com
# How GitHub ranks conclusions: a suite reports the highest of its runs'.
_RANK = (
    "action_required",
    "cancelled",
    "timed_out",
    "failure",
    "startup_failure",
    "stale",
    "neutral",
    "success",
    "skipped",
)


@dataclass(frozen=True)
class Annotation:
    """A check run's annotation: a line of a file and what the check said about it."""

    path: str
    line: int
    message: str
    level: str = "failure"  # notice, warning or failure
    title: str | None = None


@dataclass(frozen=True)
class Check:
    """What a test says one check concluded: its name, conclusion, output and job log."""

    name: str
    conclusion: str
    log: str = ""
    summary: str | None = None
    text: str | None = None
    annotations: tuple[Annotation, ...] = ()


@dataclass
class CheckRun:
    """One check of a commit (an Actions job, when its suite is Actions')."""

    run_id: int
    suite_id: int
    check: Check
    started_at: float
    completed_at: float | None
    attempt: int = 1
    log_key: str = field(default_factory=lambda: secrets.token_urlsafe(12), repr=False)
    # What an App that made the run set (bot/fakehub/app_checks.py); CI's runs keep these.
    queued: bool = False
    title: str | None = None
    external_id: str = ""
    details_url: str | None = None

    @property
    def status(self) -> str:
        """`completed` once concluded, `queued` or `in_progress` before."""
        if self.completed_at is not None:
            return "completed"
        return "queued" if self.queued else "in_progress"

    @property
    def conclusion(self) -> str | None:
        """The run's conclusion once completed."""
        return self.check.conclusion if self.completed_at is not None else None


@dataclass
class CheckSuite:
    """One app's checks of one commit: for Actions, one workflow run."""

    suite_id: int
    repo: str  # owner/name, lower case
    head_sha: str
    head_branch: str | None
    before: str | None
    app: str  # the app's slug
    app_name: str
    created_at: float
    updated_at: float
    workflow: str | None = None  # Actions: the workflow's name
    workflow_run_id: int | None = None
    run_number: int = 1
    event: str = "pull_request"
    waiting: str | None = None  # a conclusion the suite has without runs (action_required)
    open: bool = False  # runs are still to come (queued)
    run_ids: list[int] = field(default_factory=list)
    app_id: int | None = None  # the stand-in's own App, for the suites of runs it made

    @property
    def actions(self) -> bool:
        """Whether GitHub Actions made it (its runs are jobs with logs)."""
        return self.app == ACTIONS_APP


@dataclass
class HubCi:
    """Every suite and run the stand-in knows, the re-runs tests planned and the App asked."""

    suites: dict[int, CheckSuite] = field(default_factory=dict)
    runs: dict[int, CheckRun] = field(default_factory=dict)
    planned: dict[tuple[str, str], list[Check]] = field(default_factory=dict)
    reruns: list[tuple[str, int]] = field(default_factory=list)  # (operation, run id) asked
    log_reads: list[tuple[int, bool]] = field(default_factory=list)  # (job, carried a token)

    def latest(self, suite: CheckSuite) -> list[CheckRun]:
        """The suite's newest run of each name (GitHub's `filter=latest`), in first-run order."""
        newest: dict[str, CheckRun] = {}
        for run_id in suite.run_ids:
            run = self.runs[run_id]
            newest[run.check.name] = run
        return list(newest.values())

    def status(self, suite: CheckSuite) -> str:
        """`completed` when every latest run is (and none are still to come)."""
        runs = self.latest(suite)
        if suite.waiting is not None:
            return "completed"
        if suite.open or not runs or any(r.completed_at is None for r in runs):
            return "queued" if not runs else "in_progress"
        return "completed"

    def conclusion(self, suite: CheckSuite) -> str | None:
        """The highest-ranked conclusion of its latest runs, once the suite completed."""
        if suite.waiting is not None:
            return suite.waiting
        if self.status(suite) != "completed":
            return None
        return _highest(r.check.conclusion for r in self.latest(suite))

    def of_commit(self, repo: str, sha: str) -> list[CheckSuite]:
        """The suites of one commit, oldest first."""
        return [s for s in self.suites.values() if s.repo == repo and s.head_sha == sha]

    def plan_rerun(self, repo: str, check: Check) -> None:
        """The next re-run of `check.name` in `repo` concludes as `check` says."""
        self.planned.setdefault((repo, check.name), []).append(check)

    def rerun_result(self, repo: str, run: CheckRun) -> Check:
        """What a re-run of `run` concludes: the planned result, else the same again."""
        planned = self.planned.get((repo, run.check.name))
        return planned.pop(0) if planned else run.check


def _highest(conclusions: Iterable[str]) -> str:
    found = list(conclusions)
    return min(found, key=lambda c: _RANK.index(c) if c in _RANK else len(_RANK))
