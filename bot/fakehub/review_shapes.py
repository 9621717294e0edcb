"""Reviews and review comments shaped like GitHub's REST responses and webhook objects.

REST spells a review's state in capitals (`CHANGES_REQUESTED`) and its missing body as "";
webhooks spell the state in lower case and the missing body as null.
"""

from __future__ import annotations

import base64
import binascii

from bot.fakehub.anchors import Anchor
from bot.fakehub.review_state import Review, ReviewComment
from bot.fakehub.shapes import (
    Json,
    Urls,
    association,
    issue_json_html,
    node_id,
    reactions_json,
    timestamp,
    user_json,
)
from bot.fakehub.state import HubIssue, HubRepo, HubState

_THREAD_PREFIX = "PRRT_"


def thread_node_id(thread_id: int) -> str:
    """The GraphQL id of a review thread (threads have only new-style `PRRT_` ids)."""
    return _THREAD_PREFIX + base64.urlsafe_b64encode(f"thread:{thread_id}".encode()).decode()


def thread_id_of(node: str) -> int | None:
    """The thread id a `thread_node_id` encodes, or None for anything else."""
    if not node.startswith(_THREAD_PREFIX):
        return None
    try:
        kind, _, number = base64.urlsafe_b64decode(node[len(_THREAD_PREFIX) :]).partition(b":")
    except (binascii.Error, ValueError):
        return None
    return int(number) if kind == b"thread" and number.isdigit() else None


def review_json(
    state: HubState,
    repo: HubRepo,
    issue: HubIssue,
    review: Review,
    urls: Urls,
    *,
    webhook: bool = False,
) -> Json:
    """A `pull-request-review`, or the `review` object of a webhook with `webhook`."""
    pull_api = f"{urls.repo_api(repo)}/pulls/{issue.number}"
    html = f"{issue_json_html(repo, issue, urls)}#pullrequestreview-{review.review_id}"
    body = review.body if webhook else review.body or ""
    return {
        "id": review.review_id,
        "node_id": node_id("PullRequestReview", review.review_id),
        "user": user_json(state.user(review.author), urls),
        "body": body,
        "commit_id": review.commit_id,
        "submitted_at": timestamp(review.submitted_at),
        "state": review.state.lower() if webhook else review.state,
        "html_url": html,
        "pull_request_url": pull_api,
        "author_association": association(state, repo, review.author),
        "_links": {"html": {"href": html}, "pull_request": {"href": pull_api}},
    }


def review_comment_json(
    state: HubState,
    repo: HubRepo,
    issue: HubIssue,
    comment: ReviewComment,
    anchor: Anchor,
    urls: Urls,
) -> Json:
    """A `pull-request-review-comment` (also a valid legacy `review-comment`)."""
    api = f"{urls.repo_api(repo)}/pulls/comments/{comment.comment_id}"
    pull_api = f"{urls.repo_api(repo)}/pulls/{issue.number}"
    html = f"{issue_json_html(repo, issue, urls)}#discussion_r{comment.comment_id}"
    body: Json = {
        "url": api,
        "pull_request_review_id": comment.review_id,
        "id": comment.comment_id,
        "node_id": node_id("PullRequestReviewComment", comment.comment_id),
        "diff_hunk": comment.diff_hunk,
        "path": comment.path,
        "position": anchor.position,
        "original_position": comment.original_position,
        "commit_id": anchor.commit_id,
        "original_commit_id": comment.original_commit_id,
        "user": user_json(state.user(comment.author), urls),
        "body": comment.body,
        "created_at": timestamp(comment.created_at),
        "updated_at": timestamp(comment.updated_at),
        "html_url": html,
        "pull_request_url": pull_api,
        "author_association": association(state, repo, comment.author),
        "_links": {
            "self": {"href": api},
            "html": {"href": html},
            "pull_request": {"href": pull_api},
        },
        "reactions": reactions_json(f"{api}/reactions", []),
        "start_line": None,
        "original_start_line": None,
        "start_side": None,
        "line": anchor.line,
        "original_line": comment.original_line,
        "side": "RIGHT",
        "subject_type": "line",
    }
    if comment.in_reply_to is not None:  # GitHub leaves the key out of a thread's first comment
        body["in_reply_to_id"] = comment.in_reply_to
    return body


def requested_reviewers_json(state: HubState, logins: list[str], urls: Urls) -> Json:
    """A `pull-request-review-request`: the users asked to review (no teams here)."""
    return {"users": [user_json(state.user(login), urls) for login in logins], "teams": []}
