"""Deliveries about a job's life after its label, as small typed commands; pure, like payloads.py.

    pull_request.closed, .converted_to_draft, .ready_for_review, .reopened  -> PullChanged
    issues.closed                                                          -> IssueClosed
    issues.unlabeled                                                       -> LabelRemoved
    installation.deleted, installation_repositories.removed                -> ReposRemoved

`payloads.parse_command` hands these here; they are read with its accessors, so a missing or
mistyped field raises PayloadError naming it. Who may cause what: a pull request closed or
merged is a fact whoever did it (a merge queue is a bot), so only the App's own account is
ignored there; a draft, a ready or a reopened pull request, a closed issue and a removed
label would stop or start work, so the App's own and other bots' (unless allowed) are ignored
as every other delivery is. Losing an installation, or repositories of it, is a fact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

from bot.handlers.payload_fields import (
    Actor,
    Ignored,
    Issue,
    PayloadError,
    Repo,
    _actor,
    _get,
    _issue,
    _opt,
    _refusal,
    _repo,
    _req,
    check_owner,
    check_repo_name,
)

PullAction = Literal["closed", "converted_to_draft", "ready_for_review", "reopened"]
PULL_ACTIONS: tuple[PullAction, ...] = (
    "closed",
    "converted_to_draft",
    "ready_for_review",
    "reopened",
)
ACTIONS: frozenset[str] = frozenset(
    [f"pull_request.{action}" for action in PULL_ACTIONS]
    + ["issues.closed", "issues.unlabeled"]
    + ["installation.deleted", "installation_repositories.removed"]
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


LifecycleCommand = PullChanged | IssueClosed | LabelRemoved | ReposRemoved


def parse_lifecycle(
    name: str,
    payload: dict[str, object],
    *,
    app_login: str | None,
    allowed_bots: frozenset[str] = frozenset(),
) -> LifecycleCommand | Ignored:
    """The command of one `event.action` in ACTIONS; no I/O."""
    event = name.split(".", 1)[0]
    if event in ("installation", "installation_repositories"):
        return _removed(name, payload)
    sender = _actor(payload, "sender")
    if name == "pull_request.closed":  # a fact whoever did it (a merge queue is a bot)
        allowed_bots = frozenset({sender.login})
    if refused := _refusal(name, sender, app_login=app_login, allowed_bots=allowed_bots):
        return refused
    repo = _repo(payload)
    if event == "pull_request":
        return PullChanged(
            repo,
            _req(payload, "pull_request.number", int),
            cast(PullAction, name.split(".", 1)[1]),  # ACTIONS holds only PULL_ACTIONS here
            _opt(payload, "pull_request.merged", bool) or False,
            _opt(payload, "pull_request.draft", bool) or False,
            _req(payload, "pull_request.head.ref", str),
            sender,
        )
    if name == "issues.closed":
        return IssueClosed(repo, _issue(payload), sender)
    return LabelRemoved(repo, _issue(payload), _req(payload, "label.name", str), sender)


def _removed(name: str, payload: dict[str, object]) -> ReposRemoved:
    """installation.deleted lists what it had (`repositories`, when given);
    installation_repositories.removed what it lost (`repositories_removed`)."""
    field = "repositories" if name == "installation.deleted" else "repositories_removed"
    listed = _get(payload, field)
    if listed is not None and not isinstance(listed, list):
        raise PayloadError(field, "expected a list")
    repos = None
    if listed is not None:
        repos = tuple(_full_name(payload, f"{field}.{n}.full_name") for n in range(len(listed)))
    return ReposRemoved(_req(payload, "installation.id", int), repos, _actor(payload, "sender"))


def _full_name(payload: dict[str, object], path: str) -> str:
    """`owner/name`, each part checked against GitHub's rules (PayloadError names `path`)."""
    owner, slash, repo = _req(payload, path, str).partition("/")
    if not slash:
        raise PayloadError(path, "not `owner/name`")
    return f"{check_owner(owner, field=path)}/{check_repo_name(repo, field=path)}"
