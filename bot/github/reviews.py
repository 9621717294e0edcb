"""Review rounds' calls to GitHub: reviews, review comments and replies over REST, review
threads over GraphQL, for one installation (bot.github.client.Installation).

Listings follow GitHub's `Link: rel="next"` (so a listing of exactly 100 costs one request).
The GraphQL documents are bot.github.graphql_queries'; their quirks are hidden here: a
comment's id is its REST id as an int, and a bot's login carries `[bot]` as in REST. A reply
is not idempotent: after a failure that may have applied, the reply is looked for (by its
author and body) before it is sent again.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from githubkit import GitHub
from githubkit.response import Response

from bot.errors import GraphQLError, RateLimitedError
from bot.github.client import MAX_PAGES, PER_PAGE, Call, Identity, Installation, Json
from bot.github.graphql_queries import (
    ADD_THREAD_REPLY,
    MARK_READY,
    REVIEW_THREADS,
    THREAD_COMMENTS,
    Document,
)

log = logging.getLogger(__name__)

_NEXT_PAGE = re.compile(r'<[^<>]*[?&]page=(\d+)[^<>]*>;\s*rel="next"')
_GRAPHQL_RETRY_S = 60.0  # GitHub's advice when a limit names no reset


@dataclass(frozen=True)
class ThreadComment:
    """One comment of a review thread, in REST's terms."""

    comment_id: int
    author: str | None  # None for a deleted account; a bot's login ends in `[bot]`
    body: str
    created_at: str
    reply_to: int | None
    diff_hunk: str


@dataclass(frozen=True)
class ReviewThread:
    """A review thread: resolved (a person's act), outdated, where, and all its comments."""

    thread_id: str
    resolved: bool
    outdated: bool
    path: str
    line: int | None
    original_line: int | None
    comments: tuple[ThreadComment, ...]


def graphql_url(api_url: str) -> str:
    """GitHub's GraphQL endpoint for a REST base URL (GHES: `/api/v3/` → `/api/graphql`)."""
    base = api_url.rstrip("/") + "/"
    if base.endswith("/api/v3/"):
        return base.removesuffix("v3/") + "graphql"
    return base + "graphql"


def _comment(node: Json) -> ThreadComment:
    author = node.get("author") or None
    login = None if author is None else str(author["login"])
    if author is not None and author.get("__typename") == "Bot":
        login = f"{login}[bot]"
    reply_to = node.get("replyTo")
    return ThreadComment(
        comment_id=int(node["fullDatabaseId"]),
        author=login,
        body=str(node["body"]),
        created_at=str(node["createdAt"]),
        reply_to=None if reply_to is None else int(reply_to["fullDatabaseId"]),
        diff_hunk=str(node.get("diffHunk") or ""),
    )


class PullReviews:
    """What a review round asks of GitHub about one installation's pull requests."""

    def __init__(self, installation: Installation) -> None:
        self._inst = installation

    async def _call(
        self,
        call: Call,
        *,
        headers: dict[str, str] | None = None,
        write: bool = False,
        effect: Callable[[], Awaitable[Json | None]] | None = None,
    ) -> Json:
        return await self._inst.app.call(
            self._inst.gh, call, headers=headers, write=write, effect=effect
        )

    async def _pages(self, page: Callable[[int], Call], *, what: str) -> list[Json]:
        """Every item of a listing, page by page as `Link: rel="next"` leads."""
        found: list[Json] = []
        number = 1
        for _ in range(MAX_PAGES):
            headers: dict[str, str] = {}
            found.extend(await self._call(page(number), headers=headers) or [])
            if (left := headers.get("x-ratelimit-remaining", "")).isdigit():
                self._inst.remaining = int(left)
            if (following := _NEXT_PAGE.search(headers.get("link", ""))) is None:
                return found
            number = int(following[1])
        log.warning("listing %s stopped at %d pages (%d items)", what, MAX_PAGES, len(found))
        return found

    async def pull(self, owner: str, repo: str, number: int) -> Json:
        """The pull request: state, `merged`, `draft`, `head.sha`, `head.ref`, ..."""
        return await self._call(lambda gh: gh.rest.pulls.async_get(owner, repo, number))

    async def reviews(self, owner: str, repo: str, number: int) -> list[Json]:
        """Every review of the pull request, oldest first (states in capitals)."""

        def page(n: int) -> Call:
            return lambda gh: gh.rest.pulls.async_list_reviews(
                owner, repo, number, per_page=PER_PAGE, page=n
            )

        return await self._pages(page, what=f"reviews of {owner}/{repo}#{number}")

    async def review_comments(
        self, owner: str, repo: str, number: int, *, review_id: int | None = None
    ) -> list[Json]:
        """Every review comment of the pull request (of one review, with `review_id`),
        oldest first; an outdated one has `line` and `position` null."""

        def page(n: int) -> Call:
            if review_id is not None:
                return lambda gh: gh.rest.pulls.async_list_comments_for_review(
                    owner, repo, number, review_id, per_page=PER_PAGE, page=n
                )
            return lambda gh: gh.rest.pulls.async_list_review_comments(
                owner, repo, number, per_page=PER_PAGE, page=n
            )

        return await self._pages(page, what=f"review comments of {owner}/{repo}#{number}")

    async def reply(
        self, owner: str, repo: str, number: int, comment_id: int, body: str, *, identity: Identity
    ) -> Json:
        """Reply in the thread of review comment `comment_id` (REST); the new comment."""

        async def effect() -> Json | None:
            comments = await self.review_comments(owner, repo, number)
            return next(
                (
                    c
                    for c in reversed(comments)
                    if identity.opened(c) and c.get("body") == body and c.get("in_reply_to_id")
                ),
                None,
            )

        return await self._call(
            lambda gh: gh.rest.pulls.async_create_reply_for_review_comment(
                owner, repo, number, comment_id, body=body
            ),
            write=True,
            effect=effect,
        )

    async def request_reviewers(
        self, owner: str, repo: str, number: int, logins: Sequence[str]
    ) -> Json:
        """Ask `logins` to review (again): idempotent; the pull request."""
        return await self._call(
            lambda gh: gh.rest.pulls.async_request_reviewers(
                owner, repo, number, reviewers=list(logins)
            ),
            write=True,
        )

    async def requested_reviewers(self, owner: str, repo: str, number: int) -> list[str]:
        """The logins asked to review and not yet reviewing."""
        body = await self._call(
            lambda gh: gh.rest.pulls.async_list_requested_reviewers(owner, repo, number)
        )
        return [str(user["login"]) for user in body.get("users") or []]

    async def threads(self, owner: str, repo: str, number: int) -> list[ReviewThread]:
        """Every review thread of the pull request with all its comments, oldest first."""
        found: list[ReviewThread] = []
        after: str | None = None
        for _ in range(MAX_PAGES):
            variables = {"owner": owner, "name": repo, "number": number, "after": after}
            data = await self._graphql(REVIEW_THREADS, variables)
            connection = data["repository"]["pullRequest"]["reviewThreads"]
            for node in connection["nodes"]:
                found.append(await self._thread(node))
            if not connection["pageInfo"]["hasNextPage"]:
                return found
            after = connection["pageInfo"]["endCursor"]
        log.warning("threads of %s/%s#%d stopped at %d pages", owner, repo, number, MAX_PAGES)
        return found

    async def _thread(self, node: Json) -> ReviewThread:
        comments = [_comment(c) for c in node["comments"]["nodes"]]
        page_info = node["comments"]["pageInfo"]
        while page_info["hasNextPage"]:
            variables = {"thread": node["id"], "after": page_info["endCursor"]}
            more = (await self._graphql(THREAD_COMMENTS, variables))["node"]["comments"]
            comments += [_comment(c) for c in more["nodes"]]
            page_info = more["pageInfo"]
        return ReviewThread(
            thread_id=str(node["id"]),
            resolved=bool(node["isResolved"]),
            outdated=bool(node["isOutdated"]),
            path=str(node["path"]),
            line=node.get("line"),
            original_line=node.get("originalLine"),
            comments=tuple(comments),
        )

    async def reply_in_thread(
        self, owner: str, repo: str, number: int, thread_id: str, body: str, *, identity: Identity
    ) -> ThreadComment:
        """Reply in a review thread (GraphQL); the new comment. Never resolves it."""

        async def effect() -> Json | None:
            for thread in await self.threads(owner, repo, number):
                if thread.thread_id == thread_id:
                    mine = [
                        c for c in thread.comments if c.author == identity.login and c.body == body
                    ]
                    return _made(mine[-1]) if mine else None
            return None

        variables = {"thread": thread_id, "body": body}
        data = await self._graphql(ADD_THREAD_REPLY, variables, write=True, effect=effect)
        return _comment(data["addPullRequestReviewThreadReply"]["comment"])

    async def mark_ready(self, owner: str, repo: str, number: int) -> bool:
        """Mark a draft pull request ready for review (GraphQL: REST cannot); whether it was
        a draft. After a failure that may have applied, GitHub is asked whether it is ready
        before the mutation is sent again."""
        pull = await self.pull(owner, repo, number)
        if not pull.get("draft"):
            return False

        async def effect() -> Json | None:
            now = await self.pull(owner, repo, number)
            ready = {"pullRequest": {"id": now.get("node_id"), "isDraft": False}}
            return None if now.get("draft") else {"data": {"markPullRequestReadyForReview": ready}}

        await self._graphql(MARK_READY, {"pull": pull["node_id"]}, write=True, effect=effect)
        return True

    async def _graphql(
        self,
        document: Document,
        variables: dict[str, Any],
        *,
        write: bool = False,
        effect: Callable[[], Awaitable[Json | None]] | None = None,
    ) -> Json:
        """The `data` of one GraphQL call; GraphQLError when GitHub answers with errors."""
        url = graphql_url(self._inst.app.api_url)
        payload = {"query": document.text, "variables": variables}

        def post(gh: GitHub[Any]) -> Awaitable[Response[Any]]:
            return gh.arequest("POST", url, json=payload)

        headers: dict[str, str] = {}
        body = await self._call(post, headers=headers, write=write, effect=effect)
        errors = body.get("errors") if isinstance(body, dict) else None
        if errors:
            raise _graphql_error(document, errors, headers)
        return body["data"]


def _made(comment: ThreadComment) -> Json:
    """A reply found after a failed mutation, as the mutation would have answered it (its
    author already spelled as REST spells it, so not marked a Bot again)."""
    node = {
        "fullDatabaseId": str(comment.comment_id),
        "author": {"__typename": "User", "login": comment.author},
        "body": comment.body,
        "createdAt": comment.created_at,
        "diffHunk": comment.diff_hunk,
        "replyTo": None if comment.reply_to is None else {"fullDatabaseId": str(comment.reply_to)},
    }
    return {"data": {"addPullRequestReviewThreadReply": {"comment": node}}}


def _graphql_error(
    document: Document, errors: list[dict[str, object]], headers: dict[str, str]
) -> GraphQLError | RateLimitedError:
    messages = "; ".join(str(e.get("message")) for e in errors)
    if any(e.get("type") in ("RATE_LIMITED", "RATE_LIMIT") for e in errors):
        reset = headers.get("x-ratelimit-reset", "")
        retry_at = float(reset) if reset.isdigit() else time.time() + _GRAPHQL_RETRY_S
        return RateLimitedError(f"GitHub GraphQL rate limit: {messages}", retry_at=retry_at)
    return GraphQLError(f"GitHub GraphQL {document.name}: {messages}", errors=errors)
