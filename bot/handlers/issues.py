"""issues.labeled: the trigger label, added by someone with write access, starts the issue's job;
issues.edited: an edit of a running job's issue is put to its decider.

The handler gathers the facts (the repository's config, the sender's permission, the
issue's job), `decide_label` turns them into actions with no I/O, and the context performs
them. Anyone else hears once why nothing started; a broken project file is quoted once; a
job that failed is retried. After a job finished (done or cancelled), the label starts the
issue's next job, on a branch of its own (`github:owner/repo#N/2`, `teaparty/job-N-2-slug`),
unless that job is done with its pull request still open: review rounds go on there. An edit of the
title or text of an issue whose job is running (by anyone but the App, whose own deliveries
the parser drops) parks the job at an `intent` gate showing the difference
(orchestrator/bus/revisions.py): whoever edited it, the decider says which text the job
works to.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from bot.github.sanitizer import quote
from bot.github.subject import Subject
from bot.github.tracking import config_error_body, no_sandbox_body, refusal_body
from bot.handlers.actions import (
    Action,
    AutoProxy,
    Ignore,
    Outcome,
    PostOnce,
    React,
    Report,
    ReviseIssue,
    StartJob,
    job_key,
    job_ordinal,
)
from bot.handlers.app_context import AppContext
from bot.handlers.deliveries import IssueEdited, LabelAdded
from bot.handlers.perform import perform
from bot.handlers.repos import RepoConfig, trigger_label
from orchestrator.api import JobRecord, Project, ProxySettings, Pull, SandboxError

WRITERS = frozenset({"admin", "write"})  # GitHub maps `maintain` to `write`
OPEN = ("open", "draft")  # a pull request a finished job still answers for


@dataclass(frozen=True)
class LabelFacts:
    """What deciding on a label needs beyond the payload; a fact not needed is not asked for."""

    config: RepoConfig | None = None  # None: not read (a pull request, or no installation)
    permission: str | None = None  # the sender's; None: not asked (not the trigger label)
    job: JobRecord | None = None  # the issue's newest job, if it ever had one
    pull: Pull | None = None  # that job's pull request, if it opened one


async def on_issues_labeled(command: LabelAdded, ctx: AppContext) -> Outcome:
    """Start (or retry) the issue's job if the label is the trigger and the sender may."""
    facts = await gather(command, ctx)
    repo, number = command.repo, command.issue.number
    try:
        return await perform(ctx, decide_label(command, facts), repo=repo, number=number)
    except SandboxError as exc:  # not retried: nothing changes until the operator acts
        refusal = no_sandbox(str(exc), label=trigger_label(facts.config))
        return await perform(ctx, refusal, repo=repo, number=number)


async def gather(command: LabelAdded, ctx: AppContext) -> LabelFacts:
    """Read what `decide_label` will need, and no more: each read is a call to GitHub."""
    repo, sender = command.repo, command.sender
    if command.issue.is_pull_request or repo.installation_id is None:
        return LabelFacts()
    gh = await ctx.installation(repo)
    config = await ctx.repos.config(
        gh, repo.owner, repo.name, branch=repo.default_branch, requester=sender.login
    )
    if command.label not in (trigger_label(config), auto_label(config)):
        return LabelFacts(config)
    permission = await ctx.repos.permission(gh, repo.owner, repo.name, sender.login)
    job = await ctx.ports.records.latest_for_key(
        job_key(repo.owner, repo.name, command.issue.number)
    )
    pull = None if job is None else await ctx.ports.reviews.pull(job.job_id)
    return LabelFacts(config, permission, job, pull)


def decide_label(command: LabelAdded, facts: LabelFacts) -> tuple[Action, ...]:
    """What to do about a label added to an issue; performs no I/O."""
    repo, issue, sender = command.repo, command.issue, command.sender
    if issue.is_pull_request:
        return (Ignore("labels on pull requests start nothing"),)
    if repo.installation_id is None:
        return (Ignore("the delivery names no installation"),)
    label = trigger_label(facts.config)
    if command.label == auto_label(facts.config) and command.label != label:
        return _auto(command, facts)
    if command.label != label:
        return (Ignore(f"label {command.label!r} is not the trigger {label!r}"),)
    if facts.permission not in WRITERS:
        return (
            PostOnce(f"refused:{sender.login.lower()}", refusal_body(sender.login, label=label)),
            Report(f"refused: {sender.login} has no write access"),
        )
    config = facts.config or RepoConfig(None, None)
    if config.project is None:
        return (
            PostOnce("config-error", config_error_body(config.error or "", label=label)),
            Report(f"config error: {config.error}"),
        )
    ordinal = 1
    if facts.job is not None and facts.job.state != "active":
        job = facts.job
        if job.state == "complete" and facts.pull is not None and facts.pull.state in OPEN:
            why = f"job {job.job_id} is done and its pull request #{facts.pull.number} is open"
            return (Report(f"{why}: review it there", job.job_id),)
        ordinal = job_ordinal(job.job_key) + 1  # finished: the issue's next job
    start = _start(command, config, config.project, installation_id=repo.installation_id)
    return (React("eyes"), replace(start, ordinal=ordinal))


async def on_issues_edited(command: IssueEdited, ctx: AppContext) -> Outcome:
    """Put an edit of a running job's issue to its decider."""
    repo = command.repo
    job = await ctx.ports.records.latest_for_key(
        job_key(repo.owner, repo.name, command.issue.number)
    )
    actions = decide_edit(command, job)
    return await perform(ctx, actions, repo=repo, number=command.issue.number)


def decide_edit(command: IssueEdited, job: JobRecord | None) -> tuple[Action, ...]:
    """What to do about an edit of an issue; performs no I/O."""
    if command.issue.is_pull_request:
        return (Ignore("edits of pull requests are not acted on"),)
    if job is None:
        return (Ignore("the issue has no job"),)
    if job.state != "active":
        return (Ignore(f"job {job.job_id} has ended ({job.state})", job.job_id),)
    issue = command.issue
    return (
        ReviseIssue(
            job.job_id,
            issue.title,
            issue.body,
            by=command.sender.login,
            edited_at=command.edited_at,
            before_title=command.before_title,
            before_body=command.before_body,
        ),
    )


def auto_label(config: RepoConfig | None) -> str:
    """The label that lets the proxy answer every eligible gate of the issue's job."""
    project = config.project if config else None
    return project.proxy.auto_label if project else ProxySettings().auto_label


def _auto(command: LabelAdded, facts: LabelFacts) -> tuple[Action, ...]:
    """A writer's `teaparty-auto` label: the proxy answers every eligible gate of the job."""
    sender = command.sender.login
    if facts.permission not in WRITERS:
        return (Ignore(f"{sender} may not let the proxy decide (no write access)"),)
    if facts.job is None or facts.job.state != "active":
        return (Ignore(f"label {command.label!r}: the issue has no running job"),)
    return (AutoProxy(facts.job.job_id, by=sender), React("eyes"))


def _start(
    command: LabelAdded, config: RepoConfig, project: Project, *, installation_id: int
) -> StartJob:
    repo, issue = command.repo, command.issue
    subject = Subject(
        repo.owner,
        repo.name,
        issue.number,
        installation_id,
        repo.default_branch,
        issue.title,
        command.sender.login,
        project.humans.decider,
        command.label,  # the trigger: decide_label checked
    )
    return StartJob(
        subject,
        project,
        brief(subject, project, body=issue.body),
        project_text=config.text,
        issue_body=issue.body,
    )


def brief(subject: Subject, project: Project, *, body: str) -> str:
    """The job's brief for the office manager: where it comes from, and the issue, quoted."""
    full = f"{subject.owner}/{subject.repo}"
    return (
        f"Job from GitHub issue {full}#{subject.number} (project {project.name}), "
        f"started by @{subject.requester}: {subject.title}\n\n"
        f"{quote(body or subject.title, tag='issue')}\n"
        "Hand it to the project's lead and reply with the outcome: what changed and why."
    )


def no_sandbox(reason: str, *, label: str) -> tuple[Action, ...]:
    """What to do when the job's agents need a sandbox this host cannot give; no I/O."""
    return (
        PostOnce("no-sandbox", no_sandbox_body(reason, label=label)),
        Report(f"refused: {reason}"),
    )
