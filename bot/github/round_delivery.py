"""A review round delivered on GitHub: one push, one reply per answered thread, one summary.

The job driver has already merged what people pushed to the branch during the round (the
engine's `catch_up`) and checked protected paths; this reads the pull request's head, has
the engine push the job branch without force (`RoundLedger.push`: a push GitHub refuses
fails the delivery, to be retried: nothing is overwritten), replies in each thread the lead
answered, naming the commit that addresses it where the round changed code, never
resolving a thread (the reviewer's act), posts the round's summary on the pull request, and
asks its reviewers to review again. The engine records each reply as soon as it is posted
(`RoundLedger.replied`), and the summary carries a marker, so a retried delivery posts
nothing twice.
"""

from __future__ import annotations

import logging
from typing import Protocol

from bot.errors import GitHubError
from bot.github.client import GitHubApp, Identity, Installation, Json
from bot.github.outbound import Outbound
from bot.github.reviews import PullReviews
from bot.github.subject import Subject
from bot.github.tracking import marker
from orchestrator.api import ForgeError, JobStatus, ReviewRound, RoundLedger, RoundPoint


class GitHubForge(Protocol):
    """What delivering a round needs of the job's forge (bot/github/forge.py's, which
    delivers rounds with this module): GitHub, the issue, and how the App writes there."""

    @property
    def app(self) -> GitHubApp:
        """The App, to reach GitHub as the job's installation."""
        ...

    @property
    def subject(self) -> Subject:
        """The issue the job serves."""
        ...

    @property
    def agent(self) -> Outbound:
        """How the App writes agents' text on GitHub."""
        ...

    @property
    def identity(self) -> Identity:
        """Who the App writes as."""
        ...


log = logging.getLogger(__name__)
REST_THREAD = "rest:"  # a thread known only from REST (GraphQL failed): replies go to a comment
SUMMARY_REPLY_CHARS = 300  # of each point's answer, in the summary


async def deliver_round(
    forge: GitHubForge, status: JobStatus, review: ReviewRound, ledger: RoundLedger
) -> str | None:
    """Have the round's work pushed, answer its points and summarise it; the commit pushed."""
    s = forge.subject
    found = ledger.pull
    if found is None:
        raise ForgeError(f"job {status.job_id} has a review round but no pull request recorded")
    gh = await forge.app.installation(s.installation_id)
    reviews = PullReviews(gh)
    before = str((await reviews.pull(s.owner, s.repo, found.number))["head"]["sha"])
    head = await ledger.push()
    changed = head is not None and head != before
    for point in review.points:
        if point.action is not None and point.replied_ref is None and point.point.thread_id:
            body = reply_body(point, head if changed else None, forge.agent)
            ref = await _reply(reviews, forge, found.number, point, body)
            await ledger.replied(point.number, ref)  # before the next: never posted twice
    summary = summary_body(review, status, head if changed else None, forge.agent)
    await _post_summary(gh, forge, found.number, review.round_id, summary)
    await _request_again(reviews, forge, found.number, review)
    return head if changed else None


def reply_body(point: RoundPoint, commit: str | None, agent: Outbound) -> str:
    """The one reply in a point's thread: the lead's answer, and the commit for a change."""
    text = agent.block(point.reply or "")
    if point.action == "change" and commit is not None:
        text += f"\n\nAddressed in {commit}."
    elif point.action == "disagree":
        text += "\n\n(Not changed, as the decider decided.)"
    return text


def summary_body(
    review: ReviewRound, status: JobStatus, commit: str | None, agent: Outbound
) -> str:
    """The round's one summary comment on the pull request."""
    who = ", ".join(f"@{login}" for login in review.reviewers) or "the review"
    pushed = f"Pushed {commit}." if commit else "Nothing to push: no code changed."
    lines = [
        marker(f"round:{review.round_id}"),
        f"### TeaParty review round {review.number}",
        "",
        f"For {who}: {len(review.points)} point(s). {pushed}",
        "",
    ]
    for p in review.points:
        where = f" `{agent.inline(p.point.path)}`" if p.point.path else ""
        answer = agent.inline(p.reply or "", limit=SUMMARY_REPLY_CHARS) if p.reply else ""
        said = f"{p.action}: {answer}" if p.action else "not answered by the lead"
        lines.append(f"- Point {p.number} (@{p.point.author}{where}): {said}")
    if status.result:
        lines += ["", agent.block(status.result[:4_000])]
    lines += ["", "<sub>Threads are left for their reviewers to resolve.</sub>"]
    return "\n".join(lines)


async def _reply(
    reviews: PullReviews, forge: GitHubForge, number: int, point: RoundPoint, body: str
) -> str:
    s, thread = forge.subject, point.point.thread_id or ""
    if thread.startswith(REST_THREAD) and point.point.comment_id is not None:
        made: Json = await reviews.reply(
            s.owner, s.repo, number, point.point.comment_id, body, identity=forge.identity
        )
        return str(made["id"])
    comment = await reviews.reply_in_thread(
        s.owner, s.repo, number, thread, body, identity=forge.identity
    )
    return str(comment.comment_id)


async def _post_summary(
    gh: Installation, forge: GitHubForge, number: int, round_id: int, body: str
) -> None:
    s = forge.subject
    key = marker(f"round:{round_id}")
    found = await gh.find_comment(s.owner, s.repo, number, key, forge.identity)
    if found is None:
        await gh.comment(s.owner, s.repo, number, body, identity=forge.identity)
    elif found.get("body") != body:
        await gh.edit_comment(s.owner, s.repo, int(found["id"]), body)


async def _request_again(
    reviews: PullReviews, forge: GitHubForge, number: int, review: ReviewRound
) -> None:
    """Ask the round's reviewers to review again (not the App, which cannot review itself)."""
    logins = [r for r in review.reviewers if r.lower() != forge.identity.login.lower()]
    if not logins:
        return
    try:
        await reviews.request_reviewers(forge.subject.owner, forge.subject.repo, number, logins)
    except GitHubError as exc:  # e.g. a reviewer who lost access: the round stands
        log.warning("review not re-requested from %s: %s", ", ".join(logins), exc)
