"""The engine's public surface: everything the edge (bot/) may use, and nothing else.

bot/ imports orchestrator only from here (tests/test_layering.py holds it to that), so the
engine's modules can move and change behind it. What is here:

- the Office (the engine wired) and its records, jobs and their driver;
- what `teaparty jobs` reads (views of jobs, their transcripts) and changes (a cancel, an
  answer, a clean-up), and the command rows a process holding the store carries out;
- the ports the edge implements or passes in (`Forge` and the records its methods return,
  `ForgeObjects`, `Model`);
- the records that cross the seam (job status, gates, tasks, events, failures, the proxy's
  decisions and figures);
- what a repository's jobs learned (`teaparty learnings`);
- configuration loading, the sandbox probe, the deliveries queue, and the error tree;
- the store as one file (a consistent snapshot, putting one in place, pruning ended jobs)
  and the engine's hardened git, for runner mode's state kept on a git ref;
- jobs' unpublished work kept on their remote between runner runs (`Office.preserve_all`
  before the store is saved, `forget_ended_work` or `Office.forget_ended` after;
  `Office.prepare` rebuilds).
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.bus.events import (
    Event,
    GateAnswered,
    GateAsked,
    JobStarted,
    StateChanged,
    UsageRecorded,
)
from orchestrator.bus.failures import Failure
from orchestrator.bus.gates import Gate
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
from orchestrator.core.messages import AssistantTurn
from orchestrator.core.model import Model, ModelRequest
from orchestrator.core.secrecy import KnownSecrets
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
from orchestrator.jobs.commands import JobCancelledError, JobCommand
from orchestrator.jobs.commands import serve as serve_commands
from orchestrator.jobs.control import ControlError, JobControl, Steer
from orchestrator.jobs.driver import JobDriver
from orchestrator.jobs.features import FEATURES, GATE_KINDS, Register
from orchestrator.jobs.handle import JobHandle
from orchestrator.jobs.local_forge import UnansweredGateError
from orchestrator.jobs.local_learnings import KeptLearning, forget_learning, kept_learnings
from orchestrator.jobs.local_run import (
    AGENT_IDENTITY,
    LocalJob,
    ModelKind,
    ResumeError,
    check_model,
    models,
    run_local,
)
from orchestrator.jobs.office import JobSource, Office, Resumed
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
from orchestrator.jobs.records import ForgeObject, JobRecord, JobRecords, LinkedJob
from orchestrator.jobs.refusals import Refused
from orchestrator.jobs.revisions import Edited, IssueText
from orchestrator.jobs.rounds import (
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
from orchestrator.proxy.proxy import Proxy
from orchestrator.proxy.stats import ProxyStats, proxy_stats, proxy_stats_at
from orchestrator.sandbox.confine import Sandbox
from orchestrator.sandbox.probe import announce, probe
from orchestrator.setup.cache import cache_snapshot_key
from orchestrator.setup.checks import Checked, CommandRun
from orchestrator.store.deliveries import Arrival, Backlog, Delivery, DeliveryQueue, DeliveryRecord
from orchestrator.store.migrations import SCHEMA_VERSION
from orchestrator.store.prune import KEEP_ENDED_DAYS, Pruned, prune_store
from orchestrator.store.snapshot import restore_store, snapshot_store
from orchestrator.store.sqlite import now
from orchestrator.teams.board import Task
from orchestrator.workspace.git import (
    NETWORK_TIMEOUT_S,
    GitError,
    auth_env,
    contended,
    git,
    git_bytes,
    reset_config,
    slug,
)
from orchestrator.workspace.preserve import WORK_REFS, Preserved, PreservedRaceError

__all__ = [
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
    "JobControl",
    "JobDriver",
    "JobHandle",
    "JobNotFoundError",
    "JobOrigin",
    "JobRecord",
    "JobRecords",
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
    "KEEP_ENDED_DAYS",
    "KnownSecrets",
    "LinkedJob",
    "LocalJob",
    "LogEntry",
    "Member",
    "Model",
    "ModelAuthError",
    "ModelError",
    "ModelKind",
    "ModelRequest",
    "NETWORK_TIMEOUT_S",
    "NotProxyAnsweredError",
    "Office",
    "OrchestratorError",
    "Organisation",
    "Override",
    "Point",
    "Progress",
    "Project",
    "Proxy",
    "ProxyDecision",
    "ProxySettings",
    "ProxyStats",
    "Preserved",
    "PreservedRaceError",
    "Pruned",
    "Pull",
    "PullEnded",
    "PullState",
    "PushTarget",
    "Refused",
    "Removal",
    "ResumeError",
    "Resumed",
    "ReviewRound",
    "RoundLedger",
    "RoundPoint",
    "Rounds",
    "SCHEMA_VERSION",
    "STATE_FILTERS",
    "Sandbox",
    "SandboxError",
    "StateChanged",
    "Steer",
    "StoreError",
    "StoreLockedError",
    "StoreVersionError",
    "Taken",
    "Task",
    "Team",
    "UnansweredGateError",
    "UsageRecorded",
    "WORK_REFS",
    "Withdrawn",
    "announce",
    "answer_job",
    "auth_env",
    "contended",
    "cancel_job",
    "check_model",
    "check_path",
    "clean",
    "forget_ended_work",
    "forget_repository",
    "git",
    "git_bytes",
    "load_organisation",
    "load_project",
    "managing",
    "models",
    "now",
    "plan_clean",
    "probe",
    "progress",
    "proxy_stats",
    "proxy_stats_at",
    "prune_store",
    "pull_ended",
    "reset_config",
    "restore_store",
    "run_local",
    "run_scope",
    "serve_commands",
    "shipped_org_dir",
    "slug",
    "snapshot_store",
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
