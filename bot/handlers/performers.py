"""How the actions on a delivery's issue and its gates are carried out, one coroutine each.

They add no decisions of their own: a comment is posted once by looking for the App's marker
first, and a job is started (or, for an issue whose job exists, its failures retried) the way
the action says. Each answers the delivery's outcome, or None when it says nothing of it
(`post_once`, `react`). perform.py's table names the performer of each action type.
"""

from __future__ import annotations

import logging

from bot.github.forge import find_comment
from bot.github.tracking import clarify_body
from bot.handlers.actions import (
    Advise,
    AnswerGate,
    AutoProxy,
    Outcome,
    Override,
    PostOnce,
    React,
    Reassign,
    ReviseIssue,
    StartJob,
    job_key,
)
from bot.handlers.app_context import AppContext
from bot.handlers.payload_fields import Repo, check_owner, check_repo_name
from orchestrator.api import (
    GateClosedError,
    IssueText,
    JobSource,
    NotProxyAnsweredError,
    slug,
)

log = logging.getLogger(__name__)


async def post_once(ctx: AppContext, action: PostOnce, repo: Repo, number: int) -> None:
    """Comment on the issue unless the App's comment with the action's marker is there."""
    gh = await ctx.installation(repo)
    identity = await ctx.github.identity()
    if await find_comment(gh, identity, repo.owner, repo.name, number, action.key) is None:
        await gh.comment(repo.owner, repo.name, number, action.body, identity=identity)


async def react(ctx: AppContext, action: React, repo: Repo, number: int) -> None:
    """React to the issue, or to one of its comments."""
    gh = await ctx.installation(repo)
    if action.comment_id is None:
        await gh.react(repo.owner, repo.name, action.content, number=number)
    else:
        await gh.react(repo.owner, repo.name, action.content, comment_id=action.comment_id)


async def start(ctx: AppContext, action: StartJob, repo: Repo, number: int) -> Outcome:
    """Start the issue's job, or retry what failed in the one it has."""
    subject, project = action.subject, action.project
    full = f"{check_owner(subject.owner)}/{check_repo_name(subject.repo)}"  # URL- and path-safe
    name = slug(subject.title) or "job"
    source = JobSource(
        repo=f"github/{full}",
        source=f"{ctx.settings.server_url.rstrip('/')}/{full}.git",
        start=f"refs/remotes/origin/{subject.default_branch}",
        branch=lambda _: job_branch(subject.number, action.ordinal, name),
        slug=name,
    )
    ctx.office.add_project(project)
    job = await ctx.office.start_job(
        project=project.name,
        key=job_key(subject.owner, subject.repo, subject.number, action.ordinal),
        title=subject.title,
        brief=action.brief,
        source=source,
        project_text=action.project_text,
    )
    await ctx.ports.records.link(job.job_id, "github", subject.to_json())
    started_from = IssueText(subject.title, action.issue_body)
    await ctx.ports.revisions.started(job.job_id, started_from)  # kept once
    if not job.created and (retried := await ctx.driver.retry(job.job_id)):
        log.info("job %d: retrying %s", job.job_id, ", ".join(retried))
    return f"job {job.job_id}", job.job_id


def job_branch(number: int, ordinal: int, name: str) -> str:
    """The branch of issue `number`'s first job (`teaparty/job-N-slug`), or of its k-th
    (`teaparty/job-N-k-slug`): a new job never takes an earlier one's branch."""
    return (
        f"teaparty/job-{number}-{name}"
        if ordinal == 1
        else f"teaparty/job-{number}-{ordinal}-{name}"
    )


async def answer(ctx: AppContext, action: AnswerGate, repo: Repo, number: int) -> Outcome:
    """Record the decider's reply as the gate's answer."""
    try:
        gate = await ctx.office.answer_gate(
            action.gate_id, text=action.text, answered_by=action.answered_by, ref=action.ref
        )
    except GateClosedError as exc:  # a race with the same comment, or another answer
        return f"ignored: {exc}", action.job_id
    return f"answered gate {gate.gate_id}", action.job_id


async def advise(ctx: AppContext, action: Advise, repo: Repo, number: int) -> Outcome:
    """Hand an advisor's reply to the agent that asked the gate."""
    try:
        await ctx.office.advise(action.gate_id, text=action.text, advisor=action.advisor)
    except GateClosedError as exc:
        return f"ignored: {exc}", action.job_id
    return f"advice on gate {action.gate_id} from {action.advisor}", action.job_id


async def reassign(ctx: AppContext, action: Reassign, repo: Repo, number: int) -> Outcome:
    """Hand the gate over if the new decider can write; say which it was."""
    gh = await ctx.installation(repo)
    if await gh.permission(repo.owner, repo.name, action.login) not in ("admin", "write"):
        key = f"decider-refused:{action.gate_id}:{action.login.lower()}"
        body = (
            f"@{action.by}, @{action.login} has no write access to this repository, so "
            f"question {action.gate_id} stays yours to answer."
        )
        await post_once(ctx, PostOnce(key, clarify_body(key, body)), repo, number)
        return f"ignored: {action.login} may not decide", action.job_id
    try:
        await ctx.office.reassign_gate(action.gate_id, decider=action.login)
    except GateClosedError as exc:
        return f"ignored: {exc}", action.job_id
    key = f"decider:{action.gate_id}:{action.login.lower()}"
    body = f"@{action.login}, @{action.by} handed question {action.gate_id} to you to answer."
    await post_once(ctx, PostOnce(key, clarify_body(key, body)), repo, number)
    return f"gate {action.gate_id} handed to {action.login}", action.job_id


async def revise(ctx: AppContext, action: ReviseIssue, repo: Repo, number: int) -> Outcome:
    """Record the issue's new text; an edit the job does not work to yet is asked about."""
    before = None
    if action.before_title is not None or action.before_body is not None:
        before = IssueText(
            action.title if action.before_title is None else action.before_title,
            action.body if action.before_body is None else action.before_body,
        )
    edited = await ctx.ports.revisions.edited(
        action.job_id,
        IssueText(action.title, action.body),
        by=action.by,
        edited_at=action.edited_at,
        before=before,
    )
    if edited.outcome in ("asked", "reverted"):
        await ctx.driver.sync(action.job_id)
    if edited.outcome == "asked":
        return f"issue edited by {action.by}: gate {edited.gate_id}", action.job_id
    return f"issue edited by {action.by}: {edited.outcome}", action.job_id


async def override(ctx: AppContext, action: Override, repo: Repo, number: int) -> Outcome:
    """Record the decider's correction of the proxy and tell the asking agent."""
    try:
        await ctx.ports.proxy.record_override(
            action.gate_id, action.answer, action.by, ref=action.ref
        )
    except NotProxyAnsweredError as exc:
        key = f"control:{action.ref}"
        body = f"@{action.by}, `/override` did nothing: {exc}."
        await post_once(ctx, PostOnce(key, clarify_body(key, body)), repo, number)
        return f"ignored: {exc}", action.job_id
    await ctx.driver.sync(action.job_id)
    return f"gate {action.gate_id}: the proxy overridden by {action.by}", action.job_id


async def auto_proxy(ctx: AppContext, action: AutoProxy, repo: Repo, number: int) -> Outcome:
    """Let the proxy answer every eligible gate of the job."""
    await ctx.ports.proxy.set_auto(action.job_id, on=True, by=action.by)
    await ctx.driver.sync(action.job_id)
    return f"job {action.job_id}: the proxy decides (by {action.by})", action.job_id
