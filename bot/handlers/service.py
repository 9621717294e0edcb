"""The App at work: stored deliveries become jobs, gate answers and nothing else.

`GitHubApp` (the REST adapter) and `Office` (the engine) meet here. A label starts one job
per issue (only for senders with write access); the decider's reply answers the job's
open question; the `JobDriver` keeps each job's tracking comment, gate comments, branch
and pull request in line with the store. The App's own comments are found by marker and
author (`Identity`), and a repository becomes a path only once its names pass GitHub's rules.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

from bot.errors import BotError
from bot.github.client import GitHubApp, Installation
from bot.github.forge import GitHubForge, Subject, find_comment
from bot.github.sanitizer import quote
from bot.github.tracking import config_error_body, no_sandbox_body, refusal_body
from bot.handlers.payloads import (
    CommentAdded,
    Ignored,
    LabelAdded,
    Ping,
    check_owner,
    check_repo_name,
    parse_command,
)
from bot.settings import Settings
from orchestrator.api import (
    ConfigError,
    ConfigIssue,
    Delivery,
    Forge,
    JobDriver,
    JobSource,
    Office,
    Project,
    SandboxError,
    load_project,
    slug,
)

log = logging.getLogger(__name__)

WRITERS = frozenset({"admin", "write"})
CACHE_TTL_S = 60.0
DEFAULT_LABEL = "teaparty"


@dataclass(frozen=True)
class RepoConfig:
    """A repository's project (or the error that keeps it from loading) and learnings."""

    project: Project | None
    error: str | None
    learnings: str | None
    text: str | None = None


class GitHubService:
    """Acts on deliveries for one App installation set, over one Office."""

    def __init__(self, settings: Settings, office: Office, github: GitHubApp) -> None:
        self.settings = settings
        self.office = office
        self.github = github
        self.driver = JobDriver(office, self.forge)
        self._permissions: dict[tuple[str, str], tuple[str, float]] = {}
        self._configs: dict[tuple[str, str], tuple[RepoConfig, float]] = {}

    async def forge(self, job_id: int) -> Forge | None:
        """The Forge of a job the App started, or None for any other job."""
        subject = await self.office.records.subject(job_id, "github")
        if subject is None:
            return None
        return GitHubForge(
            self.github,
            self.office,
            Subject.from_json(subject),
            server_url=self.settings.server_url,
            status_interval_s=self.settings.status_interval_s,
            identity=await self.github.identity(),
        )

    async def handle(self, delivery: Delivery) -> tuple[str, int | None]:
        """Act on one stored delivery; what came of it, and the job it touched."""
        payload = json.loads(delivery.body)
        command = parse_command(
            delivery.event,
            payload,
            app_login=await self.github.login(),
            allowed_bots=self.settings.allowed_bots,
        )
        if isinstance(command, Ping):
            return "pong", None
        if isinstance(command, Ignored):
            return f"ignored: {command.reason}", None
        if isinstance(command, LabelAdded):
            return await self.on_label(command)
        return await self.on_comment(command)

    async def on_label(self, command: LabelAdded) -> tuple[str, int | None]:
        """Start (or resume) the issue's job if the label is the trigger and the sender may."""
        repo, issue, sender = command.repo, command.issue, command.sender
        if issue.is_pull_request:
            return "ignored: labels on pull requests start nothing", None
        if repo.installation_id is None:
            return "ignored: the delivery names no installation", None
        gh = await self.github.installation(repo.installation_id)
        config = await self._config(gh, repo.owner, repo.name, repo.default_branch, sender.login)
        label = config.project.trigger_label if config.project else DEFAULT_LABEL
        if command.label != label:
            return f"ignored: label {command.label!r} is not the trigger {label!r}", None
        if await self._permission(gh, repo.owner, repo.name, sender.login) not in WRITERS:
            await self._comment_once(
                gh,
                repo.owner,
                repo.name,
                issue.number,
                f"refused:{sender.login.lower()}",
                refusal_body(sender.login, label=label),
            )
            return f"refused: {sender.login} has no write access", None
        if config.project is None:
            await self._comment_once(
                gh,
                repo.owner,
                repo.name,
                issue.number,
                "config-error",
                config_error_body(config.error or "", label=label),
            )
            return f"config error: {config.error}", None
        finished = await self._finished_job(f"github:{repo.owner}/{repo.name}#{issue.number}")
        if finished is not None:
            return f"job {finished} already finished", finished
        await gh.react_eyes(repo.owner, repo.name, issue.number)
        subject = Subject(
            repo.owner,
            repo.name,
            issue.number,
            repo.installation_id,
            repo.default_branch,
            issue.title,
            sender.login,
            config.project.humans.decider,
            label,
        )
        try:
            job_id = await self._start(gh, subject, config, body=issue.body)
        except SandboxError as exc:  # not retried: nothing changes until the operator acts
            key, text = "no-sandbox", no_sandbox_body(str(exc), label=label)
            await self._comment_once(gh, repo.owner, repo.name, issue.number, key, text)
            return f"refused: {exc}", None
        return f"job {job_id}", job_id

    async def _start(
        self, gh: Installation, subject: Subject, config: RepoConfig, *, body: str
    ) -> int:
        project = config.project
        assert project is not None
        full = f"{check_owner(subject.owner)}/{check_repo_name(subject.repo)}"  # URL- and path-safe
        key = f"github:{full}#{subject.number}"
        self.office.add_project(project, learnings=config.learnings)
        brief = (
            f"Job from GitHub issue {full}#{subject.number} (project {project.name}), "
            f"started by @{subject.requester}: {subject.title}\n\n"
            f"{quote(body or subject.title, tag='issue')}\n"
            "Hand it to the project's lead and reply with the outcome: what changed and why."
        )
        name = slug(subject.title) or "job"
        source = JobSource(
            repo=f"github/{full}",
            source=f"{self.settings.server_url.rstrip('/')}/{full}.git",
            start=f"refs/remotes/origin/{subject.default_branch}",
            branch=lambda _: f"teaparty/job-{subject.number}-{name}",
            slug=name,
        )
        job = await self.office.start_job(
            project=project.name,
            key=key,
            title=subject.title,
            brief=brief,
            source=source,
            project_text=config.text,
            learnings=config.learnings,
        )
        await self.office.records.link(job.job_id, "github", subject.to_json())
        if not job.created and (retried := await self.driver.retry(job.job_id)):
            log.info("job %d: retrying %s", job.job_id, ", ".join(retried))
        return job.job_id

    async def _finished_job(self, key: str) -> int | None:
        """The issue's job if it has ended (its pull request exists): nothing to start again."""
        job = await self.office.records.job_for_key(key)
        return None if job is None or job.state == "active" else job.job_id

    async def on_comment(self, command: CommentAdded) -> tuple[str, int | None]:
        """The decider's reply answers the job's oldest open question."""
        repo = command.repo
        key = f"github:{repo.owner}/{repo.name}#{command.issue.number}"
        job = await self.office.records.job_for_key(key)
        linked = None if job is None else await self.office.records.subject(job.job_id, "github")
        if job is None or linked is None:
            return "ignored: no job on this issue", None
        job_id, subject = job.job_id, Subject.from_json(linked)
        gates = await self.office.open_gates(job_id)
        if not gates:
            return "ignored: the job has no open question", job_id
        if command.author.login.lower() != subject.decider.lower():
            return f"ignored: {command.author.login} is not the decider", job_id
        answer = command.body.strip() or "(empty reply)"
        gate = await self.office.answer_gate(
            gates[0].gate_id, text=answer, answered_by=command.author.login
        )
        return f"answered gate {gate.gate_id}", job_id

    async def restore_project(self, job_id: int) -> None:
        """A job from before jobs kept their project file: read it again from its repository.

        Its subject may hold the text; otherwise the repository's default branch has it now
        (the defaults, with the job's decider, when GitHub cannot be asked).
        """
        linked = await self.office.records.subject(job_id, "github")
        if linked is None:
            raise ConfigError((ConfigIssue(f"job {job_id}", None, "", "no project stored"),))
        subject = Subject.from_json(linked)
        text, learnings = subject.project_yaml, subject.learnings
        if text is None:
            try:
                gh = await self.github.installation(subject.installation_id)
                s = subject
                config = await self._config(gh, s.owner, s.repo, s.default_branch, s.decider)
                text, learnings = config.text, config.learnings
            except BotError as exc:
                log.warning("job %d: project file not read again (%s); the defaults", job_id, exc)
        await self.office.restore_project(
            job_id, text or _default_text(subject.decider), learnings=learnings
        )

    async def _permission(self, gh: Installation, owner: str, repo: str, login: str) -> str:
        key = (f"{owner}/{repo}".lower(), login.lower())
        cached = self._permissions.get(key)
        if cached is not None and time.monotonic() - cached[1] < CACHE_TTL_S:
            return cached[0]
        permission = await gh.permission(owner, repo, login)
        self._permissions[key] = (permission, time.monotonic())
        return permission

    async def _config(
        self, gh: Installation, owner: str, repo: str, branch: str, requester: str
    ) -> RepoConfig:
        key = (f"{owner}/{repo}".lower(), branch)
        cached = self._configs.get(key)
        if cached is not None and time.monotonic() - cached[1] < CACHE_TTL_S:
            return _with_decider(cached[0], requester, self.office, name=project_name(owner, repo))
        text = await gh.file(owner, repo, ".teaparty/project.yaml", ref=branch)
        learnings = await gh.file(owner, repo, ".teaparty/learnings.md", ref=branch)
        config = _load(text, learnings, owner=owner, repo=repo, office=self.office)
        self._configs[key] = (config, time.monotonic())
        return _with_decider(config, requester, self.office, name=project_name(owner, repo))

    async def _comment_once(
        self, gh: Installation, owner: str, repo: str, number: int, key: str, body: str
    ) -> None:
        identity = await self.github.identity()
        if await find_comment(gh, identity, owner, repo, number, key) is None:
            await gh.comment(owner, repo, number, body)


def project_name(owner: str, repo: str) -> str:
    """A repository's project name: unique per repository, usable in agent addresses."""
    return slug(f"{owner}-{repo}", limit=80)


def _default_text(decider: str) -> str:
    return f"humans: {{decider: {json.dumps(decider)}}}\n"


def _load(
    text: str | None, learnings: str | None, *, owner: str, repo: str, office: Office
) -> RepoConfig:
    if text is None:
        return RepoConfig(None, None, learnings)  # no file: the defaults, decided per job
    source = f"{owner}/{repo}:.teaparty/project.yaml"
    try:
        project = load_project(text, org=office.org, source=source, default_name="")
    except ConfigError as exc:
        return RepoConfig(None, str(exc), learnings)
    return RepoConfig(
        project.model_copy(update={"name": project_name(owner, repo)}), None, learnings, text
    )


def _with_decider(config: RepoConfig, requester: str, office: Office, *, name: str) -> RepoConfig:
    """With no project file, the project runs on defaults and its decider is the requester."""
    if config.project is not None or config.error is not None:
        return config
    text = _default_text(requester)
    project = load_project(text, org=office.org, source="(defaults)", default_name=name)
    return RepoConfig(project, None, config.learnings, text)
