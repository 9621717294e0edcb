"""Webhook payloads become small typed commands of our own; pure, tolerant of extra fields."""

from __future__ import annotations

import reprlib  # shows a bad value, shortened, in an error message
from dataclasses import dataclass
from datetime import datetime

from bot.github.sanitizer import (
    MAX_TEXT_CHARS as MAX_TEXT_CHARS,  # these two moved to bot.github.sanitizer;
)
from bot.github.sanitizer import quote as quote  # re-exported for code that imports them from here
from bot.github.sanitizer import sanitize
from bot.handlers import lifecycle_payloads
from bot.handlers.lifecycle_payloads import LifecycleCommand
from bot.handlers.payload_fields import (  # re-exported: the records every handler reads
    Actor as Actor,
)
from bot.handlers.payload_fields import Ignored as Ignored
from bot.handlers.payload_fields import Issue as Issue
from bot.handlers.payload_fields import PayloadError as PayloadError
from bot.handlers.payload_fields import Repo as Repo
from bot.handlers.payload_fields import (
    _actor,
    _issue,
    _opt,
    _refusal,
    _repo,
    _req,
)

HANDLED_EVENTS: frozenset[str] = frozenset(
    "ping issues issue_comment installation installation_repositories"
    " pull_request pull_request_review pull_request_review_comment check_suite"
    " workflow_run".split()
)

# Who did what a handled delivery is about, by "event.action"; the rest are ignored.
_ACTORS: dict[str, str] = {
    "issues.labeled": "sender",
    "issues.edited": "sender",
    "issue_comment.created": "comment.user",
    "pull_request_review.submitted": "review.user",
}

# Why a handled delivery is not acted on, looked up by "event.action", then by event.
_IGNORED: dict[str, str] = {
    "issues.opened": "work starts when an issue is labelled, not when it is opened",
    "issue_comment.edited": "only new comments are read, not edits",
    "issue_comment.deleted": "only new comments are read, not deletions",
    "pull_request.labeled": "labels on pull requests are not acted on yet",
    "installation": "only an uninstall is acted on",
    "installation_repositories": "only repositories taken out of the installation are acted on",
    "pull_request": "only a pull request closed, made a draft, made ready or reopened is acted on",
    "pull_request_review": "only submitted reviews are acted on",
    "check_suite": "only a completed check suite is acted on",
    "workflow_run": "only a completed workflow run is acted on (runner mode follows CI with it)",
    "pull_request_review_comment": "a review comment is acted on with its review, as one round"
    " (pull_request_review.submitted)",
}


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


Command = (
    Ping | LabelAdded | CommentAdded | IssueEdited | ReviewSubmitted | ChecksCompleted | Ignored
)


def parse_command(
    event: str,
    payload: object,
    *,
    app_login: str | None,
    allowed_bots: frozenset[str] = frozenset(),
) -> Command | LifecycleCommand:
    """Turn one delivery's event name and decoded JSON payload into a command; no I/O.

    What `app_login` (e.g. "teaparty[bot]") did is Ignored, and so is what any bot did unless
    `allowed_bots` names it. A comment is the app's own by its author alone: a person's
    comment that carries a `<!-- teaparty:` marker (a quote of a gate, say) is still that
    person's, its marker removed with the rest of what GitHub does not show. Owner, repository
    and actor names that break GitHub's rules raise PayloadError naming the field.
    """
    if not isinstance(payload, dict):
        raise PayloadError("payload", "expected an object")
    if event == "ping":
        return Ping(zen=_opt(payload, "zen", str) or "")  # answer every ping, zen or not
    if event not in HANDLED_EVENTS:
        return Ignored(f"{event} is ignored: the app does not handle this event.")
    name = f"{event}.{_req(payload, 'action', str)}"
    if found := _elsewhere(name, payload, app_login=app_login, allowed_bots=allowed_bots):
        return found
    path = _ACTORS.get(name)
    if path is None:
        why = _IGNORED.get(name) or _IGNORED.get(event, "the app does not know it")
        return Ignored(f"{name} is ignored: {why}.")
    actor = _actor(payload, path)
    if refused := _refusal(name, actor, app_login=app_login, allowed_bots=allowed_bots):
        return refused
    if event == "pull_request_review":
        return _review(payload, actor)
    repo, issue = _repo(payload), _issue(payload)
    if name == "issues.edited":
        return _edited(payload, repo, issue, actor)
    if event == "issues":
        return LabelAdded(repo, issue, _req(payload, "label.name", str), actor)
    raw = _opt(payload, "comment.body", str) or ""
    written = _timestamp(payload, "comment.created_at")
    return CommentAdded(
        repo, issue, _req(payload, "comment.id", int), sanitize(raw), actor, written
    )


def _elsewhere(
    name: str, payload: dict[str, object], *, app_login: str | None, allowed_bots: frozenset[str]
) -> ChecksCompleted | LifecycleCommand | Ignored | None:
    """Deliveries not read by who did them: failed checks (whoever pushed: the App, often,
    whose CI it is), and what follows a job's label (a pull request closed, an issue closed,
    ...), parsed in lifecycle_payloads. None for any other."""
    if name == "check_suite.completed":
        return _checks(payload)
    if name == "workflow_run.completed":  # runner mode's trigger: check_suite starts no workflow
        return _workflow_run(payload)
    if name in lifecycle_payloads.ACTIONS:
        return lifecycle_payloads.parse_lifecycle(
            name, payload, app_login=app_login, allowed_bots=allowed_bots
        )
    return None


def _checks(payload: dict[str, object]) -> ChecksCompleted | Ignored:
    conclusion = _opt(payload, "check_suite.conclusion", str) or ""
    pulls = _opt(payload, "check_suite.pull_requests", list) or []
    if not pulls:
        why = "it is on no pull request of this repository"
        return Ignored(f"check_suite.completed is ignored: {why} (concluded {conclusion}).")
    return ChecksCompleted(
        _repo(payload),
        _req(payload, "check_suite.id", int),
        sanitize(_opt(payload, "check_suite.app.name", str) or "a check"),
        conclusion,
        _req(payload, "check_suite.head_sha", str),
        _opt(payload, "check_suite.head_branch", str) or "",
        tuple(
            _req(payload, f"check_suite.pull_requests.{n}.number", int) for n in range(len(pulls))
        ),
        _opt(payload, "check_suite.check_runs_url", str) or "",
        sanitize(_opt(payload, "check_suite.app.slug", str) or ""),
        _opt(payload, "check_suite.app.id", int),
    )


def _workflow_run(payload: dict[str, object]) -> ChecksCompleted | Ignored:
    """A workflow run of the project's CI completed: its check suite, as `_checks` reads one."""
    conclusion = _opt(payload, "workflow_run.conclusion", str) or ""
    pulls = _opt(payload, "workflow_run.pull_requests", list) or []
    if not pulls:
        why = "it ran on no pull request of this repository"
        return Ignored(f"workflow_run.completed is ignored: {why} (concluded {conclusion}).")
    return ChecksCompleted(
        _repo(payload),
        _req(payload, "workflow_run.check_suite_id", int),
        sanitize(_opt(payload, "workflow_run.name", str) or "a workflow"),
        conclusion,
        _req(payload, "workflow_run.head_sha", str),
        _opt(payload, "workflow_run.head_branch", str) or "",
        tuple(
            _req(payload, f"workflow_run.pull_requests.{n}.number", int) for n in range(len(pulls))
        ),
        _opt(payload, "workflow_run.html_url", str) or "",
        "github-actions",
        None,
    )


def _review(payload: dict[str, object], author: Actor) -> ReviewSubmitted:
    return ReviewSubmitted(
        _repo(payload),
        _req(payload, "pull_request.number", int),
        _req(payload, "review.id", int),
        _req(payload, "review.state", str).lower(),
        sanitize(_opt(payload, "review.body", str) or ""),
        author,
        _req(payload, "pull_request.head.ref", str),
        _timestamp(payload, "review.submitted_at"),
    )


def _edited(payload: dict[str, object], repo: Repo, issue: Issue, sender: Actor) -> IssueEdited:
    before_title = _opt(payload, "changes.title.from", str)
    before_body = _opt(payload, "changes.body.from", str)
    return IssueEdited(
        repo,
        issue,
        sender,
        _timestamp(payload, "issue.updated_at"),
        None if before_title is None else sanitize(before_title),
        None if before_body is None else sanitize(before_body),
    )


def _timestamp(payload: dict[str, object], path: str) -> float | None:
    """An ISO 8601 time (`2019-05-15T15:20:21Z`) as seconds since the epoch."""
    text = _opt(payload, path, str)
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise PayloadError(path, f"not a time: {reprlib.repr(text)[:80]}") from None


# Typed accessors: a dotted path in ("issue.labels.0.name"; a number indexes a list), a value
# of the asked type out, or PayloadError naming the path. Nothing else in a payload is read.
