"""Review operations of the local GitHub stand-in: reviews, review comments, replies and
requested reviewers, one handler per operationId.

GitHub quirks kept: listing review comments is oldest first unless `sort` is given (and
`direction` is ignored without it); an outdated comment has `line` and `position` null; a
reply goes into the thread of the comment it answers (its `in_reply_to_id` is the thread's
first comment) and is delivered as a review of its own; reviews are requested only from
collaborators and never from the pull request's author, and teams are not imitated.
"""

from __future__ import annotations

from bot.fakehub.anchors import anchors
from bot.fakehub.pulls import pull_issue, refresh
from bot.fakehub.review_actions import announce, reply
from bot.fakehub.review_shapes import requested_reviewers_json, review_comment_json, review_json
from bot.fakehub.review_state import ReviewComment
from bot.fakehub.routes import Call, Reply, Routes, paginate, path_number, query_since, repo_for
from bot.fakehub.shapes import Json, pull_json
from bot.fakehub.state import (
    HubError,
    HubIssue,
    HubRepo,
    HubState,
    PullInfo,
    not_found,
    validation_failed,
)

REVIEW_ROUTES = Routes()
_READ = ("pull_requests",)


def _pull_of(state: HubState, call: Call) -> tuple[HubRepo, HubIssue, PullInfo]:
    repo = repo_for(state, call)
    issue = pull_issue(state, repo, path_number(call, "pull_number"))
    assert issue.pull is not None
    return repo, issue, issue.pull


@REVIEW_ROUTES.on("pulls/list-reviews", needs=_READ)
async def list_reviews(state: HubState, call: Call) -> Reply:
    """GET …/pulls/{pull_number}/reviews, oldest first, paginated with a `Link` header."""
    repo, issue, pull = _pull_of(state, call)
    with state.lock:
        items = [review_json(state, repo, issue, r, call.urls) for r in pull.reviews.reviews]
    page, headers = paginate(items, call, f"repos/{repo.full_name}/pulls/{issue.number}/reviews")
    return Reply(200, page, headers)


@REVIEW_ROUTES.on("pulls/get-review", needs=_READ)
async def get_review(state: HubState, call: Call) -> Reply:
    """GET …/pulls/{pull_number}/reviews/{review_id}."""
    repo, issue, pull = _pull_of(state, call)
    with state.lock:
        if (review := pull.reviews.review(path_number(call, "review_id"))) is None:
            raise not_found()
        return Reply(200, review_json(state, repo, issue, review, call.urls))


async def _comments_json(
    state: HubState, repo: HubRepo, issue: HubIssue, comments: list[ReviewComment], call: Call
) -> list[Json]:
    assert issue.pull is not None
    await refresh(repo, issue)
    where = await anchors(state, repo, issue.pull)
    with state.lock:
        return [
            review_comment_json(state, repo, issue, c, where[c.thread_id], call.urls)
            for c in comments
        ]


@REVIEW_ROUTES.on("pulls/list-review-comments", needs=_READ)
async def list_review_comments(state: HubState, call: Call) -> Reply:
    """GET …/pulls/{pull_number}/comments with `sort`, `direction` and `since`, paginated."""
    repo, issue, pull = _pull_of(state, call)
    since = query_since(call)
    with state.lock:
        comments = [c for c in pull.reviews.comments.values() if c.updated_at >= since]
    if (sort := call.query.get("sort")) is not None:
        key = "updated_at" if sort == "updated" else "created_at"
        comments.sort(key=lambda c: (getattr(c, key), c.comment_id))
        if call.query.get("direction", "desc") == "desc":
            comments.reverse()
    items = await _comments_json(state, repo, issue, comments, call)
    page, headers = paginate(items, call, f"repos/{repo.full_name}/pulls/{issue.number}/comments")
    return Reply(200, page, headers)


@REVIEW_ROUTES.on("pulls/list-comments-for-review", needs=_READ)
async def list_comments_for_review(state: HubState, call: Call) -> Reply:
    """GET …/pulls/{pull_number}/reviews/{review_id}/comments, paginated."""
    repo, issue, pull = _pull_of(state, call)
    review_id = path_number(call, "review_id")
    with state.lock:
        if pull.reviews.review(review_id) is None:
            raise not_found()
        comments = [c for c in pull.reviews.comments.values() if c.review_id == review_id]
    items = await _comments_json(state, repo, issue, comments, call)
    where = f"repos/{repo.full_name}/pulls/{issue.number}/reviews/{review_id}/comments"
    page, headers = paginate(items, call, where)
    return Reply(200, page, headers)


@REVIEW_ROUTES.on("pulls/create-reply-for-review-comment", needs=_READ, level="write")
async def create_reply(state: HubState, call: Call) -> Reply:
    """POST …/pulls/{pull_number}/comments/{comment_id}/replies, as the App."""
    repo, issue, _ = _pull_of(state, call)
    review, comment, anchor = await reply(
        state,
        repo,
        issue,
        author=state.bot.login,
        to=path_number(call, "comment_id"),
        body=call.body["body"],
    )
    with state.lock:
        body = review_comment_json(state, repo, issue, comment, anchor, call.urls)
    deliveries = announce(state, repo, issue, review, [(comment, anchor)], call.urls)
    return Reply(201, body, {"Location": body["url"]}, deliveries=deliveries)


@REVIEW_ROUTES.on("pulls/list-requested-reviewers", needs=_READ)
async def list_requested_reviewers(state: HubState, call: Call) -> Reply:
    """GET …/pulls/{pull_number}/requested_reviewers."""
    _, _, pull = _pull_of(state, call)
    with state.lock:
        return Reply(200, requested_reviewers_json(state, pull.reviews.requested, call.urls))


@REVIEW_ROUTES.on("pulls/request-reviewers", needs=_READ, level="write")
async def request_reviewers(state: HubState, call: Call) -> Reply:
    """POST …/pulls/{pull_number}/requested_reviewers: ask again whoever already reviewed."""
    repo, issue, pull = _pull_of(state, call)
    body = call.body or {}
    if body.get("team_reviewers"):
        raise validation_failed(
            {"resource": "PullRequest", "field": "team_reviewers", "code": "invalid"}
        )
    with state.lock:
        logins = [_reviewer(state, repo, issue, login) for login in body.get("reviewers", [])]
        for login in logins:
            if login not in pull.reviews.requested:
                pull.reviews.requested.append(login)
        issue.updated_at = state.clock()
    await refresh(repo, issue)
    with state.lock:
        return Reply(201, pull_json(state, repo, issue, call.urls, stats=None))


def _reviewer(state: HubState, repo: HubRepo, issue: HubIssue, login: str) -> str:
    user = state.user(login)
    if user.login == issue.author:
        raise HubError(422, "Review cannot be requested from pull request author.")
    owner = user.login.lower() == repo.owner.lower()
    if not owner and user.permission in (None, "none"):
        raise HubError(
            422,
            "Reviews may only be requested from collaborators. One or more of the users or"
            f" teams you specified is not a collaborator of the {repo.full_name} repository.",
        )
    return user.login
