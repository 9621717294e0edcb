"""Webhook payloads become small typed commands of our own; pure, tolerant of extra fields.

`PARSERS` holds one parser per (event, action) the App acts on; any other action of a
handled event is Ignored with the reason `_IGNORED` gives. A parser reads who did it first
and refuses what the App's own account did, and what any bot did unless `allowed_bots`
names it; but a pull request closed or merged is a fact whoever did it (a merge queue is a
bot), so only the App's own is refused there; a failed check (whoever pushed: the App,
often, whose CI it is) and a lost installation or repository are facts, read by no one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bot.github.sanitizer import (
    MAX_TEXT_CHARS as MAX_TEXT_CHARS,  # these two moved to bot.github.sanitizer;
)
from bot.github.sanitizer import quote as quote  # re-exported for code that imports them from here
from bot.github.sanitizer import sanitize
from bot.handlers.deliveries import (
    PULL_ACTIONS,
    ChecksCompleted,
    Command,
    CommentAdded,
    IssueClosed,
    IssueEdited,
    LabelAdded,
    LabelRemoved,
    Ping,
    PullAction,
    PullChanged,
    ReposRemoved,
    ReviewSubmitted,
)
from bot.handlers.payload_fields import (  # re-exported: the records every handler reads
    Actor as Actor,
)
from bot.handlers.payload_fields import Ignored as Ignored
from bot.handlers.payload_fields import Issue as Issue
from bot.handlers.payload_fields import PayloadError as PayloadError
from bot.handlers.payload_fields import Repo as Repo
from bot.handlers.payload_fields import (
    full_name,
    get,
    opt,
    read_actor,
    read_issue,
    read_repo,
    refusal,
    req,
    timestamp,
)

HANDLED_EVENTS: frozenset[str] = frozenset(
    "ping issues issue_comment installation installation_repositories"
    " pull_request pull_request_review pull_request_review_comment check_suite"
    " workflow_run".split()
)

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
class Reading:
    """One delivery being read: its `event.action`, and whose doing is refused."""

    name: str
    app_login: str | None
    allowed_bots: frozenset[str]


Parser = Callable[[dict[str, object], Reading], Command]
Build = Callable[[dict[str, object], Actor], Command]  # what an account did, read


def parse_command(
    event: str,
    payload: object,
    *,
    app_login: str | None,
    allowed_bots: frozenset[str] = frozenset(),
) -> Command:
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
        return Ping(zen=opt(payload, "zen", str) or "")  # answer every ping, zen or not
    if event not in HANDLED_EVENTS:
        return Ignored(f"{event} is ignored: the app does not handle this event.")
    action = req(payload, "action", str)
    name = f"{event}.{action}"
    parser = PARSERS.get((event, action))
    if parser is None:
        why = _IGNORED.get(name) or _IGNORED.get(event, "the app does not know it")
        return Ignored(f"{name} is ignored: {why}.")
    return parser(payload, Reading(name, app_login, allowed_bots))


def _by(path: str, build: Build, *, any_bot: bool = False) -> Parser:
    """The parser of what the account at `path` did: Ignored if it is the App's own, or
    (unless `any_bot`: a fact whoever did it) a bot `allowed_bots` does not name."""

    def parse(payload: dict[str, object], reading: Reading) -> Command:
        actor = read_actor(payload, path)
        allowed = frozenset({actor.login}) if any_bot else reading.allowed_bots
        refused = refusal(reading.name, actor, app_login=reading.app_login, allowed_bots=allowed)
        return build(payload, actor) if refused is None else refused

    return parse


def _labeled(payload: dict[str, object], sender: Actor) -> LabelAdded:
    repo, issue = read_repo(payload), read_issue(payload)
    return LabelAdded(repo, issue, req(payload, "label.name", str), sender)


def _edited(payload: dict[str, object], sender: Actor) -> IssueEdited:
    repo, issue = read_repo(payload), read_issue(payload)
    before_title = opt(payload, "changes.title.from", str)
    before_body = opt(payload, "changes.body.from", str)
    return IssueEdited(
        repo,
        issue,
        sender,
        timestamp(payload, "issue.updated_at"),
        None if before_title is None else sanitize(before_title),
        None if before_body is None else sanitize(before_body),
    )


def _commented(payload: dict[str, object], author: Actor) -> CommentAdded:
    repo, issue = read_repo(payload), read_issue(payload)
    raw = opt(payload, "comment.body", str) or ""
    written = timestamp(payload, "comment.created_at")
    return CommentAdded(
        repo, issue, req(payload, "comment.id", int), sanitize(raw), author, written
    )


def _reviewed(payload: dict[str, object], author: Actor) -> ReviewSubmitted:
    return ReviewSubmitted(
        read_repo(payload),
        req(payload, "pull_request.number", int),
        req(payload, "review.id", int),
        req(payload, "review.state", str).lower(),
        sanitize(opt(payload, "review.body", str) or ""),
        author,
        req(payload, "pull_request.head.ref", str),
        timestamp(payload, "review.submitted_at"),
    )


def _pull(action: PullAction) -> Build:
    """How `pull_request.<action>` is read."""

    def build(payload: dict[str, object], sender: Actor) -> PullChanged:
        return PullChanged(
            read_repo(payload),
            req(payload, "pull_request.number", int),
            action,
            opt(payload, "pull_request.merged", bool) or False,
            opt(payload, "pull_request.draft", bool) or False,
            req(payload, "pull_request.head.ref", str),
            sender,
        )

    return build


def _closed(payload: dict[str, object], sender: Actor) -> IssueClosed:
    return IssueClosed(read_repo(payload), read_issue(payload), sender)


def _unlabeled(payload: dict[str, object], sender: Actor) -> LabelRemoved:
    repo = read_repo(payload)
    return LabelRemoved(repo, read_issue(payload), req(payload, "label.name", str), sender)


def _checks(payload: dict[str, object], _: Reading) -> ChecksCompleted | Ignored:
    """A check suite completed: read by no one (whoever pushed: the App, often, whose CI
    it is)."""
    conclusion = opt(payload, "check_suite.conclusion", str) or ""
    pulls = opt(payload, "check_suite.pull_requests", list) or []
    if not pulls:
        why = "it is on no pull request of this repository"
        return Ignored(f"check_suite.completed is ignored: {why} (concluded {conclusion}).")
    return ChecksCompleted(
        read_repo(payload),
        req(payload, "check_suite.id", int),
        sanitize(opt(payload, "check_suite.app.name", str) or "a check"),
        conclusion,
        req(payload, "check_suite.head_sha", str),
        opt(payload, "check_suite.head_branch", str) or "",
        tuple(
            req(payload, f"check_suite.pull_requests.{n}.number", int) for n in range(len(pulls))
        ),
        opt(payload, "check_suite.check_runs_url", str) or "",
        sanitize(opt(payload, "check_suite.app.slug", str) or ""),
        opt(payload, "check_suite.app.id", int),
    )


def _workflow_run(payload: dict[str, object], _: Reading) -> ChecksCompleted | Ignored:
    """A workflow run of the project's CI completed (runner mode's trigger: check_suite starts
    no workflow): its check suite, as `_checks` reads one."""
    conclusion = opt(payload, "workflow_run.conclusion", str) or ""
    pulls = opt(payload, "workflow_run.pull_requests", list) or []
    if not pulls:
        why = "it ran on no pull request of this repository"
        return Ignored(f"workflow_run.completed is ignored: {why} (concluded {conclusion}).")
    return ChecksCompleted(
        read_repo(payload),
        req(payload, "workflow_run.check_suite_id", int),
        sanitize(opt(payload, "workflow_run.name", str) or "a workflow"),
        conclusion,
        req(payload, "workflow_run.head_sha", str),
        opt(payload, "workflow_run.head_branch", str) or "",
        tuple(
            req(payload, f"workflow_run.pull_requests.{n}.number", int) for n in range(len(pulls))
        ),
        opt(payload, "workflow_run.html_url", str) or "",
        "github-actions",
        None,
    )


def _removed(field: str) -> Parser:
    """The parser of a lost installation (`repositories`: what it had, when given) or of
    repositories taken out of it (`repositories_removed`)."""

    def parse(payload: dict[str, object], _: Reading) -> ReposRemoved:
        listed = get(payload, field)
        if listed is not None and not isinstance(listed, list):
            raise PayloadError(field, "expected a list")
        repos = None
        if listed is not None:
            repos = tuple(full_name(payload, f"{field}.{n}.full_name") for n in range(len(listed)))
        return ReposRemoved(
            req(payload, "installation.id", int), repos, read_actor(payload, "sender")
        )

    return parse


PARSERS: dict[tuple[str, str], Parser] = {
    ("issues", "labeled"): _by("sender", _labeled),
    ("issues", "edited"): _by("sender", _edited),
    ("issues", "closed"): _by("sender", _closed),
    ("issues", "unlabeled"): _by("sender", _unlabeled),
    ("issue_comment", "created"): _by("comment.user", _commented),
    ("pull_request_review", "submitted"): _by("review.user", _reviewed),
    ("check_suite", "completed"): _checks,
    ("workflow_run", "completed"): _workflow_run,
    # a pull request closed or merged is a fact whoever did it (a merge queue is a bot)
    **{
        ("pull_request", action): _by("sender", _pull(action), any_bot=action == "closed")
        for action in PULL_ACTIONS
    },
    ("installation", "deleted"): _removed("repositories"),
    ("installation_repositories", "removed"): _removed("repositories_removed"),
}
