"""issues.closed and issues.unlabeled: an issue closed, or its trigger label removed, while
its job runs withdraws the job as `/withdraw` does.

The handler gathers the facts (the issue's newest job, the label that started it, whether it
is stopped by an error, and, when a running job has a pull request, whether GitHub says it is
merged), `decide_closed` / `decide_unlabeled` turn them into actions with no I/O, and
`perform` carries them out. A job that finished is left alone: a pull
request that says `Closes #N` closes its issue once merged, after the job came to rest. The
one race: GitHub may send the issue's close before the merge, while a review round runs;
then the job ends as merged, not withdrawn. Removing the label from a job stopped by an error
withdraws nothing: adding it again is how a stopped job is retried.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.github.subject import Subject
from bot.handlers.actions import Action, EndPull, Ignore, Outcome, WithdrawJob, job_key
from bot.handlers.app_context import AppContext
from bot.handlers.deliveries import IssueClosed, LabelRemoved
from bot.handlers.perform import perform
from orchestrator.api import JobRecord


@dataclass(frozen=True)
class IssueFacts:
    """What deciding on a closed issue or a removed label needs beyond the payload."""

    job: JobRecord | None = None  # the issue's newest job, if it had one
    trigger: str | None = None  # the label that started it
    failed: bool = False  # it is stopped by an error
    merged: bool = False  # GitHub says its pull request is merged


async def on_issues_closed(command: IssueClosed, ctx: AppContext) -> Outcome:
    """Withdraw the issue's running job."""
    facts = await gather(command, ctx)
    actions = decide_closed(command, facts)
    return await perform(ctx, actions, repo=command.repo, number=command.issue.number)


async def on_issues_unlabeled(command: LabelRemoved, ctx: AppContext) -> Outcome:
    """Withdraw the issue's running job if its trigger label was removed."""
    facts = await gather(command, ctx)
    actions = decide_unlabeled(command, facts)
    return await perform(ctx, actions, repo=command.repo, number=command.issue.number)


async def gather(command: IssueClosed | LabelRemoved, ctx: AppContext) -> IssueFacts:
    """Read the issue's job from the store; ask GitHub about its pull request only when the
    job runs and has one (a review round)."""
    repo = command.repo
    key = job_key(repo.owner, repo.name, command.issue.number)
    job = await ctx.ports.records.latest_for_key(key)
    linked = None if job is None else await ctx.ports.records.subject(job.job_id, "github")
    if job is None or linked is None or job.state != "active":
        return IssueFacts(job)
    trigger = Subject.from_json(linked).trigger_label
    failed = bool(await ctx.office.failures(job.job_id))
    pull = await ctx.ports.reviews.pull(job.job_id)
    merged = False
    if pull is not None and isinstance(command, IssueClosed):
        gh = await ctx.installation(repo)
        merged = bool((await gh.pull(repo.owner, repo.name, pull.number)).get("merged"))
    return IssueFacts(job, trigger, failed, merged)


def decide_closed(command: IssueClosed, facts: IssueFacts) -> tuple[Action, ...]:
    """What to do about a closed issue; performs no I/O."""
    job, by = facts.job, command.sender.login
    if command.issue.is_pull_request:
        return (Ignore("a pull request's close is pull_request.closed"),)
    if job is None:
        return (Ignore("the issue has no job"),)
    if job.state != "active":
        return (Ignore(f"job {job.job_id} has ended ({job.state})", job.job_id),)
    if facts.merged:  # its pull request's merge closed it; that delivery may come later
        return (EndPull(job.job_id, "merged", by),)
    return (WithdrawJob(job.job_id, by, "closed the issue"),)


def decide_unlabeled(command: LabelRemoved, facts: IssueFacts) -> tuple[Action, ...]:
    """What to do about a label taken off an issue; performs no I/O."""
    job, by = facts.job, command.sender.login
    if job is None:
        return (Ignore("the issue has no job"),)
    if job.state != "active":
        return (Ignore(f"job {job.job_id} has ended ({job.state})", job.job_id),)
    if command.label != facts.trigger:
        return (Ignore(f"label {command.label!r} did not start job {job.job_id}", job.job_id),)
    if facts.failed:
        why = f"job {job.job_id} is stopped by an error: adding the label again retries it"
        return (Ignore(why, job.job_id),)
    return (WithdrawJob(job.job_id, by, f"removed the `{command.label}` label"),)
