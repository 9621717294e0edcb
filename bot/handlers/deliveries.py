"""What a delivery the App acts on becomes: one small typed command per event and action.

    issues.labeled -> LabelAdded            issues.edited -> IssueEdited
    issue_comment.created -> CommentAdded   pull_request_review.submitted -> ReviewSubmitted
    check_suite.completed, workflow_run.completed                      -> ChecksCompleted
    pull_request.closed, .converted_to_draft, .ready_for_review, .reopened  -> PullChanged
    issues.closed -> IssueClosed            issues.unlabeled -> LabelRemoved
    installation.deleted, installation_repositories.removed            -> ReposRemoved
    ping -> Ping; anything else -> Ignored (payload_fields.py)

payloads.py builds them, one parser per event and action; router.py hands each to its handler.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bot.handlers.payload_fields import Actor, Ignored, Issue, Repo


@dataclass(frozen=True)
class Ping:
    """GitHub checks that the webhook works."""

    zen: str


@dataclass(frozen=True)
class LabelAdded:
    """A label was added to an issue; `label` is the one added, `issue.labels` all of them."""

    repo: Repo
    issue: Issue
    label: str
    sender: Actor


@dataclass(frozen=True)
class CommentAdded:
    """Someone wrote a new comment on an issue or pull request; `body` is sanitized."""

    repo: Repo
    issue: Issue
    comment_id: int
    body: str
    author: Actor
    created_at: float | None = None  # when it was written (GitHub's `created_at`), if given


@dataclass(frozen=True)
class IssueEdited:
    """Someone edited an issue's title or text; `issue` as it now reads (sanitized),
    `before_*` what GitHub says it read before (None: unchanged or not said)."""

    repo: Repo
    issue: Issue
    sender: Actor
    edited_at: float | None  # GitHub's `issue.updated_at`, if given
    before_title: str | None = None
    before_body: str | None = None


@dataclass(frozen=True)
class ReviewSubmitted:
    """A review of a pull request was submitted; `body` is sanitized, `state` as webhooks
    write it (approved, changes_requested, commented, dismissed)."""

    repo: Repo
    pull_number: int
    review_id: int
    state: str
    body: str
    author: Actor
    head_ref: str
    submitted_at: float | None


@dataclass(frozen=True)
class ChecksCompleted:
    """A check suite on a pull request's head completed (any conclusion: a passing one may
    be a flaky check's re-run); `app_slug` and `app_id` name the app whose suite it is."""

    repo: Repo
    suite_id: int
    app_name: str
    conclusion: str
    head_sha: str
    head_branch: str
    pull_numbers: tuple[int, ...]
    runs_url: str
    app_slug: str = ""
    app_id: int | None = None

    @property
    def failed(self) -> bool:
        """Whether the suite failed (`failure`, `timed_out`, `startup_failure`)."""
        # Imported here: parsing a payload loads no engine (a runner ignoring an event
        # exits before anything is loaded: bot/runner/command.py).
        from orchestrator.api import FAILED_CHECKS

        return self.conclusion in FAILED_CHECKS


PullAction = Literal["closed", "converted_to_draft", "ready_for_review", "reopened"]
PULL_ACTIONS: tuple[PullAction, ...] = (
    "closed",
    "converted_to_draft",
    "ready_for_review",
    "reopened",
)


@dataclass(frozen=True)
class PullChanged:
    """A pull request was closed (`merged` or not), made a draft, made ready or reopened."""

    repo: Repo
    number: int
    action: PullAction
    merged: bool
    draft: bool  # a reopened draft is a draft still
    head: str  # its head branch's name
    sender: Actor


@dataclass(frozen=True)
class IssueClosed:
    """Someone closed an issue."""

    repo: Repo
    issue: Issue
    sender: Actor


@dataclass(frozen=True)
class LabelRemoved:
    """A label was taken off an issue; `label` is the one removed."""

    repo: Repo
    issue: Issue
    label: str
    sender: Actor


@dataclass(frozen=True)
class ReposRemoved:
    """The App lost repositories: its installation was deleted, or they were taken out of it.

    `repos` holds each `owner/name`; None when the delivery does not list them (all the
    installation had).
    """

    installation_id: int
    repos: tuple[str, ...] | None
    sender: Actor


Command = (
    Ping
    | LabelAdded
    | CommentAdded
    | IssueEdited
    | ReviewSubmitted
    | ChecksCompleted
    | PullChanged
    | IssueClosed
    | LabelRemoved
    | ReposRemoved
    | Ignored
)
