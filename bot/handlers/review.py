"""pull_request_review.submitted: a review of a job's pull request is the batch of one round;
a `/teaparty` or an @-mention of the App in the pull request's conversation is gathered too.

A review by someone with write access starts a round when it asks for changes, or comments
with inline comments or an @-mention of the App; `approved` and `dismissed` reviews, other
people's and other bots' start nothing. GitHub sends a lone inline comment (or a reply in a
thread) as a review of its own with one comment and no body: such reviews wait out the
project's `rounds.window_s` (the delivery is retried then, spending no attempt), and the
first to come due gathers every thread written in since, so a burst of them is one round.
Each review comment also arrives as `pull_request_review_comment`, which the parser drops:
it is read here, with its review.

What the round takes (`gather`): the review's text, and every unresolved review thread in
which a person with write access wrote after both the App's last reply there and the newest
comment a round already took (the store's `handled`). Threads come from GraphQL (with
`isResolved`, every page); if GraphQL fails, from REST, where every thread counts as open.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

from bot.errors import GraphQLError
from bot.github.client import Installation, Json
from bot.github.reviews import PullReviews, ReviewThread, ThreadComment
from bot.github.round_delivery import REST_THREAD
from bot.github.sanitizer import sanitize
from bot.handlers.actions import Ignore, Later, Outcome, Report
from bot.handlers.app_context import AppContext
from bot.handlers.deliveries import CommentAdded, ReviewSubmitted
from bot.handlers.issues import WRITERS
from bot.handlers.payloads import Repo
from bot.handlers.perform import perform
from orchestrator.api import Feedback, Point

log = logging.getLogger(__name__)
STARTS = ("changes_requested", "commented")
HUNK_LINES = 30  # of a thread's diff hunk, kept with its point
_COMMAND = re.compile(r"^/teaparty\b", re.MULTILINE | re.IGNORECASE)


@dataclass(frozen=True)
class ReviewFacts:
    """What deciding on a review needs beyond the payload."""

    job_id: int | None
    permission: str | None = None  # the reviewer's; None: not asked
    comments: int = 0  # inline comments of this review
    app_login: str = ""
    window_s: float = 90.0
    now: float = 0.0


def decide_review(command: ReviewSubmitted, facts: ReviewFacts) -> Ignore | Later | None:
    """Whether the review starts a round now (None), later (a lone comment), or not; no I/O."""
    number = command.pull_number
    if facts.job_id is None:
        return Ignore(f"pull request #{number} is not a TeaParty job's")
    if command.state not in STARTS:
        return Ignore(f"a review that is {command.state} starts no round", facts.job_id)
    if facts.permission not in WRITERS:
        who = command.author.login
        return Ignore(f"{who} has no write access: their review starts no round", facts.job_id)
    if command.state == "changes_requested" or _mentions(command.body, facts.app_login):
        return None
    if facts.comments == 0:
        return Ignore("a comment-only review without inline comments starts no round", facts.job_id)
    if facts.comments == 1 and not command.body.strip():  # a lone comment: gathered
        due = (command.submitted_at or facts.now) + facts.window_s
        if due > facts.now:
            return Later(f"review {command.review_id}: gathering lone comments", due - facts.now)
    return None


async def on_review_submitted(command: ReviewSubmitted, ctx: AppContext) -> Outcome:
    """Take a writer's review of a job's pull request into the job's next round."""
    repo = command.repo
    job_id = await ctx.ports.reviews.job_of_pull(f"github/{repo.full_name}", command.pull_number)
    facts = ReviewFacts(job_id)
    gh: Installation | None = None
    if job_id is not None and command.state in STARTS:
        gh = await ctx.installation(repo)
        settings = await ctx.office.round_settings(job_id)
        comments = await PullReviews(gh).review_comments(
            repo.owner, repo.name, command.pull_number, review_id=command.review_id
        )
        facts = ReviewFacts(
            job_id,
            await ctx.repos.permission(gh, repo.owner, repo.name, command.author.login),
            len(comments),
            await ctx.github.login(),
            settings.window_s,
            time.time(),
        )
    decided = decide_review(command, facts)
    if decided is not None:
        return await perform(ctx, (decided,), repo=repo, number=command.pull_number)
    assert gh is not None
    assert job_id is not None
    said = Point(f"review:{command.review_id}", command.author.login, command.body)
    since = (command.submitted_at or facts.now) - facts.window_s
    where = Where(repo, command.pull_number, command.author.login, facts.app_login, since)
    return await take_round(ctx, gh, job_id, where, said, what=f"review {command.review_id}")


@dataclass(frozen=True)
class Where:
    """The pull request a round is for, who asked for it, the App's own login, and since when
    the conversation's requests are gathered into it (its asker's, less the window)."""

    repo: Repo
    number: int
    asker: str
    app_login: str
    since: float


async def take_round(
    ctx: AppContext, gh: Installation, job_id: int, where: Where, said: Point, *, what: str
) -> Outcome:
    """Read the pull request's threads, and the requests in its conversation still waiting
    out their window, and hand what is new to the job's next round: the first to come due
    gathers them all, so a burst is one round."""
    repo = where.repo
    handled = await ctx.ports.reviews.handled(job_id)
    threads = await _threads(PullReviews(gh), repo, where.number)
    known: dict[str, bool] = {where.asker: True}

    async def writes(login: str) -> bool:
        if login not in known:
            permission = await ctx.repos.permission(gh, repo.owner, repo.name, login)
            known[login] = not login.endswith("[bot]") and permission in WRITERS
        return known[login]

    logins = {c.author for t in threads for c in t.comments if c.author}
    writers = {login for login in logins if await writes(login)} | {where.asker}
    points = gather(said, threads, handled, app_login=where.app_login, writers=writers)
    asks = await _conversation_asks(gh, where, writes)
    points = (*points[:1], *(a for a in asks if a.source != said.source), *points[1:])
    taken = await ctx.ports.reviews.feedback(job_id, Feedback((where.asker,), points))
    if taken.round_number is None or not taken.added:
        return Report(f"{what}: nothing new", job_id).outcome
    result = f"round {taken.round_number}: {taken.added} point(s), {taken.state}"
    return Report(result, job_id).outcome


def gather(
    said: Point | None,
    threads: Iterable[ReviewThread],
    handled: Mapping[str, int],
    *,
    app_login: str,
    writers: set[str],
) -> tuple[Point, ...]:
    """A round's points: what the review (or comment) `said`, and each open thread a writer
    wrote in since it was last handled (by an App reply or a round); no I/O."""
    points: list[Point] = [said] if said is not None and said.body.strip() else []
    own = app_login.casefold()
    for thread in threads:
        if thread.resolved:
            continue
        mine = [c.comment_id for c in thread.comments if (c.author or "").casefold() == own]
        since = max([*mine, handled.get(thread.thread_id, 0)])
        new = [c for c in thread.comments if c.comment_id > since and c.author in writers]
        if new:
            points.append(_thread_point(thread, new))
    return tuple(points)


async def _conversation_asks(
    gh: Installation, where: Where, writes: Callable[[str], Awaitable[bool]]
) -> list[Point]:
    """The requests (`/teaparty`, an @-mention of the App) writers made in the pull request's
    conversation since `where.since`, oldest first: each waits out its window, and the first
    to come due takes the others with it (each is its own source, so it is taken once)."""
    repo, app = where.repo, where.app_login
    found: list[Point] = []
    for comment in await gh.comments(repo.owner, repo.name, where.number, since=where.since):
        login = str((comment.get("user") or {}).get("login") or "")
        body = sanitize(str(comment.get("body") or ""))
        if not login or not (_asks(body) or _mentions(body, app)) or not await writes(login):
            continue
        found.append(Point(f"comment:{comment['id']}", login, ask_text(body)))
    return found


def ask_text(body: str) -> str:
    """What a `/teaparty` comment asks: its text without the command (all of it, if only the
    command is there)."""
    return _COMMAND.sub("", body, count=1).strip() or body


def _thread_point(thread: ReviewThread, new: list[ThreadComment]) -> Point:
    newest = new[-1]
    if len(new) == 1:
        body = sanitize(newest.body)
    else:
        body = "\n\n".join(f"@{c.author}: {sanitize(c.body)}" for c in new)
    hunk = "\n".join(thread.comments[0].diff_hunk.splitlines()[-HUNK_LINES:])
    return Point(
        source=f"thread:{thread.thread_id}:{newest.comment_id}",
        author=newest.author or "ghost",
        body=body,
        thread_id=thread.thread_id,
        comment_id=newest.comment_id,
        path=thread.path,
        line=thread.line if thread.line is not None else thread.original_line,
        hunk=sanitize(hunk) or None,
        outdated=thread.outdated,
    )


async def _threads(reviews: PullReviews, repo: Repo, number: int) -> list[ReviewThread]:
    """The pull request's review threads: GraphQL's, or REST's when GraphQL fails."""
    try:
        return await reviews.threads(repo.owner, repo.name, number)
    except GraphQLError as exc:
        log.warning("review threads of #%d from REST (GraphQL: %s)", number, exc)
    comments = await reviews.review_comments(repo.owner, repo.name, number)
    return rest_threads(comments)


def rest_threads(comments: list[Json]) -> list[ReviewThread]:
    """Review threads rebuilt from REST review comments (oldest first): a comment and its
    replies (`in_reply_to_id`); REST cannot say which are resolved, so none is."""
    grouped: dict[int, list[Json]] = {}
    for c in comments:
        root = c.get("in_reply_to_id") or c["id"]
        grouped.setdefault(int(root), []).append(c)
    threads = []
    for root, items in grouped.items():
        first = items[0]
        threads.append(
            ReviewThread(
                thread_id=f"{REST_THREAD}{root}",
                resolved=False,
                outdated=first.get("line") is None,
                path=str(first.get("path") or ""),
                line=first.get("line"),
                original_line=first.get("original_line"),
                comments=tuple(_rest_comment(c) for c in items),
            )
        )
    return threads


def _rest_comment(c: Json) -> ThreadComment:
    user = c.get("user") or None
    return ThreadComment(
        comment_id=int(c["id"]),
        author=None if user is None else str(user["login"]),
        body=str(c.get("body") or ""),
        created_at=str(c.get("created_at") or ""),
        reply_to=c.get("in_reply_to_id"),
        diff_hunk=str(c.get("diff_hunk") or ""),
    )


def _mentions(body: str, app_login: str) -> bool:
    slug = app_login.removesuffix("[bot]").casefold()
    return bool(slug) and f"@{slug}" in body.casefold()


def decide_pull_comment(command: CommentAdded, facts: ReviewFacts) -> Ignore | Later | None:
    """Whether a comment in a pull request's conversation starts a round: `/teaparty` or an
    @-mention of the App, by a writer, gathered for the window like a lone review comment."""
    number = command.issue.number
    if facts.job_id is None:
        return Ignore(f"pull request #{number} is not a TeaParty job's")
    if not (_asks(command.body) or _mentions(command.body, facts.app_login)):
        return Ignore("a comment that neither says /teaparty nor mentions the App", facts.job_id)
    if facts.permission not in WRITERS:
        who = command.author.login
        return Ignore(f"{who} has no write access: their comment starts no round", facts.job_id)
    due = (command.created_at or facts.now) + facts.window_s
    if due > facts.now:
        return Later(f"comment {command.comment_id}: gathering comments", due - facts.now)
    return None


async def on_pull_comment(command: CommentAdded, ctx: AppContext) -> Outcome:
    """Take a writer's `/teaparty` (or @-mention) on a job's pull request into its next round."""
    repo = command.repo
    job_id = await ctx.ports.reviews.job_of_pull(f"github/{repo.full_name}", command.issue.number)
    facts = ReviewFacts(job_id)
    gh: Installation | None = None
    if job_id is not None:
        gh = await ctx.installation(repo)
        facts = ReviewFacts(
            job_id,
            await ctx.repos.permission(gh, repo.owner, repo.name, command.author.login),
            0,
            await ctx.github.login(),
            (await ctx.office.round_settings(job_id)).window_s,
            time.time(),
        )
    decided = decide_pull_comment(command, facts)
    if decided is not None:
        return await perform(ctx, (decided,), repo=repo, number=command.issue.number)
    assert gh is not None
    assert job_id is not None
    said = Point(f"comment:{command.comment_id}", command.author.login, ask_text(command.body))
    since = (command.created_at or facts.now) - facts.window_s
    where = Where(repo, command.issue.number, command.author.login, facts.app_login, since)
    return await take_round(ctx, gh, job_id, where, said, what=f"comment {command.comment_id}")


def _asks(body: str) -> bool:
    return _COMMAND.search(body) is not None
