"""The engine's public surface: everything the edge (bot/) may use, and nothing else.

bot/ imports orchestrator only from here (tests/test_layering.py holds it to that), so the
engine's modules can move and change behind it. What is here:

- the Office (the engine wired), jobs and their driver, and the narrow ports (`Ports`) the
  edge reaches the Office's collaborators through: records, reviews, CI, orders, the proxy,
  issue revisions, deliveries; only the calls the edge makes, so they can move behind it;
- what `teaparty jobs` reads (views of jobs, their transcripts) and changes (a cancel, an
  answer, a clean-up), and the command rows a process holding the store carries out;
- the ports the edge implements or passes in (`Forge` and the records its methods return,
  `ForgeObjects`, `Model`);
- the records that cross the seam (job status, gates, tasks, events, failures, the proxy's
  decisions and figures);
- what a repository's jobs learned (`teaparty learnings`), and what a local run (bot/local_run.py)
  asks of the person's repository and of the job it resumes;
- configuration loading, the sandbox probe, the deliveries queue, and the error tree;
- runner mode's state kept on a git ref (`StoreRef`: the store loaded from and saved to the
  ref by compare-and-swap, its records and errors); no raw git and no store internals;
- what the local commands ask of a person's repository (its top level, whether it has a
  HEAD, what is not committed, git's version), through the engine's hardened git;
- jobs' unpublished work kept on their remote between runner runs (`Office.preserve_all`
  before the store is saved, `forget_ended_work` or `Office.forget_ended` after;
  `Office.prepare` rebuilds).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from orchestrator.bus.events import (
    Event,
    GateAnswered,
    GateAsked,
    JobStarted,
    StateChanged,
    UsageRecorded,
)
from orchestrator.bus.failures import Failure
from orchestrator.bus.gates import AnsweredVia, Gate
from orchestrator.config import (
    AgentDef,
    CheckReport,
    Organisation,
    Project,
    load_organisation,
    shipped_org_dir,
)
from orchestrator.config import check_path as _check_path
from orchestrator.config import load_project as _load_project
from orchestrator.config.schema import ProxySettings, Rounds
from orchestrator.core.clock import Deadline
from orchestrator.core.errors import (
    ConfigError,
    ConfigIssue,
    ForgeError,
    ForgeWaitError,
    GateClosedError,
    JobNotFoundError,
    JobStateError,
    ModelAuthError,
    ModelError,
    NotProxyAnsweredError,
    OrchestratorError,
    SandboxError,
    StoreError,
    StoreLockedError,
    StoreVersionError,
)
from orchestrator.core.gate_kinds import GateKind, GateKinds
from orchestrator.core.messages import AssistantTurn, Message, Usage
from orchestrator.core.model import Model, ModelRequest
from orchestrator.core.secrecy import KnownSecrets
from orchestrator.core.secret_scan import Scanner
from orchestrator.jobs.activity import Member, Progress, Team, progress
from orchestrator.jobs.admin import Cancel, answer_job, cancel_job, managing
from orchestrator.jobs.checks import JobCheck
from orchestrator.jobs.ci_rounds import FAILED as FAILED_CHECKS
from orchestrator.jobs.ci_rounds import (
    CiDecision,
    CiFacts,
    CiIgnore,
    CiRerun,
    CiRound,
    CiSay,
    CiSuites,
    CiWait,
    FailedCheck,
    decide_ci,
    no_ci_note,
)
from orchestrator.jobs.cleanup import Removal, clean, plan_clean
from orchestrator.jobs.commands import JobCancelledError, JobCommand, driving
from orchestrator.jobs.commands import serve as serve_commands
from orchestrator.jobs.control import ControlError, Steer
from orchestrator.jobs.driver import JobDriver
from orchestrator.jobs.features import FEATURES, GATE_KINDS, Register
from orchestrator.jobs.handle import JobHandle
from orchestrator.jobs.job_page import JobPage, Level, job_page
from orchestrator.jobs.job_page import transcript as conversation_transcript
from orchestrator.jobs.local_jobs import (
    ResumeError,
    claim_run,
    local_job_prefix,
    resumable_branch,
)
from orchestrator.jobs.local_learnings import KeptLearning, forget_learning, kept_learnings
from orchestrator.jobs.local_repo import (
    branch_commits,
    head_commit,
    instructions_line,
    local_push_target,
    local_repository,
    read_project,
    standing_learnings,
)
from orchestrator.jobs.model_choice import AGENT_IDENTITY, ModelKind, check_model, models
from orchestrator.jobs.office import JobFailedError, JobSource, Office, Resumed
from orchestrator.jobs.offline import DemoModel
from orchestrator.jobs.ports import (
    Delivered,
    Forge,
    ForgeObjects,
    GatePosted,
    JobState,
    JobStatus,
    PushTarget,
    RoundLedger,
)
from orchestrator.jobs.preserved import forget_ended_work
from orchestrator.jobs.pull_lifecycle import PullEnded, forget_repository, pull_ended
from orchestrator.jobs.records import ForgeObject, JobRecord, LinkedJob
from orchestrator.jobs.refusals import Refused
from orchestrator.jobs.revisions import Edited, IssueText
from orchestrator.jobs.round_records import (
    Feedback,
    Point,
    Pull,
    PullState,
    ReviewRound,
    RoundPoint,
    Taken,
)
from orchestrator.jobs.setup_doctor import Verdict, check_setup
from orchestrator.jobs.views import (
    STATE_FILTERS,
    JobOrigin,
    JobSummary,
    JobView,
    JobViews,
    LogEntry,
    run_scope,
)
from orchestrator.jobs.withdraw import Withdrawn, withdraw
from orchestrator.memory.entries import Learning
from orchestrator.memory.entries import is_id as is_learning_id
from orchestrator.proxy.decisions import ProxyDecision
from orchestrator.proxy.overrides import Override
from orchestrator.proxy.stats import ProxyStats, proxy_stats, proxy_stats_at
from orchestrator.sandbox.confine import Sandbox
from orchestrator.sandbox.probe import announce, probe
from orchestrator.setup.cache import cache_snapshot_key
from orchestrator.setup.checks import Checked, CommandRun
from orchestrator.store.deliveries import Arrival, Backlog, Delivery, DeliveryQueue, DeliveryRecord
from orchestrator.teams.board import Task, board_line
from orchestrator.workspace.git import GitError, slug
from orchestrator.workspace.git import git as _git
from orchestrator.workspace.preserve import PreservedRaceError
from orchestrator.workspace.state_ref import (
    Loaded,
    StateError,
    StateFormatError,
    StateInfo,
    StateRaceError,
    StateTooLargeError,
    StoreRef,
)

__all__ = [
    "JobFailedError",
    "ResumeError",
    "branch_commits",
    "claim_run",
    "driving",
    "head_commit",
    "instructions_line",
    "local_job_prefix",
    "local_push_target",
    "local_repository",
    "read_project",
    "resumable_branch",
    "standing_learnings",
    "AnsweredVia",
    "board_line",
    "git_version",
    "has_head",
    "repository_top",
    "uncommitted",
    "CiWatch",
    "Deliveries",
    "IssueRevisions",
    "Orders",
    "Ports",
    "ProxyDesk",
    "Records",
    "Reviews",
    "JobPage",
    "Level",
    "Message",
    "Usage",
    "conversation_transcript",
    "job_page",
    "redactor",
    "KeptLearning",
    "Learning",
    "forget_learning",
    "is_learning_id",
    "kept_learnings",
    "Verdict",
    "check_setup",
    "cache_snapshot_key",
    "FEATURES",
    "GATE_KINDS",
    "Register",
    "CheckReport",
    "GateKind",
    "GateKinds",
    "AGENT_IDENTITY",
    "AgentDef",
    "Arrival",
    "AssistantTurn",
    "Backlog",
    "Cancel",
    "ConfigError",
    "ConfigIssue",
    "ControlError",
    "Deadline",
    "Delivered",
    "Delivery",
    "DeliveryQueue",
    "DeliveryRecord",
    "DemoModel",
    "Edited",
    "Event",
    "Failure",
    "Feedback",
    "Forge",
    "ForgeError",
    "ForgeObject",
    "ForgeObjects",
    "ForgeWaitError",
    "Gate",
    "GateAnswered",
    "GateAsked",
    "GateClosedError",
    "GatePosted",
    "GitError",
    "IssueText",
    "JobCancelledError",
    "JobCommand",
    "JobDriver",
    "JobHandle",
    "JobNotFoundError",
    "JobOrigin",
    "JobRecord",
    "JobSource",
    "JobStarted",
    "JobState",
    "JobStateError",
    "JobStatus",
    "JobCheck",
    "FAILED_CHECKS",
    "CiDecision",
    "CiFacts",
    "CiIgnore",
    "CiRerun",
    "CiRound",
    "CiSay",
    "CiSuites",
    "CiWait",
    "FailedCheck",
    "decide_ci",
    "no_ci_note",
    "Checked",
    "CommandRun",
    "JobSummary",
    "JobView",
    "JobViews",
    "KnownSecrets",
    "LinkedJob",
    "LogEntry",
    "Member",
    "Model",
    "ModelAuthError",
    "ModelError",
    "ModelKind",
    "ModelRequest",
    "NotProxyAnsweredError",
    "Office",
    "OrchestratorError",
    "Organisation",
    "Override",
    "Point",
    "Progress",
    "Project",
    "ProxyDecision",
    "ProxySettings",
    "ProxyStats",
    "PreservedRaceError",
    "Pull",
    "PullEnded",
    "PullState",
    "PushTarget",
    "Refused",
    "Removal",
    "Resumed",
    "ReviewRound",
    "RoundLedger",
    "RoundPoint",
    "Rounds",
    "STATE_FILTERS",
    "Sandbox",
    "SandboxError",
    "StateChanged",
    "Steer",
    "Loaded",
    "StateInfo",
    "StoreRef",
    "StateError",
    "StateFormatError",
    "StateRaceError",
    "StateTooLargeError",
    "StoreError",
    "StoreLockedError",
    "StoreVersionError",
    "Taken",
    "Task",
    "Team",
    "UsageRecorded",
    "Withdrawn",
    "announce",
    "answer_job",
    "cancel_job",
    "check_model",
    "check_path",
    "clean",
    "forget_ended_work",
    "forget_repository",
    "load_organisation",
    "load_project",
    "managing",
    "models",
    "plan_clean",
    "probe",
    "progress",
    "proxy_stats",
    "proxy_stats_at",
    "pull_ended",
    "run_scope",
    "serve_commands",
    "shipped_org_dir",
    "slug",
    "withdraw",
]


def load_project(
    text: str,
    *,
    org: Organisation,
    source: str,
    default_name: str,
    kinds: GateKinds = GATE_KINDS,
) -> Project:
    """A project file's text loaded against `org` and the gate kinds the engine knows (the
    standard features' unless given; ConfigError naming the file, line and key of every
    issue)."""
    return _load_project(text, org=org, source=source, default_name=default_name, kinds=kinds)


def check_path(path: Path, *, org_dir: Path) -> CheckReport:
    """Check an organisation, a repository's project or one YAML file (`teaparty config
    check`), against the engine's gate kinds."""
    return _check_path(path, org_dir=org_dir, kinds=GATE_KINDS)


async def git_version() -> str | None:
    """The git the engine runs, as `git --version` names it (None: it would not say)."""
    code, version = await _git(None, "--version", check=False)
    return version.strip() if code == 0 else None


async def repository_top(path: Path) -> Path | None:
    """The top level of the git repository `path` is in (None: it is in none)."""
    code, top = await _git(None, "-C", str(path), "rev-parse", "--show-toplevel", check=False)
    return Path(top.strip()) if code == 0 else None


async def has_head(repo: Path) -> bool:
    """Whether the repository has a commit at HEAD for a job to start from."""
    code, _ = await _git(
        None, "-C", str(repo), "rev-parse", "--verify", "--quiet", "HEAD", check=False
    )
    return code == 0


async def uncommitted(repo: Path) -> tuple[str, ...]:
    """The paths in the repository's working tree that differ from HEAD (`git status`)."""
    _, status = await _git(None, "-C", str(repo), "status", "--porcelain", check=False)
    return tuple(line[3:] for line in status.splitlines() if line.strip())


class Records(Protocol):
    """The jobs as the edge finds them: by key, conversation or link, and what started them."""

    async def job(self, job_id: int) -> JobRecord | None:
        """The job with this id."""

    async def job_for_key(self, job_key: str) -> JobRecord | None:
        """The job started under this key (one per key, ever)."""

    async def latest_for_key(self, job_key: str) -> JobRecord | None:
        """The newest job of a subject (its key, or a later `key/k`)."""

    async def job_of_conversation(self, conversation_id: str) -> int | None:
        """The job a conversation works for, if any."""

    async def link(self, job_id: int, forge: str, subject: str) -> None:
        """Link a job to the forge that started it (the first link stays)."""

    async def subject(self, job_id: int, forge: str) -> str | None:
        """The subject `forge` linked to the job (None: another, or none, started it)."""

    async def linked(self, forge: str, *, active: bool = True) -> list[LinkedJob]:
        """The jobs `forge` started (the active ones by default), oldest first."""


class Reviews(Protocol):
    """A job's change request and the review rounds its feedback starts."""

    async def pull(self, job_id: int) -> Pull | None:
        """The job's change request, if it has one."""

    async def resting_with_open_pull(self) -> list[int]:
        """The jobs that rest with their change request open."""

    async def job_of_pull(self, repo: str, number: int) -> int | None:
        """The job whose change request is `number` of `repo`."""

    async def pull_state(self, job_id: int, state: PullState) -> None:
        """The change request is now `state`; a round waiting on it may start."""

    async def feedback(self, job_id: int, feedback: Feedback) -> Taken:
        """Take a review's points into the job's next round."""

    async def handled(self, job_id: int) -> dict[str, int]:
        """Per review thread, the newest comment a round took."""


class CiWatch(Protocol):
    """CI on a job's change request: what is known of a head, and what came of it."""

    async def facts(self, job_id: int, sha: str) -> CiFacts:
        """What the store says of CI on the job and head `sha`."""

    async def reran(self, job_id: int, sha: str, names: Sequence[str], *, note: str | None) -> None:
        """Checks were re-run on `sha`, or could not be; `note` says so."""

    async def say(self, job_id: int, sha: str, said: CiSay) -> bool:
        """Keep what a decision says; False when it was said before."""

    async def note(self, job_id: int, sha: str, key: str, note: str) -> bool:
        """`note` on the tracking comment, once per head commit and `key`."""

    async def start_round(
        self, job_id: int, sha: str, checks: Sequence[FailedCheck], *, flaky: Sequence[str] = ()
    ) -> Taken | None:
        """Start head `sha`'s automatic round (None: it had its round)."""

    async def watch(self, job_id: int, sha: str, *, now: float, wait_s: float) -> str | None:
        """Whether to look for CI on the resting head `sha` now, or decide on it."""

    async def defer(self, job_id: int, sha: str) -> None:
        """Checks completed on `sha` while the pull request was a draft."""

    async def take_deferred(self, job_id: int, sha: str) -> bool:
        """Take `sha`'s deferred checks to decide on them (False: another took them)."""

    async def ran(self, job_id: int, sha: str, *, note: str | None = None) -> None:
        """CI ran on `sha`, or did not (`note` says so): it is looked for no more."""


class Orders(Protocol):
    """A decider's orders to a running job: hold it, release it, steer it, cap its spending."""

    async def pause(self, job_id: int, *, by: str) -> bool:
        """Hold the job; False when it was held already."""

    async def resume(self, job_id: int) -> bool:
        """Release a held job; False when it was not held."""

    async def paused_by(self, job_id: int) -> str | None:
        """Who holds the job, if anyone does."""

    async def steer(self, job_id: int, text: str, *, by: str, ref: str | None = None) -> bool:
        """Give the job's lead direction; False when `ref` steered already."""

    async def set_budget(
        self, job_id: int, usd: float, *, by: str, ref: str | None = None
    ) -> Gate | None:
        """The job's own spending cap; the budget gate it approves, if one was open."""


class ProxyDesk(Protocol):
    """The human proxy as a decider orders it: answer alone, be overridden."""

    async def set_auto(self, job_id: int, *, on: bool, by: str) -> None:
        """Let the proxy answer every eligible gate of the job."""

    async def record_override(
        self, gate_id: int, answer: str, by: str, *, ref: str | None = None
    ) -> Override:
        """Record the decider's `/override` of the proxy's answer at a gate."""

    async def alone_answers(self, job_id: int) -> list[ProxyDecision]:
        """The job's gates the proxy answered alone, oldest first."""


class IssueRevisions(Protocol):
    """The text of a job's issue: what it started from, and each edit since."""

    async def started(self, job_id: int, text: IssueText) -> bool:
        """Keep the text the job starts from, once."""

    async def edited(
        self,
        job_id: int,
        text: IssueText,
        *,
        by: str,
        edited_at: float | None = None,
        before: IssueText | None = None,
    ) -> Edited:
        """The job's issue now reads `text`: a gate asks whether the job works to it."""


class Deliveries(Protocol):
    """The stored webhook deliveries: taken in, worked off, retried, and what was read when."""

    async def record_all(self, arrivals: Sequence[Arrival]) -> list[bool]:
        """Store each arrival unless stored already; which were new."""

    async def due(self, *, limit: int = 50) -> list[Delivery]:
        """The pending deliveries due now, oldest first."""

    async def next_due_at(self) -> float | None:
        """When the next pending delivery is due, if any is."""

    async def done(self, delivery_id: str, *, outcome: str) -> None:
        """The delivery was handled: what came of it."""

    async def failed_attempt(self, delivery_id: str, *, error: str, retry: bool) -> bool:
        """An attempt failed; whether the delivery is tried again."""

    async def retry_later(self, delivery_id: str, *, not_before: float, error: str) -> None:
        """Try the delivery again no sooner than `not_before`."""

    async def get(self, delivery_id: str) -> DeliveryRecord | None:
        """The stored delivery, if any."""

    async def read_mark(self, scope: str) -> float | None:
        """Up to when `scope` was read from GitHub, if ever."""

    async def set_read_mark(self, scope: str, at: float) -> None:
        """`scope` was read from GitHub up to `at`."""

    async def prune(self) -> int:
        """Drop old handled deliveries; how many."""

    async def backlog(self) -> Backlog:
        """How many deliveries wait, and the oldest's age."""


@dataclass(frozen=True)
class Ports:
    """What the edge does with the engine beyond the Office's own methods, each port only
    the calls it makes: the Office's collaborators stay behind them, free to move."""

    records: Records
    reviews: Reviews
    ci: CiWatch
    orders: Orders
    proxy: ProxyDesk
    revisions: IssueRevisions
    deliveries: Deliveries
    objects: ForgeObjects  # what a job's forge made on GitHub, kept for the forge
    gate_kinds: GateKinds

    @classmethod
    def of(cls, office: Office) -> Ports:
        """The ports of `office`, built once by the edge's composition root."""
        return cls(
            records=office.records,
            reviews=office.rounds,
            ci=office.ci,
            orders=office.control,
            proxy=office.proxy,
            revisions=office.issue_edits,
            deliveries=office.deliveries,
            objects=office.records,
            gate_kinds=office.gate_kinds,
        )


def redactor(env: Mapping[str, str]) -> Callable[[str], str]:
    """What masks, in any text shown to a person, the secret values `env` holds and every
    known token pattern (as the engine masks what it finds in a push)."""
    return Scanner(KnownSecrets.of(env).values()).redact
