"""Submitting reviews and replying in threads, as GitHub records them and announces them.

Shared by the REST reply route, the GraphQL reply mutation and the helpers that play people.
GitHub quirks kept: every reply, and every lone inline comment, is a `COMMENTED` review of its
own; a review's inline comments are each delivered as `pull_request_review_comment.created`
carrying the review's id, then the review as `pull_request_review.submitted`; submitting a
review takes its author off the requested reviewers; nobody approves or requests changes on
their own pull request; an inline comment must be on a line the pull request's diff shows.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.fakehub import diffs, git
from bot.fakehub.anchors import Anchor, anchors
from bot.fakehub.pulls import refresh
from bot.fakehub.review_state import Review, ReviewComment, ReviewState, ReviewThread
from bot.fakehub.shapes import Urls
from bot.fakehub.state import HubError, HubIssue, HubRepo, HubState, PullInfo, not_found
from bot.fakehub.webhooks import Outgoing, review_comment_created, review_submitted

InlineComment = tuple[str, int, str]  # (path, line on the new side, body)


async def submit_review(
    state: HubState,
    repo: HubRepo,
    issue: HubIssue,
    *,
    author: str,
    review_state: ReviewState,
    body: str | None,
    comments: Sequence[InlineComment] = (),
) -> tuple[Review, list[ReviewComment], dict[int, Anchor]]:
    """Record a review and its inline comments (each opens a thread); their anchors."""
    pull = _pull(issue)
    await refresh(repo, issue)
    _check_review(
        state, issue, author=author, review_state=review_state, body=body, comments=comments
    )
    shown = diffs.parse(await git.diff(repo.path, pull.base_sha, pull.head_sha))
    located = [_locate(shown, path, line) for path, line, _ in comments]
    with state.lock:
        login, now = state.user(author).login, state.clock()
        review = Review(state.next_id(), login, review_state, body, now, pull.head_sha)
        made: list[ReviewComment] = []
        found: dict[int, Anchor] = {}
        for (path, line, text), (position, hunk) in zip(comments, located, strict=True):
            thread = ReviewThread(state.next_id(), path)
            comment = ReviewComment(
                comment_id=state.next_id(),
                review_id=review.review_id,
                thread_id=thread.thread_id,
                author=login,
                body=text,
                path=path,
                original_line=line,
                original_position=position,
                diff_hunk=hunk,
                original_commit_id=pull.head_sha,
                created_at=now,
                updated_at=now,
            )
            thread.comment_ids.append(comment.comment_id)
            pull.reviews.threads.append(thread)
            pull.reviews.comments[comment.comment_id] = comment
            found[thread.thread_id] = Anchor(line, position, pull.head_sha)
            made.append(comment)
        _record(state, issue, pull, review)
    return review, made, found


async def reply(
    state: HubState, repo: HubRepo, issue: HubIssue, *, author: str, to: int, body: str
) -> tuple[Review, ReviewComment, Anchor]:
    """Reply in the thread of review comment `to` (404 when it is not on this pull request)."""
    pull = _pull(issue)
    await refresh(repo, issue)
    where = await anchors(state, repo, pull)
    with state.lock:
        thread = pull.reviews.thread_of(to)
        if thread is None:
            raise not_found()
        root = pull.reviews.comments[thread.root_id]
        login, now = state.user(author).login, state.clock()
        review = Review(state.next_id(), login, "COMMENTED", None, now, pull.head_sha)
        comment = ReviewComment(
            comment_id=state.next_id(),
            review_id=review.review_id,
            thread_id=thread.thread_id,
            author=login,
            body=body,
            path=root.path,
            original_line=root.original_line,
            original_position=root.original_position,
            diff_hunk=root.diff_hunk,
            original_commit_id=root.original_commit_id,
            created_at=now,
            updated_at=now,
            in_reply_to=root.comment_id,
        )
        thread.comment_ids.append(comment.comment_id)
        pull.reviews.comments[comment.comment_id] = comment
        _record(state, issue, pull, review)
    return review, comment, where[thread.thread_id]


def announce(
    state: HubState,
    repo: HubRepo,
    issue: HubIssue,
    review: Review,
    comments: Sequence[tuple[ReviewComment, Anchor]],
    urls: Urls,
) -> list[Outgoing]:
    """The deliveries of a submitted review: its inline comments, then the review."""
    events: list[Outgoing] = [
        (
            "pull_request_review_comment",
            review_comment_created(state, repo, issue, comment, anchor, urls),
        )
        for comment, anchor in comments
    ]
    events.append(("pull_request_review", review_submitted(state, repo, issue, review, urls)))
    return events


def _pull(issue: HubIssue) -> PullInfo:
    if issue.pull is None:
        raise not_found()
    return issue.pull


def _check_review(
    state: HubState,
    issue: HubIssue,
    *,
    author: str,
    review_state: ReviewState,
    body: str | None,
    comments: Sequence[InlineComment],
) -> None:
    own = state.user(author).login == issue.author
    if own and review_state == "APPROVED":
        raise HubError(422, "Can not approve your own pull request")
    if own and review_state == "CHANGES_REQUESTED":
        raise HubError(422, "Can not request changes on your own pull request")
    if review_state != "APPROVED" and not body and not comments:
        raise HubError(422, "A review that is not an approval needs a body or inline comments")


def _locate(shown: dict[str, diffs.FileDiff], path: str, line: int) -> tuple[int, str]:
    located = diff.locate(line) if (diff := shown.get(path)) is not None else None
    if located is None:
        raise HubError(422, "Pull request review thread line must be part of the diff")
    return located


def _record(state: HubState, issue: HubIssue, pull: PullInfo, review: Review) -> None:
    pull.reviews.reviews.append(review)
    pull.reviews.requested = [
        login for login in pull.reviews.requested if login.lower() != review.author.lower()
    ]
    issue.updated_at = review.submitted_at
