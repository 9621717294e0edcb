"""A decision carried out: each action, in order, by the one performer its type has.

`PERFORMERS` maps every action type to the coroutine that performs it (performers.py for
the issue and its gates, job_orders.py for a decider's orders and what follows a job's
label). Most act on the delivery's issue; `Ignore`, `Report` and what follows a job's label
need none (a lost installation is about no issue). The last performer that answers an
outcome gives the delivery's; `Later` puts the delivery back to be decided again.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from bot.errors import NotYetError
from bot.handlers import job_orders, performers
from bot.handlers.actions import (
    Action,
    Advise,
    AnswerGate,
    AutoProxy,
    Control,
    EndPull,
    Ignore,
    Later,
    LeaveRepos,
    Outcome,
    Override,
    PostOnce,
    React,
    Reassign,
    Report,
    ReviseIssue,
    SetPull,
    StartJob,
    WithdrawJob,
)
from bot.handlers.app_context import AppContext
from bot.handlers.payload_fields import Repo

A = TypeVar("A", bound=Action)
Performer = Callable[[AppContext, Action, Repo | None, int | None], Awaitable[Outcome | None]]


async def perform(
    ctx: AppContext, actions: Sequence[Action], *, repo: Repo | None, number: int | None
) -> Outcome:
    """Carry out `actions` on issue `number` of `repo` (None: a decision about no issue,
    which only ignores, reports and does what follows a job's label); what came of the
    delivery."""
    outcome: Outcome = ("nothing to do", None)
    for action in actions:
        performer = PERFORMERS.get(type(action))
        if performer is None:
            raise AssertionError(f"no way to perform {action!r}")
        done = await performer(ctx, action, repo, number)
        if done is not None:
            outcome = done
    return outcome


def _on_issue(
    kind: type[A], run: Callable[[AppContext, A, Repo, int], Awaitable[Outcome | None]]
) -> tuple[type[object], Performer]:
    """The performer of `kind`, which acts on the delivery's issue."""

    async def call(
        ctx: AppContext, action: Action, repo: Repo | None, number: int | None
    ) -> Outcome | None:
        assert isinstance(action, kind)
        if repo is None or number is None:
            raise AssertionError(f"{action!r} needs an issue")
        return await run(ctx, action, repo, number)

    return kind, call


def _anywhere(
    kind: type[A], run: Callable[[AppContext, A], Awaitable[Outcome]]
) -> tuple[type[object], Performer]:
    """The performer of `kind`, which needs no issue."""

    async def call(
        ctx: AppContext, action: Action, repo: Repo | None, number: int | None
    ) -> Outcome | None:
        assert isinstance(action, kind)
        return await run(ctx, action)

    return kind, call


async def _said(ctx: AppContext, action: Ignore | Report) -> Outcome:
    """What an `Ignore` or a `Report` says came of the delivery."""
    return action.outcome


async def _later(ctx: AppContext, action: Later, repo: Repo, number: int) -> None:
    """Put the delivery back, to be decided again after `after_s`."""
    raise NotYetError(action.reason, retry_at=time.time() + action.after_s)


def _table(*entries: tuple[type[object], Performer]) -> dict[type[object], Performer]:
    """The entries as a mapping; an action type named twice is a mistake."""
    table = dict(entries)
    if len(table) != len(entries):
        raise AssertionError("an action type has two performers")
    return table


PERFORMERS: dict[type[object], Performer] = _table(
    _anywhere(Ignore, _said),
    _anywhere(Report, _said),
    _on_issue(PostOnce, performers.post_once),
    _on_issue(React, performers.react),
    _on_issue(Later, _later),
    _on_issue(StartJob, performers.start),
    _on_issue(AnswerGate, performers.answer),
    _on_issue(Advise, performers.advise),
    _on_issue(Reassign, performers.reassign),
    _on_issue(ReviseIssue, performers.revise),
    _on_issue(Override, performers.override),
    _on_issue(AutoProxy, performers.auto_proxy),
    _on_issue(Control, job_orders.control),
    _anywhere(EndPull, job_orders.end_pull),
    _anywhere(SetPull, job_orders.set_pull),
    _anywhere(WithdrawJob, job_orders.withdraw_job),
    _anywhere(LeaveRepos, job_orders.leave),
)
