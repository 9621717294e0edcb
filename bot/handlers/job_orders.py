"""How a decider's orders and what follows a job's label are carried out, one coroutine each.

`control` carries out a decider's order (`/pause`, `/withdraw`, `/reopen`, ...); `end_pull`
(its pull request merged, closed, or gone with its branch), `set_pull` (open again, or a
draft), `withdraw_job` (its issue closed, its label removed) and `leave` (the App
uninstalled) what follows a job's label. Each brings the job's comments in line with the
store (`JobDriver.sync`) after a change. perform.py's table names the performer of each
action type.

A draft holds a job whose review round runs (a paused job makes no model call) under a
name that says so, and only that hold is released when the pull request is ready again: a
decider's own `/pause` stays.
"""

from __future__ import annotations

import contextlib

from bot.errors import GitHubError
from bot.github.subject import Subject
from bot.github.tracking import DRAFT_HOLD, clarify_body
from bot.handlers.actions import (
    Control,
    EndPull,
    LeaveRepos,
    Outcome,
    PostOnce,
    SetPull,
    WithdrawJob,
)
from bot.handlers.app_context import AppContext
from bot.handlers.payload_fields import Repo
from bot.handlers.performers import post_once
from orchestrator.api import (
    ControlError,
    JobNotFoundError,
    JobStateError,
    forget_repository,
    pull_ended,
    withdraw,
)


async def control(ctx: AppContext, action: Control, repo: Repo, number: int) -> Outcome:
    """Carry out a decider's order, then bring the tracking comment in line."""
    orders, job_id = ctx.ports.orders, action.job_id
    try:
        if action.order == "pause":
            done = "paused" if await orders.pause(job_id, by=action.by) else "already paused"
        elif action.order == "resume":
            done = "resumed" if await orders.resume(job_id) else "was not paused"
        elif action.order == "steer":
            given = await orders.steer(job_id, action.text, by=action.by, ref=action.ref)
            done = "steered" if given else "already steered by this comment"
        elif action.order == "withdraw":
            done = await withdrawn(ctx, job_id, by=f"{action.by} (/withdraw)")
        elif action.order == "budget":
            usd = float(action.text)  # the amount, as the decision read it
            gate = await orders.set_budget(job_id, usd, by=action.by, ref=action.ref)
            done = f"budget set to ${usd:.2f}"
            done += f", approving question {gate.gate_id}" if gate is not None else ""
        elif action.order == "reopen":
            done = await reopen_pull(ctx, job_id)
        elif action.order == "forget":
            forgot = await ctx.office.forget_learning(job_id, action.text, by=action.by)
            done = f"learning {action.text} " + ("forgotten" if forgot else "already forgotten")
        elif action.order == "remember":
            kept = await ctx.office.remember(job_id, action.text, by=action.by, ref=action.ref)
            done = "preference kept" if kept else "preference already kept"
        else:
            done = "status shown"
    except (ControlError, JobStateError) as exc:  # ended, or no lead: say so to the asker
        key = f"control:{action.ref}"
        body = f"@{action.by}, `/{action.order}` did nothing: {exc}."
        await post_once(ctx, PostOnce(key, clarify_body(key, body)), repo, number)
        return f"ignored: {exc}", job_id
    await ctx.driver.sync(job_id)
    return f"job {job_id} {done} by {action.by}", job_id


async def withdrawn(ctx: AppContext, job_id: int, *, by: str) -> str:
    """End the job as cancelled and give back its worktrees (its branch stays); `by`
    says who asked and how, for its log. What changed, said short."""
    done = await withdraw(ctx.office, job_id, by=by)
    await ctx.office.close_workspace(job_id)
    return done.describe().removeprefix(f"job {job_id} ")


async def end_pull(ctx: AppContext, action: EndPull) -> Outcome:
    """Record that the job's pull request was merged, closed or is gone."""
    ended = await pull_ended(ctx.office, action.job_id, action.state)
    await ctx.driver.sync(action.job_id)
    return f"{ended.describe()} (by {action.by})", action.job_id


async def set_pull(ctx: AppContext, action: SetPull) -> Outcome:
    """Record the job's pull request open or a draft; a draft holds a running round."""
    orders, job_id = ctx.ports.orders, action.job_id
    said = f"job {job_id}: pull request {'a draft' if action.state == 'draft' else 'open'}"
    if action.state == "draft":
        with contextlib.suppress(ControlError):  # a job at rest has no work to hold
            if await orders.pause(job_id, by=f"{action.by} {DRAFT_HOLD}"):
                said += ", the job paused"
    elif (held := await orders.paused_by(job_id)) is not None and held.endswith(DRAFT_HOLD):
        await orders.resume(job_id)
        said += ", the job resumed"
    await ctx.ports.reviews.pull_state(job_id, action.state)  # open: a waiting round starts
    await ctx.driver.sync(job_id)
    return f"{said} (by {action.by})", job_id


async def withdraw_job(ctx: AppContext, action: WithdrawJob) -> Outcome:
    """Withdraw the job as `/withdraw` does, unless it ended meanwhile."""
    try:
        done = await withdrawn(ctx, action.job_id, by=f"{action.by} ({action.why})")
    except JobStateError as exc:  # it ended meanwhile
        return f"ignored: {exc}", action.job_id
    await ctx.driver.sync(action.job_id)
    return f"job {action.job_id} {done} ({action.by} {action.why})", action.job_id


async def leave(ctx: AppContext, action: LeaveRepos) -> Outcome:
    """Withdraw the jobs without a word (the App can no longer reach their issues), then
    delete each repository's folder: its mirror, job repositories and worktrees."""
    count = 0
    for job_id in action.jobs:
        by = f"{action.by} (the App was removed from the repository)"
        try:
            await withdraw(ctx.office, job_id, by=by, announce=False)
        except (JobStateError, JobNotFoundError):  # it ended meanwhile
            continue
        count += 1
    deleted = [
        name for name in action.repos if await forget_repository(ctx.office, f"github/{name}")
    ]
    said = (
        f"the App left {', '.join(action.repos) or 'no repository it knew'}: {count} job(s) "
        f"withdrawn, {len(deleted)} repository folder(s) deleted"
    )
    return said, None


async def reopen_pull(ctx: AppContext, job_id: int) -> str:
    """`/reopen`: open the job's closed pull request again while its branch exists (the
    pull state is `open` again); ControlError says why it cannot be."""
    pull = await ctx.ports.reviews.pull(job_id)
    if pull is None:
        raise ControlError(f"job {job_id} has no pull request")
    if pull.state in ("open", "draft"):
        return f"left pull request #{pull.number} as it is (open)"
    if pull.state == "merged":
        raise ControlError(
            f"pull request #{pull.number} was merged; add the label again for a new job"
        )
    linked = await ctx.ports.records.subject(job_id, "github")
    if linked is None:
        raise ControlError(f"job {job_id} was not started on GitHub")
    s = Subject.from_json(linked)
    branch = (await ctx.driver.status(job_id)).branch
    gh = await ctx.github.installation(s.installation_id)
    if not branch or not await gh.branch_exists(s.owner, s.repo, branch):
        if pull.state != "gone":
            await pull_ended(ctx.office, job_id, "gone")
            await ctx.driver.sync(job_id)
        raise ControlError(
            f"its branch `{branch}` was deleted, so pull request #{pull.number} cannot be "
            "opened again; add the label again for a new job"
        )
    try:
        reopened = await gh.reopen_pull(s.owner, s.repo, pull.number)
    except GitHubError as exc:
        if exc.status != 422:
            raise
        raise ControlError(f"GitHub would not reopen pull request #{pull.number}: {exc}") from None
    await ctx.ports.reviews.pull_state(job_id, "draft" if reopened.get("draft") else "open")
    return f"reopened pull request #{pull.number}"
