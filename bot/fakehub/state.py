"""The local GitHub stand-in's world: users, repositories, issues, pull requests and tokens.

All mutation happens under `HubState.lock`, so the hub can serve from a thread while a test
arranges state from another. Nothing here does I/O except `add_repo`, which creates the bare
repository synchronously (see bot.fakehub.git).
"""

from __future__ import annotations

import itertools
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bot.fakehub.ci_state import HubCi
from bot.fakehub.review_state import PullReviews

Permission = Literal["admin", "maintain", "write", "triage", "read", "none"]
UserKind = Literal["User", "Bot", "Organization"]
REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")
# What an installation of the App grants when a test asks for nothing else: what the App's
# manifest asks for (bot/manifest.py; a test holds the two equal).
DEFAULT_APP_PERMISSIONS: Mapping[str, str] = {
    "actions": "write",
    "checks": "write",
    "contents": "write",
    "issues": "write",
    "metadata": "read",
    "pull_requests": "write",
}
TOKEN_LIFETIME = 3600.0
DOCS = "https://docs.github.com/rest"


class HubError(Exception):
    """A request GitHub would refuse: carries the status and the JSON error body."""

    def __init__(self, status: int, message: str, *, errors: list[dict[str, Any]] | None = None):
        super().__init__(f"{status} {message}")
        self.status = status
        self.body: dict[str, Any] = {
            "message": message,
            "documentation_url": DOCS,
            "status": str(status),
        }
        if errors is not None:
            self.body["errors"] = errors


def not_found() -> HubError:
    """GitHub's answer for anything the caller may not see or that does not exist."""
    return HubError(404, "Not Found")


def validation_failed(*errors: dict[str, Any]) -> HubError:
    """A 422 shaped like GitHub's `validation-error` schema."""
    return HubError(422, "Validation Failed", errors=list(errors))


@dataclass
class User:
    """A GitHub account; `permission` is its role on every repository (None: never added)."""

    login: str
    user_id: int
    kind: UserKind
    permission: Permission | None


@dataclass
class Label:
    """A repository label."""

    label_id: int
    name: str
    color: str


@dataclass
class Comment:
    """An issue or pull-request conversation comment."""

    comment_id: int
    issue_number: int
    author: str
    body: str
    created_at: float
    updated_at: float
    via_app: bool
    reactions: list[Reaction] = field(default_factory=list)


@dataclass
class Reaction:
    """One user's reaction to an issue."""

    reaction_id: int
    author: str
    content: str
    created_at: float


@dataclass
class IssueEvent:
    """An entry of an issue's events list; only `labeled` events are recorded."""

    event_id: int
    event: Literal["labeled"]
    actor: str
    label: Label
    created_at: float


@dataclass
class PullInfo:
    """What makes an issue a pull request: its branches, merge settings and state, reviews."""

    head_owner: str
    head_ref: str
    base_ref: str
    head_sha: str
    base_sha: str
    draft: bool
    maintainer_can_modify: bool
    merged_at: float | None = None
    merged_by: str | None = None
    merge_commit_sha: str | None = None
    reviews: PullReviews = field(default_factory=PullReviews)


@dataclass
class HubIssue:
    """An issue, or the issue half of a pull request (`pull` is set)."""

    number: int
    issue_id: int
    title: str
    body: str | None
    author: str
    created_at: float
    updated_at: float
    state: Literal["open", "closed"] = "open"
    closed_at: float | None = None
    closed_by: str | None = None  # who closed it, while it is closed
    labels: list[Label] = field(default_factory=list)
    comments: list[Comment] = field(default_factory=list)
    reactions: list[Reaction] = field(default_factory=list)
    events: list[IssueEvent] = field(default_factory=list)
    pull: PullInfo | None = None
    pull_id: int = 0
    via_app: bool = False


@dataclass
class HubRepo:
    """A repository and its bare git remote."""

    owner: str
    name: str
    repo_id: int
    path: Path
    default_branch: str
    installation_id: int
    private: bool
    created_at: float
    issues: dict[int, HubIssue] = field(default_factory=dict)
    labels: dict[str, Label] = field(default_factory=dict)

    @property
    def full_name(self) -> str:
        """`owner/name`."""
        return f"{self.owner}/{self.name}"


@dataclass(frozen=True)
class Token:
    """An installation access token the hub issued."""

    token: str = field(repr=False)
    installation_id: int
    expires_at: float
    permissions: Mapping[str, str]
    repositories: frozenset[str] | None


class HubState:
    """Everything the stand-in knows, guarded by one lock."""

    def __init__(
        self,
        root: Path,
        *,
        app_id: int,
        app_slug: str,
        client_id: str,
        app_owner: str,
        permissions: Mapping[str, str],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.root = root
        self.app_id = app_id
        self.app_slug = app_slug
        self.client_id = client_id
        self.permissions = dict(permissions)
        self.clock = clock
        self.lock = threading.RLock()
        self.created_at = clock()
        self.users: dict[str, User] = {}
        self.repos: dict[tuple[str, str], HubRepo] = {}
        self.tokens: dict[str, Token] = {}
        self.workflow_dispatches: list[
            Mapping[str, object]
        ] = []  # actions/create-workflow-dispatch
        self.ci = HubCi()  # check suites, check runs, Actions jobs and their logs
        self._ids = itertools.count(1001)
        self.app_owner = self.user(app_owner, kind="Organization")
        self.bot = self.user(f"{app_slug}[bot]", kind="Bot")

    def next_id(self) -> int:
        """A fresh id; GitHub ids are unique per resource type, these are unique overall."""
        with self.lock:
            return next(self._ids)

    def user(self, login: str, *, kind: UserKind = "User") -> User:
        """The account called `login`, created on first mention as a user with no role."""
        with self.lock:
            if (found := self.users.get(login.lower())) is None:
                found = User(login, self.next_id(), kind, None)
                self.users[login.lower()] = found
            return found

    def set_user(self, login: str, permission: Permission, *, kind: UserKind) -> User:
        """Add or update an account and its role."""
        with self.lock:
            user = self.user(login, kind=kind)
            user.kind, user.permission = kind, permission
            return user

    def add_repo(self, repo: HubRepo) -> None:
        """Register a repository (its bare remote already exists)."""
        with self.lock:
            self.repos[(repo.owner.lower(), repo.name.lower())] = repo
            self.user(repo.owner)

    def repo(self, owner: str, name: str) -> HubRepo:
        """The repository, or 404."""
        with self.lock:
            if (found := self.repos.get((owner.lower(), name.lower()))) is None:
                raise not_found()
            return found

    def issue(self, repo: HubRepo, number: int) -> HubIssue:
        """The issue or pull request `number`, or 404."""
        with self.lock:
            if (found := repo.issues.get(number)) is None:
                raise not_found()
            return found

    def open_issue(self, repo: HubRepo, *, title: str, body: str | None, author: str) -> HubIssue:
        """Create the next issue in `repo` (pull requests share the numbering)."""
        with self.lock:
            now = self.clock()
            number = max(repo.issues, default=0) + 1
            issue = HubIssue(number, self.next_id(), title, body, self.user(author).login, now, now)
            repo.issues[number] = issue
            return issue

    def edit_issue(
        self, issue: HubIssue, *, title: str | None = None, body: str | None = None
    ) -> dict[str, dict[str, str | None]]:
        """Change an issue's title and text; GitHub's `changes` (what each read before)."""
        with self.lock:
            changes: dict[str, dict[str, str | None]] = {}
            if title is not None and title != issue.title:
                changes["title"] = {"from": issue.title}
                issue.title = title
            if body is not None and body != (issue.body or ""):
                changes["body"] = {"from": issue.body}
                issue.body = body
            if changes:
                issue.updated_at = self.clock()
            return changes

    def add_comment(self, repo: HubRepo, issue: HubIssue, *, author: str, body: str) -> Comment:
        """Append a comment; the app's bot user marks it as performed via the app."""
        with self.lock:
            now = self.clock()
            login = self.user(author).login
            comment = Comment(
                self.next_id(), issue.number, login, body, now, now, login == self.bot.login
            )
            issue.comments.append(comment)
            issue.updated_at = now
            return comment

    def find_comment(self, repo: HubRepo, comment_id: int) -> tuple[HubIssue, Comment]:
        """The comment with this id in `repo`, or 404."""
        with self.lock:
            for issue in repo.issues.values():
                for comment in issue.comments:
                    if comment.comment_id == comment_id:
                        return issue, comment
            raise not_found()

    def label(self, repo: HubRepo, name: str) -> Label:
        """The repository label `name`, created on first use."""
        with self.lock:
            if (found := repo.labels.get(name.lower())) is None:
                found = Label(self.next_id(), name, f"{secrets.randbelow(0xFFFFFF):06x}")
                repo.labels[name.lower()] = found
            return found

    def add_label(self, repo: HubRepo, issue: HubIssue, name: str, *, actor: str) -> Label:
        """Put label `name` on `issue` as `actor`, with a `labeled` event unless it was there."""
        with self.lock:
            label = self.label(repo, name)
            if label not in issue.labels:
                now = self.clock()
                issue.labels.append(label)
                issue.updated_at = now
                login = self.user(actor).login
                issue.events.append(IssueEvent(self.next_id(), "labeled", login, label, now))
            return label

    def remove_label(self, repo: HubRepo, issue: HubIssue, name: str) -> Label | None:
        """Take label `name` off `issue`; the label, or None when it was not there."""
        with self.lock:
            label = repo.labels.get(name.lower())
            if label is None or label not in issue.labels:
                return None
            issue.labels.remove(label)
            issue.updated_at = self.clock()
            return label

    def close_issue(self, issue: HubIssue, *, by: str) -> bool:
        """Close `issue` as `by`; False when it was closed already."""
        with self.lock:
            if issue.state == "closed":
                return False
            now = self.clock()
            issue.state, issue.closed_at, issue.updated_at = "closed", now, now
            issue.closed_by = self.user(by).login
            return True

    def issue_token(
        self,
        installation_id: int,
        *,
        permissions: Mapping[str, str],
        repositories: frozenset[str] | None = None,
    ) -> Token:
        """Mint an installation token that expires in one hour."""
        with self.lock:
            token = Token(
                token="ghs_" + secrets.token_hex(18),
                installation_id=installation_id,
                expires_at=self.clock() + TOKEN_LIFETIME,
                permissions=dict(permissions),
                repositories=repositories,
            )
            self.tokens[token.token] = token
            return token

    def installation_repos(self, installation_id: int) -> list[HubRepo]:
        """The repositories an installation covers."""
        with self.lock:
            return [r for r in self.repos.values() if r.installation_id == installation_id]

    def permission_of(self, repo: HubRepo, login: str) -> tuple[str, str]:
        """`(permission, role_name)` as GitHub reports them for `login` on `repo`."""
        with self.lock:
            user = self.user(login)
            if user.login.lower() == repo.owner.lower() and user.permission is None:
                return "admin", "admin"
            role: Permission = user.permission or ("none" if repo.private else "read")
            legacy = {"maintain": "write", "triage": "read"}.get(role, role)
            return legacy, role
