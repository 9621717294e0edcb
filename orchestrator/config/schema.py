"""Pydantic models of the organisation and project YAML: as written, and as resolved."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from orchestrator.core.ecosystems import PRESETS
from orchestrator.core.gate_kinds import GateMode
from orchestrator.core.protected import check_pattern
from orchestrator.core.secrecy import setup_refusal

KNOWN_TOOLS: frozenset[str] = frozenset(
    {
        *("read_file", "list_files", "search", "write_file", "edit_file", "shell"),
        *("send", "message", "task_create", "task_get", "task_update", "task_list", "ask_human"),
        *("dispatch", "answer_review"),
    }
)
ORG_FILE = "teaparty.yaml"
PROJECT_FILE = ".teaparty/project.yaml"
DEFAULT_MODEL = "claude-sonnet-4-6"
DEFAULT_MAX_TURNS = 40
SEND_IS_FOR_LEADS = "send is a lead-only tool; members talk to teammates with message"
_ROLE = {"decider": "the decider", "advisors": "an advisor"}
_SLUG = re.compile(r"[a-z0-9][a-z0-9_-]*")


def _slug(value: str) -> str:
    if not _SLUG.fullmatch(value):
        raise ValueError(f"{value!r} is not a valid name: use a-z, 0-9, '-' and '_'")
    return value


def _known_tool(value: str) -> str:
    if value not in KNOWN_TOOLS:
        raise ValueError(f"unknown tool {value!r}; known tools: {', '.join(sorted(KNOWN_TOOLS))}")
    return value


Slug = Annotated[str, AfterValidator(_slug)]
Text = Annotated[str, Field(min_length=1)]
Tool = Annotated[str, AfterValidator(_known_tool)]
Count = Annotated[int, Field(strict=True, ge=1)]
# A glob of paths a change to which waits for the decider (orchestrator/core/protected.py).
PathPattern = Annotated[str, AfterValidator(check_pattern)]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Humans(_Model):
    """The D-A-I of a team: exactly one decider, any advisors, any informed."""

    decider: Text
    advisors: tuple[Text, ...] = ()
    informed: tuple[Text, ...] = ()

    @field_validator("decider", mode="before")
    @classmethod
    def _one_decider(cls, value: object) -> object:
        if isinstance(value, list | tuple):
            if len(value) == 1:
                return value[0]
            names = "".join(f"{', ' if i else ': '}{name}" for i, name in enumerate(value))
            raise ValueError(f"a team has exactly one decider, got {len(value)}{names}")
        return value

    @field_validator("advisors", "informed")
    @classmethod
    def _one_role_each(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        earlier = {
            "decider": (info.data.get("decider"),),
            "advisors": info.data.get("advisors", ()),
        }
        for index, person in enumerate(value):
            if person in value[:index]:
                raise ValueError(f"{person!r} is listed twice")
            for role, people in earlier.items():
                if role != info.field_name and person in people:
                    raise ValueError(f"{person!r} is already {_ROLE[role]}; one role per person")
        return value


class AgentDef(_Model):
    """One agent role with the org defaults applied."""

    name: str
    description: str
    prompt: str
    model: str
    tools: tuple[str, ...]
    max_turns: int
    context_tokens: int = 100_000


class Workgroup(_Model):
    """A team: its lead, its members and optionally its own D-A-I."""

    name: str
    description: str
    lead: AgentDef
    members: tuple[AgentDef, ...]
    humans: Humans | None = None
    review_rounds: int = 3
    worker: str | None = None
    spec_reviewer: str | None = None
    quality_reviewer: str | None = None
    phase_reviewer: str | None = None

    def worker_name(self) -> str:
        """Who implements a task: the named worker, else the first member that can write."""
        if self.worker is not None:
            return self.worker
        writers = [m.name for m in self.members if {"write_file", "edit_file"} & set(m.tools)]
        return (writers or [self.members[0].name])[0]

    def reviewers(self, review: str) -> tuple[str, ...]:
        """The reviewers a task's review level asks for, as far as this workgroup has them."""
        wanted = {
            "full": (self.spec_reviewer, self.quality_reviewer),
            "spec-only": (self.spec_reviewer or self.quality_reviewer,),
        }.get(review, ())
        return tuple(name for name in wanted if name is not None)

    @property
    def roster(self) -> tuple[AgentDef, ...]:
        """The lead followed by the members."""
        return (self.lead, *self.members)


class AgentDefaults(_Model):
    """What an agent file gets when it names no model or max_turns."""

    model: Text = DEFAULT_MODEL
    max_turns: Count = DEFAULT_MAX_TURNS


class Organisation(_Model):
    """The organisation: management roles, the workgroup catalog and every agent."""

    name: str
    office_manager: AgentDef
    proxy: AgentDef
    project_lead: str
    humans: Humans
    defaults: AgentDefaults
    workgroups: Mapping[str, Workgroup]
    agents: Mapping[str, AgentDef]
    directory: Path


class Budget(_Model):
    """Spending caps for one job; None means no cap of that kind."""

    max_usd: Annotated[float, Field(strict=True, gt=0)] | None = 10.0
    max_tokens: Annotated[int, Field(strict=True, gt=0)] | None = None


class Waiting(_Model):
    """How long a question waits for its decider: a reminder after `remind_after_days`,
    and after `close_after_days` the job closes (paused, resumable with `/resume`)."""

    remind_after_days: Annotated[float, Field(strict=True, gt=0)] = 3.0
    close_after_days: Annotated[float, Field(strict=True, gt=0)] = 14.0

    @model_validator(mode="after")
    def _close_after_the_reminder(self) -> Waiting:
        if self.close_after_days <= self.remind_after_days:
            raise ValueError("close_after_days must be more than remind_after_days")
        return self


class Rounds(_Model):
    """Review rounds on a job's pull request: at most `max_rounds` before the decider is
    asked; lone review comments gathered for `window_s` seconds into one round; a round
    that makes no progress for `stall_minutes` (no model turn, tool result or answer, and
    nothing it waits on) is stopped by the watchdog; a round may spend `max_usd` (None: only
    the job's budget applies); failing checks on the pull request's head start a round
    (`on_failed_checks`, on by default: read per job, so it applies to existing projects),
    at most one per head commit and `ci_rounds` in a row before a person must ask for one."""

    max_rounds: Annotated[int, Field(strict=True, ge=1, le=100)] = 5
    window_s: Annotated[float, Field(strict=True, ge=0, le=3600)] = 90.0
    stall_minutes: Annotated[float, Field(strict=True, gt=0, le=1440)] = 30.0
    max_usd: Annotated[float, Field(strict=True, gt=0)] | None = None
    on_failed_checks: bool = True
    ci_rounds: Annotated[int, Field(strict=True, ge=0, le=20)] = 2


_HOST = re.compile(
    r"(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
)


def _host(value: str) -> str:
    host = value.strip().lower()
    if len(host) > 253 or not _HOST.fullmatch(host):
        raise ValueError(f"{value!r} is not a host name (e.g. pypi.org, or *.example.org)")
    return host


Host = Annotated[str, AfterValidator(_host)]


def _unquoted_off(value: object) -> object:
    """YAML 1.1 reads an unquoted `off` as false: `network: off` means off."""
    return "off" if value is False else value


class SandboxSettings(_Model):
    """What a project's agents' processes may reach: `off` (default), `open`, or listed hosts;
    `ask`: a host they were refused is put to the decider, whose approval widens that job's
    network (jobs/network_gate.py)."""

    network: Annotated[
        Literal["off", "open"] | tuple[Host, ...], BeforeValidator(_unquoted_off)
    ] = "off"
    ask: bool = False


def _setup_host(value: str) -> str:
    """A host name, or an ecosystem preset (orchestrator/core/ecosystems.py)."""
    if value.strip().lower() in PRESETS:
        return value.strip().lower()
    host = _host(value)
    if "." not in host.removeprefix("*."):
        known = ", ".join(PRESETS)
        raise ValueError(f"{value!r} is neither a host name nor an ecosystem ({known})")
    return host


def _setup_secret(value: str) -> str:
    if (why := setup_refusal(value)) is not None:
        raise ValueError(f"{why}: no setup is given it")
    return value


Command = Annotated[str, Field(min_length=1, max_length=4000)]


class SetupSettings(_Model):
    """How the repository prepares its environment (orchestrator/setup/): `commands` run
    once per cache key in the sandbox, with only the `network` named (hosts or ecosystems)
    and the operator's setup secrets among `secrets`; what they leave in the worktree (a
    virtualenv, node_modules) every task sees. The cache key: the repository, this text and
    the content of the files `key_files` match at the job's base commit. `test` is the
    project's test command, `lint` its lint command: the engine runs both itself on each
    task's change and on the job branch before delivery (orchestrator/setup/checks.py),
    within `timeout_minutes` together."""

    commands: tuple[Command, ...] = Field(default=(), max_length=50)
    key_files: tuple[PathPattern, ...] = Field(default=(), max_length=100)
    network: tuple[Annotated[str, AfterValidator(_setup_host)], ...] = Field(
        default=(), max_length=100
    )
    secrets: tuple[Annotated[str, AfterValidator(_setup_secret)], ...] = Field(
        default=(), max_length=50
    )
    timeout_minutes: Annotated[float, Field(strict=True, gt=0, le=240)] = 20.0
    test: Command | None = None
    lint: Command | None = None

    @model_validator(mode="after")
    def _something_to_do(self) -> SetupSettings:
        if not self.commands and self.test is None and self.lint is None:
            raise ValueError("setup needs commands, a test command, or both")
        return self

    def checks(self) -> tuple[tuple[str, str], ...]:
        """The check commands the engine runs, (name, command line), tests first."""
        named = (("test", self.test), ("lint", self.lint))
        return tuple((name, command) for name, command in named if command)


def _repo_path(value: str) -> str:
    """A file of the repository, relative to its root."""
    path = value.strip().removeprefix("./")
    if not path or path.startswith("/") or ".." in path.split("/") or "\0" in path:
        raise ValueError(f"{value!r} is not a path relative to the repository's root")
    return path


def _off_is_unread(value: object) -> object:
    """`instructions: off` (or false) reads none."""
    return {"read": False} if value in (False, "off") else value


class InstructionSettings(_Model):
    """The repository's own instructions for agents (orchestrator/workspace/instructions.py):
    AGENTS.md, CLAUDE.md, GEMINI.md, copilot-instructions and .instructions.md files, read
    at the job's base commit unless `read` is false; `files` adds repository-wide ones."""

    read: bool = True
    files: tuple[Annotated[str, AfterValidator(_repo_path)], ...] = Field(default=(), max_length=20)


class JobPageSettings(_Model):
    """Who sees the project's job pages on `teaparty serve`: people with triage or write access
    (or more) to the repository; with `readers`, anyone who can read it (on a public
    repository, everyone signed in)."""

    readers: bool = False


class RunnerSettings(_Model):
    """What a GitHub Actions run (`teaparty action`) writes to its step summary. A public
    repository's run summaries are public, so the summary holds only the job's summary unless
    `summary_transcripts` folds each conversation's transcript in too (bot/runner/summary.py)."""

    summary_transcripts: bool = False


class ProxySettings(_Model):
    """How the human proxy earns its autonomy in a project (orchestrator/proxy/autonomy.py).

    `min_decisions` is N: comparable decisions before it may answer alone, and new agreements
    it needs after an override. `allow` lists the kinds it otherwise never answers alone.
    """

    min_decisions: Count = 5
    allow: tuple[str, ...] = ()  # checked against the engine's gate kinds (config/project.py)
    # Added by a writer to an issue with a job: the proxy may answer every eligible gate.
    auto_label: Annotated[str, Field(min_length=1, max_length=50)] = "teaparty-auto"


class PullRequestSettings(_Model):
    """How the job's pull request comes: `done` (default) opens it once the job is done;
    `early` opens it as a draft once the plan is approved, pushes the job branch as each
    task merges, and marks it ready at the end (orchestrator/jobs/early_draft.py)."""

    draft: Literal["done", "early"] = "done"


class Project(_Model):
    """One repository's project: its lead, D-A-I, teams, trigger, budget and gate policy."""

    name: str
    lead: AgentDef
    humans: Humans
    workgroups: tuple[Workgroup, ...]
    trigger_label: str
    budget: Budget
    gates: Mapping[str, GateMode]  # every kind the engine knows, with its mode
    parallel: int = 3
    sandbox: SandboxSettings = SandboxSettings()
    waiting: Waiting = Waiting()
    proxy: ProxySettings = ProxySettings()
    protected_paths: tuple[str, ...] = ()  # the project's own, beside the built-in ones
    rounds: Rounds = Rounds()
    setup: SetupSettings | None = None  # None: no `setup:`, agents get the host's tools
    instructions: InstructionSettings = InstructionSettings()
    job_page: JobPageSettings = JobPageSettings()
    pull_request: PullRequestSettings = PullRequestSettings()
    runner: RunnerSettings = RunnerSettings()


class AgentFile(_Model):
    """An agent as written in ``agents/<name>.yaml`` or inline in a project."""

    name: Slug
    description: Text
    prompt: Text
    model: Text | None = None
    tools: tuple[Tool, ...] = ()
    max_turns: Count | None = None
    context_tokens: Annotated[int, Field(strict=True, ge=1_000)] | None = None

    def resolve(self, defaults: AgentDefaults) -> AgentDef:
        """Apply the organisation's defaults."""
        return AgentDef(
            name=self.name,
            description=self.description,
            prompt=self.prompt,
            model=self.model or defaults.model,
            tools=self.tools,
            max_turns=self.max_turns or defaults.max_turns,
            context_tokens=self.context_tokens or 100_000,
        )


class WorkgroupFile(_Model):
    """A workgroup as written in ``workgroups/<name>.yaml`` or inline in a project."""

    name: Slug
    description: str = ""
    lead: Text
    members: tuple[Text, ...] = Field(min_length=1)
    humans: Humans | None = None
    review_rounds: Count = 3
    # The mini-team: member names; the worker defaults to the first member that can write.
    worker: Text | None = None
    spec_reviewer: Text | None = None
    quality_reviewer: Text | None = None
    phase_reviewer: Text | None = None


class OrgFile(_Model):
    """``teaparty.yaml`` as written."""

    name: Text
    office_manager: Text
    proxy: Text
    project_lead: Text
    humans: Humans
    defaults: AgentDefaults = AgentDefaults()
    workgroups: dict[Slug, Text] = Field(min_length=1)


class WorkgroupRef(_Model):
    """A project's use of a catalog workgroup, optionally with the project's own D-A-I for it."""

    ref: Text
    humans: Humans | None = None


class ProjectRoster(BaseModel):
    """Just the parts of a project file that name agents, read leniently to check references."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    lead: Text | None = None
    workgroups: tuple[dict[str, object], ...] | None = Field(default=None, min_length=1)
    agents: tuple[dict[str, object], ...] = ()


class ProjectFile(_Model):
    """``.teaparty/project.yaml`` as written; workgroups and agents are checked entry by entry."""

    name: Text | None = None
    lead: Text | None = None
    humans: Humans
    workgroups: tuple[dict[str, object], ...] | None = Field(default=None, min_length=1)
    agents: tuple[dict[str, object], ...] = ()
    trigger_label: Annotated[str, Field(min_length=1, max_length=50)] = "teaparty"
    budget: Budget = Budget()
    # Gate policy as written: kind -> mode, each kind the engine knows at its default when
    # left out (checked against the kinds in config/project.py). `always`: a person answers
    # (the proxy only suggests); `when_unsure`: the proxy may answer once it has earned that;
    # `never`: no gate (docs/configuration.md says what each kind then does).
    gates: dict[str, GateMode] = {}
    waiting: Waiting = Waiting()
    parallel: Count = 3
    sandbox: SandboxSettings = SandboxSettings()
    proxy: ProxySettings = ProxySettings()
    protected_paths: tuple[PathPattern, ...] = Field(default=(), max_length=200)
    rounds: Rounds = Rounds()
    setup: SetupSettings | None = None
    instructions: Annotated[InstructionSettings, BeforeValidator(_off_is_unread)] = (
        InstructionSettings()
    )
    job_page: JobPageSettings = JobPageSettings()
    pull_request: PullRequestSettings = PullRequestSettings()
    runner: RunnerSettings = RunnerSettings()
