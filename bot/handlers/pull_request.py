"""pull_request.closed, .converted_to_draft, .ready_for_review, .reopened: what becomes of the
job whose pull request it is.

The handler gathers the facts (the job of the pull request, by its repository and number;
the issue it serves; for a pull request closed unmerged, whether its head branch still
exists), `decide_pull` turns them into actions with no I/O, and `perform`
carries them out. GitHub closes a pull request whose head branch is deleted and says no
more, so an unmerged close is told apart by asking GitHub for the branch (404: gone).

    merged            -> `merged`: the job ends complete, its worktrees and task branches go
    closed, branch    -> `closed`: the job rests, `/reopen` on the issue opens it again
    closed, no branch -> `gone`: the job ends, and says so on its issue
    draft / ready     -> `draft` (a running round is held) / `open` (held no more; a waiting
                         round starts; checks that completed on the head while it was a
                         draft are decided now); reopened -> `open` (or `draft`, as GitHub
                         keeps it)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from bot.errors import BotError
from bot.github.subject import Subject
from bot.github.tracking import pull_gone_body
from bot.handlers.actions import Action, EndPull, Ignore, Outcome, PostOnce, SetPull
from bot.handlers.app_context import AppContext
from bot.handlers.ci import decide_deferred
from bot.handlers.deliveries import PullChanged
from bot.handlers.perform import perform
from orchestrator.api import JobRecord, Pull

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PullFacts:
    """What deciding on a pull request's change needs beyond the payload."""

    job: JobRecord | None = None  # the job whose pull request it is, if any
    pull: Pull | None = None  # that pull request as the store has it
    subject: Subject | None = None  # the issue the job serves
    branch_exists: bool | None = None  # asked only when it was closed unmerged


async def on_pull_request(command: PullChanged, ctx: AppContext) -> Outcome:
    """Bring the job of the pull request in line with what happened to it."""
    facts = await gather(command, ctx)
    number = facts.subject.number if facts.subject else command.number
    actions = decide_pull(command, facts)
    outcome = await perform(ctx, actions, repo=command.repo, number=number)
    for action in actions:  # ready again: what CI said of its head while a draft counts now
        if isinstance(action, SetPull) and action.state == "open":
            try:
                await decide_deferred(ctx, action.job_id)
            except BotError as exc:  # the pull request's change stands; the App's sweep
                # decides at its next look (a runner, when the pull request is next ready)
                log.warning("job %d: CI of its draft not decided yet: %s", action.job_id, exc)
    return outcome


async def gather(command: PullChanged, ctx: AppContext) -> PullFacts:
    """Read the job of the pull request from the store; ask GitHub for its head branch only
    when it was closed unmerged (one call)."""
    repo = command.repo
    job_id = await ctx.ports.reviews.job_of_pull(f"github/{repo.full_name}", command.number)
    if job_id is None:
        return PullFacts()
    job = await ctx.ports.records.job(job_id)
    pull = await ctx.ports.reviews.pull(job_id)
    linked = await ctx.ports.records.subject(job_id, "github")
    subject = None if linked is None else Subject.from_json(linked)
    exists = None
    if command.action == "closed" and not command.merged:
        gh = await ctx.installation(repo)
        exists = await gh.branch_exists(repo.owner, repo.name, command.head)
    return PullFacts(job, pull, subject, exists)


def decide_pull(command: PullChanged, facts: PullFacts) -> tuple[Action, ...]:
    """What to do about a change of a pull request; performs no I/O."""
    job, by = facts.job, command.sender.login
    if job is None or facts.subject is None:
        return (Ignore(f"pull request #{command.number} is no job's"),)
    job_id = job.job_id
    if command.action == "closed" and command.merged:
        return (EndPull(job_id, "merged", by),)
    if command.action == "closed" and facts.branch_exists is False:
        key = f"pull-gone:{job_id}"
        body = pull_gone_body(
            key, number=command.number, branch=command.head, label=facts.subject.trigger_label
        )
        return (EndPull(job_id, "gone", by), PostOnce(key, body))
    if command.action == "closed":
        return (EndPull(job_id, "closed", by),)
    if facts.pull is not None and facts.pull.state in ("merged", "gone"):
        return (Ignore(f"job {job_id}'s pull request has ended ({facts.pull.state})", job_id),)
    if command.action == "converted_to_draft":
        return (SetPull(job_id, "draft", by),)
    if command.action == "reopened" and command.draft:
        return (SetPull(job_id, "draft", by),)
    return (SetPull(job_id, "open", by),)  # ready for review, or reopened
