"""What every parsed payload is made of: who, which repository, which issue, why a delivery
is ignored, and the typed accessors that read a payload's fields (a dotted path in, a value
of the asked type out, or PayloadError naming the path). Pure; nothing else in a payload is
read. payloads.py's parsers build their commands from these.
"""

from __future__ import annotations

import re
import reprlib  # shows a bad value, shortened, in an error message
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from bot.errors import BotError
from bot.github.sanitizer import sanitize

# GitHub's rules for names, so a name from a payload is safe in a URL or a path. Owners
# (user and organisation logins): letters, digits and hyphens, at most 39, not starting with
# a hyphen; consecutive and trailing hyphens are accepted because GitHub once allowed them
# and such accounts still exist; an Enterprise Managed User's login ends in `_shortcode`.
# Repositories: at most 100 of letters, digits, `.`, `_` and `-`, not `.`, `..` or `*.git`.
_OWNER = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*(?:_[A-Za-z0-9]+)?")
_REPO = re.compile(r"[A-Za-z0-9._-]+")
_BOT_SUFFIX = "[bot]"  # an App's account: `{slug}[bot]`
_T = TypeVar("_T")
_NOUNS = {str: "a string", int: "an integer", bool: "a boolean", list: "a list"}


class PayloadError(BotError, ValueError):
    """A field we need is missing or mistyped; `field` is its dotted path."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


@dataclass(frozen=True)
class Actor:
    """Who did something: a login, and whether GitHub marks it as a bot."""

    login: str
    is_bot: bool


@dataclass(frozen=True)
class Repo:
    """The repository a delivery is about; `installation_id` is None on repo-webhook payloads."""

    owner: str
    name: str
    default_branch: str
    installation_id: int | None
    private: bool | None  # None: not said (a delivery made from what the App read)

    @property
    def full_name(self) -> str:
        """`owner/name`, as GitHub writes it."""
        return f"{self.owner}/{self.name}"


@dataclass(frozen=True)
class Issue:
    """An issue or pull request as its conversation; title and body already sanitized."""

    number: int
    title: str
    body: str
    is_pull_request: bool
    labels: tuple[str, ...]


@dataclass(frozen=True)
class Ignored:
    """A delivery the app does nothing with; `reason` is a sentence naming event.action."""

    reason: str


def refusal(
    name: str, actor: Actor, *, app_login: str | None, allowed_bots: frozenset[str]
) -> Ignored | None:
    """Why `name` done by `actor` is ignored: the App's own doing, or a bot not allowed;
    None when it is read."""
    login = actor.login.casefold()  # GitHub logins are case-insensitive
    if app_login is not None and login == app_login.casefold():
        return Ignored(f"{name} is ignored: {actor.login!r} is the app's own account.")
    if actor.is_bot and login not in {bot.casefold() for bot in allowed_bots}:
        return Ignored(f"{name} is ignored: bot {actor.login!r} is not in allowed_bots.")
    return None


def read_actor(payload: dict[str, object], path: str) -> Actor:
    """Who the account at `path` (`sender`, `comment.user`, ...) is."""
    login = check_login(req(payload, f"{path}.login", str), field=f"{path}.login")
    kind = opt(payload, f"{path}.type", str)
    return Actor(login=login, is_bot=kind == "Bot" or login.endswith(_BOT_SUFFIX))


def read_repo(payload: dict[str, object]) -> Repo:
    """The delivery's repository, its names checked against GitHub's rules."""
    return Repo(
        owner=check_owner(req(payload, "repository.owner.login", str)),
        name=check_repo_name(req(payload, "repository.name", str)),
        default_branch=req(payload, "repository.default_branch", str),
        installation_id=opt(payload, "installation.id", int),
        private=opt(payload, "repository.private", bool),
    )


def check_owner(owner: str, *, field: str = "repository.owner.login") -> str:
    """`owner` if it is a GitHub user or organisation login, else PayloadError naming `field`."""
    if len(owner) > 39 or not _OWNER.fullmatch(owner):
        raise PayloadError(field, f"not a GitHub account name: {reprlib.repr(owner)[:80]}")
    return owner


def check_repo_name(name: str, *, field: str = "repository.name") -> str:
    """`name` if GitHub could have named a repository so, else PayloadError naming `field`."""
    if (
        len(name) > 100
        or not _REPO.fullmatch(name)
        or name in (".", "..")
        or name.lower().endswith(".git")
    ):
        raise PayloadError(field, f"not a GitHub repository name: {reprlib.repr(name)[:80]}")
    return name


def check_login(login: str, *, field: str) -> str:
    """A person's login (the owner rules) or an App's `{slug}[bot]`, else PayloadError."""
    check_owner(login.removesuffix(_BOT_SUFFIX), field=field)
    return login


def read_issue(payload: dict[str, object]) -> Issue:
    """The delivery's issue (or pull request's conversation), its text sanitized."""
    labels = opt(payload, "issue.labels", list) or []
    return Issue(
        number=req(payload, "issue.number", int),
        title=sanitize(req(payload, "issue.title", str)),
        body=sanitize(opt(payload, "issue.body", str) or ""),
        is_pull_request=get(payload, "issue.pull_request") is not None,
        labels=tuple(req(payload, f"issue.labels.{n}.name", str) for n in range(len(labels))),
    )


def get(payload: dict[str, object], path: str) -> object:
    """The value at `path`, or None when it or any parent is missing or null."""
    node: object = payload
    keys = path.split(".")
    for n, key in enumerate(keys):
        if node is None:
            return None
        if isinstance(node, list) and key.isdigit():
            node = node[int(key)] if int(key) < len(node) else None
        elif isinstance(node, dict):
            node = node.get(key)
        else:
            where = ".".join(keys[:n]) or "payload"
            raise PayloadError(where, f"expected an object, got {reprlib.repr(node)[:80]}")
    return node


def opt(payload: dict[str, object], path: str, kind: type[_T]) -> _T | None:
    """The value at `path` if it is a `kind`; None if missing; PayloadError if another type."""
    value = get(payload, path)
    if value is None:
        return None
    if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
        return value  # bool is an int to isinstance, never to us
    raise PayloadError(path, f"expected {_NOUNS[kind]}, got {reprlib.repr(value)[:80]}")


def req(payload: dict[str, object], path: str, kind: type[_T]) -> _T:
    """The value at `path`, a `kind`; PayloadError if missing or another type."""
    value = opt(payload, path, kind)
    if value is None:
        raise PayloadError(path, "missing")
    return value


def full_name(payload: dict[str, object], path: str) -> str:
    """`owner/name`, each part checked against GitHub's rules (PayloadError names `path`)."""
    owner, slash, repo = req(payload, path, str).partition("/")
    if not slash:
        raise PayloadError(path, "not `owner/name`")
    return f"{check_owner(owner, field=path)}/{check_repo_name(repo, field=path)}"


def timestamp(payload: dict[str, object], path: str) -> float | None:
    """An ISO 8601 time (`2019-05-15T15:20:21Z`) as seconds since the epoch."""
    text = opt(payload, path, str)
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise PayloadError(path, f"not a time: {reprlib.repr(text)[:80]}") from None
