"""Which handler acts on a delivery: one per event and action, as gidgethub's Router has it.

`parse_command` (its table, `payloads.PARSERS`) names each (event, action) the App acts on
by a command type (deliveries.py), so the routes are kept by that type: issues.labeled
(`LabelAdded`), issues.edited (`IssueEdited`), issue_comment.created (`CommentAdded`),
pull_request_review.submitted (`ReviewSubmitted`), check_suite.completed and
workflow_run.completed (`ChecksCompleted`); what follows a job's label: a pull request
closed, drafted, ready or reopened (`PullChanged`), an issue closed (`IssueClosed`) or
unlabelled (`LabelRemoved`), repositories the App lost (`ReposRemoved`).
A ping is answered here, and a delivery the parser ignored is not routed.
"""

from __future__ import annotations

from typing import assert_never

from bot.handlers.actions import Outcome
from bot.handlers.app_context import AppContext
from bot.handlers.ci import on_checks_completed
from bot.handlers.deliveries import (
    ChecksCompleted,
    Command,
    CommentAdded,
    IssueClosed,
    IssueEdited,
    LabelAdded,
    LabelRemoved,
    Ping,
    PullChanged,
    ReposRemoved,
    ReviewSubmitted,
)
from bot.handlers.installation import on_repos_removed
from bot.handlers.issue_comment import on_issue_comment_created
from bot.handlers.issue_withdrawal import on_issues_closed, on_issues_unlabeled
from bot.handlers.issues import on_issues_edited, on_issues_labeled
from bot.handlers.payloads import Ignored
from bot.handlers.pull_request import on_pull_request
from bot.handlers.review import on_review_submitted


async def dispatch(command: Command, ctx: AppContext) -> Outcome:
    """Hand a parsed delivery to the handler of its event and action; what came of it."""
    match command:
        case Ping():
            return "pong", None
        case Ignored():
            return f"ignored: {command.reason}", None
        case LabelAdded():
            return await on_issues_labeled(command, ctx)
        case CommentAdded():
            return await on_issue_comment_created(command, ctx)
        case IssueEdited():
            return await on_issues_edited(command, ctx)
        case ReviewSubmitted():
            return await on_review_submitted(command, ctx)
        case ChecksCompleted():
            return await on_checks_completed(command, ctx)
        case PullChanged() | IssueClosed() | LabelRemoved() | ReposRemoved():
            return await _after_label(command, ctx)
        case _:
            assert_never(command)


async def _after_label(
    command: PullChanged | IssueClosed | LabelRemoved | ReposRemoved, ctx: AppContext
) -> Outcome:
    """The handlers of what follows a job's label."""
    match command:
        case PullChanged():
            return await on_pull_request(command, ctx)
        case IssueClosed():
            return await on_issues_closed(command, ctx)
        case LabelRemoved():
            return await on_issues_unlabeled(command, ctx)
        case ReposRemoved():
            return await on_repos_removed(command, ctx)
        case _:
            assert_never(command)
