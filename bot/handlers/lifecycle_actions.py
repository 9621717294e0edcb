"""What a decision about a job's life after its label does, and the performer of such decisions.

`EndPull` (its pull request merged, closed, or gone with its branch), `SetPull` (open again,
or a draft), `WithdrawJob` (its issue closed, its label removed) and `LeaveRepos` (the App
uninstalled) join the handlers' usual actions; `perform` carries a decision out in order,
these here and the rest through `AppContext.perform`, and brings the job's comments in line
with the store (`JobDriver.sync`) after each change. `/reopen`, a decider's order taken by
`AppContext`, is `reopen_pull`.

A draft holds a job whose review round runs (a paused job makes no model call) under a
name that says so, and only that hold is released when the pull request is ready again: a
decider's own `/pause` stays.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from bot.errors import GitHubError
from bot.github.client import GitHubApp
from bot.github.subject import Subject
from bot.github.tracking import DRAFT_HOLD
from bot.handlers.actions import Action, Ignore, Outcome, PostOnce, React, Report
from bot.handlers.payloads import Repo
from orchestrator.api import (
    ControlError,
    JobDriver,
    JobNotFoundError,
    JobStateError,
    Office,
    Ports,
    forget_repository,
    pull_ended,
    withdraw,
)


class AppContext(Protocol):
    """What these actions need of the App (bot/handlers/app_context.py's AppContext, which
    carries out `/reopen` with them)."""

    @property
    def github(self) -> GitHubApp:
        """The App, to reach GitHub as an installation."""
        ...

    @property
    def office(self) -> Office:
        """The engine."""
        ...

    @property
    def ports(self) -> Ports:
        """What the edge does with the engine beyond the Office's own methods."""
        ...

    @property
    def driver(self) -> JobDriver:
        """What keeps each job's issue in line with the store."""
        ...

    async def perform(self, actions: Sequence[Action], *, repo: Repo, number: int) -> Outcome:
        """Carry out `actions` on issue `number` of `repo`; what came of the delivery."""
        ...

    async def withdraw_job(self, job_id: int, *, by: str) -> str:
        """End the job as cancelled; what changed, said short."""
        ...


@dataclass(frozen=True)
class EndPull:
    """The job's pull request was merged, closed unmerged, or closed by deleting its branch."""

    job_id: int
    state: Literal["merged", "closed", "gone"]
    by: str


@dataclass(frozen=True)
class SetPull:
    """The job's pull request is open (again) or a draft: a draft holds a running round."""

    job_id: int
    state: Literal["open", "draft"]
    by: str


@dataclass(frozen=True)
class WithdrawJob:
    """Withdraw the job as `/withdraw` does; `why` is what `by` did (`closed the issue`)."""

    job_id: int
    by: str
    why: str


@dataclass(frozen=True)
class LeaveRepos:
    """The App no longer serves `repos` (`owner/name`): withdraw `jobs`, delete their folders."""

    jobs: tuple[int, ...]
    repos: tuple[str, ...]
    by: str


LifecycleAction = EndPull | SetPull | WithdrawJob | LeaveRepos


async def perform(
    ctx: AppContext,
    actions: Sequence[Action | LifecycleAction],
    *,
    repo: Repo | None,
    number: int | None,
) -> Outcome:
    """Carry out `actions` on issue `number` of `repo` (None: a decision about no issue,
    which only ignores, reports and leaves repositories); what came of the delivery."""
    outcome: Outcome = ("nothing to do", None)
    for action in actions:
        if isinstance(action, EndPull | SetPull | WithdrawJob | LeaveRepos):
            outcome = await _lifecycle(ctx, action)
        elif isinstance(action, Ignore | Report):
            outcome = action.outcome
        elif repo is None or number is None:
            raise AssertionError(f"{action!r} needs an issue")
        else:
            done = await ctx.perform((action,), repo=repo, number=number)
            if not isinstance(action, PostOnce | React):  # these say nothing of the outcome
                outcome = done
    return outcome


async def _lifecycle(ctx: AppContext, action: LifecycleAction) -> Outcome:
    match action:
        case EndPull():
            ended = await pull_ended(ctx.office, action.job_id, action.state)
            await ctx.driver.sync(action.job_id)
            return f"{ended.describe()} (by {action.by})", action.job_id
        case SetPull():
            said = await _set_pull(ctx, action)
            await ctx.driver.sync(action.job_id)
            return said, action.job_id
        case WithdrawJob():
            try:
                done = await ctx.withdraw_job(action.job_id, by=f"{action.by} ({action.why})")
            except JobStateError as exc:  # it ended meanwhile
                return f"ignored: {exc}", action.job_id
            await ctx.driver.sync(action.job_id)
            return f"job {action.job_id} {done} ({action.by} {action.why})", action.job_id
        case LeaveRepos():
            return await _leave(ctx, action), None


async def _set_pull(ctx: AppContext, action: SetPull) -> str:
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
    return f"{said} (by {action.by})"


async def _leave(ctx: AppContext, action: LeaveRepos) -> str:
    """Withdraw the jobs without a word (the App can no longer reach their issues), then
    delete each repository's folder: its mirror, job repositories and worktrees."""
    withdrawn = 0
    for job_id in action.jobs:
        by = f"{action.by} (the App was removed from the repository)"
        try:
            await withdraw(ctx.office, job_id, by=by, announce=False)
        except (JobStateError, JobNotFoundError):  # it ended meanwhile
            continue
        withdrawn += 1
    deleted = [
        name for name in action.repos if await forget_repository(ctx.office, f"github/{name}")
    ]
    return (
        f"the App left {', '.join(action.repos) or 'no repository it knew'}: {withdrawn} job(s) "
        f"withdrawn, {len(deleted)} repository folder(s) deleted"
    )


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
