"""What the local GitHub stand-in keeps of a pull request's reviews: reviews, review comments
grouped into threads, and who is asked to review.

A review comment is anchored where it was written (`original_line` at `original_commit_id`);
where that line is now, and whether it is outdated, is worked out from git when it is read
(bot.fakehub.anchors). A reply shares its thread's anchor. Resolving a thread is a person's
act: nothing the App can call sets `resolved_by`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

ReviewState = Literal["APPROVED", "CHANGES_REQUESTED", "COMMENTED"]
REVIEW_STATES: tuple[ReviewState, ...] = ("APPROVED", "CHANGES_REQUESTED", "COMMENTED")


@dataclass
class Review:
    """A submitted pull request review (REST spells its state in capitals, webhooks in lower)."""

    review_id: int
    author: str
    state: ReviewState
    body: str | None
    submitted_at: float
    commit_id: str


@dataclass
class ReviewComment:
    """An inline comment of a review, a thread's first comment or a reply in it."""

    comment_id: int
    review_id: int
    thread_id: int
    author: str
    body: str
    path: str
    original_line: int
    original_position: int
    diff_hunk: str
    original_commit_id: str
    created_at: float
    updated_at: float
    in_reply_to: int | None = None


@dataclass
class ReviewThread:
    """A root review comment and its replies (comment ids, oldest first)."""

    thread_id: int
    path: str
    comment_ids: list[int] = field(default_factory=list)
    resolved_by: str | None = None

    @property
    def root_id(self) -> int:
        """The id of the comment that opened the thread."""
        return self.comment_ids[0]

    @property
    def resolved(self) -> bool:
        """Whether a person marked the thread resolved."""
        return self.resolved_by is not None


@dataclass
class PullReviews:
    """A pull request's reviews, review comments (by id, in creation order) and threads."""

    reviews: list[Review] = field(default_factory=list)
    comments: dict[int, ReviewComment] = field(default_factory=dict)
    threads: list[ReviewThread] = field(default_factory=list)
    requested: list[str] = field(default_factory=list)

    def review(self, review_id: int) -> Review | None:
        """The review with this id, if it is on this pull request."""
        return next((r for r in self.reviews if r.review_id == review_id), None)

    def thread(self, thread_id: int) -> ReviewThread | None:
        """The thread with this id, if it is on this pull request."""
        return next((t for t in self.threads if t.thread_id == thread_id), None)

    def thread_of(self, comment_id: int) -> ReviewThread | None:
        """The thread that holds review comment `comment_id`."""
        comment = self.comments.get(comment_id)
        return None if comment is None else self.thread(comment.thread_id)
