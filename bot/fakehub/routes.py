"""The REST operations the local GitHub stand-in serves, one handler per operationId.

Handlers see a `Call` that already passed authentication and the checks of its parameters
(bot/fakehub/parameters.py) and request body against the description, check what an
installation token may touch, and return a `Reply` (or raise `HubError`, as GitHub answers
404/403/422).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from bot.fakehub import git
from bot.fakehub.oauth import public_user_json, user_permissions
from bot.fakehub.shapes import (
    Json,
    Urls,
    app_json,
    collaborator_json,
    comment_json,
    content_links,
    encode_content,
    installation_json,
    issue_json,
    reaction_json,
    repo_json,
    timestamp,
)
from bot.fakehub.state import HubError, HubRepo, HubState, Reaction, Token, not_found
from bot.fakehub.webhooks import Outgoing, comment_created, issue_edited

_LEVELS = {"read": 1, "write": 2, "admin": 3}
MAX_FILE_SIZE = 1024 * 1024  # above this GitHub sends `encoding: none` and no content


@dataclass(frozen=True)
class Call:
    """An authenticated request: path parameters, query, decoded JSON body and token."""

    params: Mapping[str, str]
    query: Mapping[str, str]
    body: Any
    token: Token | None
    urls: Urls
    accept: str = ""
    user: str | None = None  # the login a user access token acts for


@dataclass
class Reply:
    """What the hub answers, plus the webhooks to send (or send again) once it has answered."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    deliveries: list[Outgoing] = field(default_factory=list)


Handler = Callable[[HubState, Call], Awaitable[Reply]]


@dataclass
class Routes:
    """Handlers by operationId, and the installation permission each one needs."""

    handlers: dict[str, Handler] = field(default_factory=dict)
    needs: dict[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)

    def on(
        self, operation_id: str, *, needs: tuple[str, ...] = (), level: str = "read"
    ) -> Callable[[Handler], Handler]:
        """Register a handler; one of the `needs` permissions must reach `level`."""

        def register(handler: Handler) -> Handler:
            self.handlers[operation_id] = handler
            if needs:
                self.needs[operation_id] = (needs, level)
            return handler

        return register

    def __or__(self, other: Routes) -> Routes:
        return Routes(self.handlers | other.handlers, self.needs | other.needs)

    def check_permission(self, operation_id: str, token: Token) -> None:
        """403 when the installation token lacks the permission the operation needs."""
        if operation_id in self.needs:
            names, level = self.needs[operation_id]
            if not any(grants(token.permissions.get(name), level) for name in names):
                raise HubError(403, "Resource not accessible by integration")


ROUTES = Routes()


def grants(granted: str | None, wanted: str) -> bool:
    """Whether permission level `granted` covers `wanted` (read < write < admin)."""
    return _LEVELS.get(granted or "", 0) >= _LEVELS.get(wanted, 99)


def repo_for(state: HubState, call: Call) -> HubRepo:
    """The repository the call's path names, or 404 when it is not there for its token."""
    repo = state.repo(call.params["owner"], call.params["repo"])
    if call.token is not None and not sees(call.token, repo):
        raise not_found()  # GitHub hides what an installation cannot see
    if call.user is not None and repo.private and state.permission_of(repo, call.user)[1] == "none":
        raise not_found()  # ... and what a user cannot
    return repo


def sees(token: Token, repo: HubRepo) -> bool:
    """Whether an installation token reaches `repo`."""
    return token.installation_id == repo.installation_id and (
        token.repositories is None or repo.full_name.lower() in token.repositories
    )


def path_number(call: Call, name: str) -> int:
    try:
        return int(call.params[name])
    except ValueError:
        raise not_found() from None


def _int_query(call: Call, name: str, default: int) -> int:
    try:
        return int(call.query.get(name, default))
    except ValueError:
        return default


def page_size(call: Call) -> int:
    """The `per_page` query parameter: 30 unless given, at most 100."""
    return min(max(_int_query(call, "per_page", 30), 1), 100)


def paginate(items: list[Json], call: Call, path: str) -> tuple[list[Json], dict[str, str]]:
    """One page of `items` and GitHub's `Link` header (`per_page` ≤ 100, default 30)."""
    per_page = page_size(call)
    page = max(_int_query(call, "page", 1), 1)
    last = max(math.ceil(len(items) / per_page), 1)

    def link(number: int, rel: str) -> str:
        query = urlencode({**call.query, "per_page": per_page, "page": number})
        return f'<{call.urls.api}{path.lstrip("/")}?{query}>; rel="{rel}"'

    links = [link(page - 1, "prev")] if page > 1 else []
    links += [link(page + 1, "next"), link(last, "last")] if page < last else []
    links += [link(1, "first")] if page > 1 else []
    chunk = items[(page - 1) * per_page : page * per_page]
    return chunk, ({"Link": ", ".join(links)} if links else {})


@ROUTES.on("apps/get-authenticated")
async def get_app(state: HubState, call: Call) -> Reply:
    """GET /app."""
    return Reply(200, app_json(state, call.urls))


@ROUTES.on("apps/create-installation-access-token")
async def create_token(state: HubState, call: Call) -> Reply:
    """POST /app/installations/{installation_id}/access_tokens."""
    installation_id = path_number(call, "installation_id")
    if not (repos := state.installation_repos(installation_id)):
        raise not_found()
    body = call.body or {}
    wanted: Mapping[str, str] = body.get("permissions") or state.permissions
    if not all(grants(state.permissions.get(name), level) for name, level in wanted.items()):
        raise HubError(422, "The permissions requested are not granted to this installation.")
    chosen = _chosen_repos(repos, body)
    scope = None if chosen is None else frozenset(r.full_name.lower() for r in chosen)
    # Every installation token can read metadata, whatever else was asked for.
    granted = {"metadata": "read", **wanted}
    token = state.issue_token(installation_id, permissions=granted, repositories=scope)
    reply: Json = {
        "token": token.token,
        "expires_at": timestamp(token.expires_at),
        "permissions": dict(token.permissions),
        "repository_selection": "selected",
    }
    if chosen is not None:
        reply["repositories"] = [repo_json(state, r, call.urls) for r in chosen]
    return Reply(201, reply)


def _chosen_repos(repos: list[HubRepo], body: Json) -> list[HubRepo] | None:
    """The repositories a token is narrowed to (None: all of the installation's), or 422."""
    names, ids = body.get("repositories"), body.get("repository_ids")
    if names is None and ids is None:
        return None
    chosen = [r for r in repos if r.name in (names or []) or r.repo_id in (ids or [])]
    if len(chosen) != len(names or []) + len(ids or []):
        raise HubError(
            422,
            "There is at least one repository that does not exist or is not accessible"
            " to the parent installation.",
        )
    return chosen


@ROUTES.on("apps/get-repo-installation")
async def get_repo_installation(state: HubState, call: Call) -> Reply:
    """GET /repos/{owner}/{repo}/installation."""
    repo = repo_for(state, call)
    return Reply(200, installation_json(state, repo.installation_id, call.urls))


@ROUTES.on("repos/get", needs=("metadata",))
async def get_repo(state: HubState, call: Call) -> Reply:
    """GET /repos/{owner}/{repo}; with a user's token, the user's permissions on it too."""
    repo = repo_for(state, call)
    found = repo_json(state, repo, call.urls)
    if call.user is not None:
        found["permissions"] = user_permissions(state.permission_of(repo, call.user)[1])
    return Reply(200, found)


@ROUTES.on("users/get-authenticated")
async def get_authenticated_user(state: HubState, call: Call) -> Reply:
    """GET /user: the account a user access token acts for (an installation has none)."""
    if call.user is None:
        raise HubError(403, "Resource not accessible by integration")
    return Reply(200, public_user_json(state.user(call.user), call.urls))


@ROUTES.on("repos/get-collaborator-permission-level", needs=("metadata",))
async def get_permission(state: HubState, call: Call) -> Reply:
    """GET /repos/{owner}/{repo}/collaborators/{username}/permission."""
    repo = repo_for(state, call)
    return Reply(200, collaborator_json(state, repo, call.params["username"], call.urls))


@ROUTES.on("repos/get-content", needs=("contents", "single_file"))
async def get_content(state: HubState, call: Call) -> Reply:
    """GET /repos/{owner}/{repo}/contents/{path}: files and directories of the bare repo."""
    repo = repo_for(state, call)
    ref = call.query.get("ref") or repo.default_branch
    if (commit := await git.resolve_commit(repo.path, ref)) is None:
        raise HubError(404, f"No commit found for the ref {ref}")
    path = call.params["path"].strip("/")
    if (found := await git.entry(repo.path, commit, path)) is None:
        raise not_found()
    if found.kind == "tree":
        entries = await git.list_tree(repo.path, commit, path)
        return Reply(200, [_content_item(repo, e, ref, call.urls) for e in entries])
    if found.kind != "blob":
        raise not_found()  # submodules are not imitated
    data = await git.read_blob(repo.path, found.sha)
    if "vnd.github.raw" in call.accept and found.mode != "120000":
        return Reply(200, raw=data, headers={"Content-Type": "application/vnd.github.raw"})
    item = _content_item(repo, found, ref, call.urls)
    if found.mode == "120000":
        return Reply(200, item | {"target": data.decode(errors="replace")})
    too_big = len(data) > MAX_FILE_SIZE
    item |= {
        "encoding": "none" if too_big else "base64",
        "content": "" if too_big else encode_content(data),
    }
    return Reply(200, item)


def _content_item(repo: HubRepo, item: git.TreeEntry, ref: str, urls: Urls) -> Json:
    kind = {"tree": "dir", "commit": "submodule"}.get(item.kind, "file")
    kind = "symlink" if item.mode == "120000" else kind
    links = content_links(repo, urls, path=item.path, ref=ref, sha=item.sha, kind=kind)
    download = f"{urls.repo_html(repo)}/raw/{ref}/{item.path}" if kind == "file" else None
    return {
        "type": kind,
        "size": item.size,
        "name": item.name,
        "path": item.path,
        "sha": item.sha,
        "download_url": download,
        **links,
    }


@ROUTES.on("issues/get", needs=("issues", "pull_requests"))
async def get_issue(state: HubState, call: Call) -> Reply:
    """GET /repos/{owner}/{repo}/issues/{issue_number}."""
    repo = repo_for(state, call)
    with state.lock:
        issue = state.issue(repo, path_number(call, "issue_number"))
        return Reply(200, issue_json(state, repo, issue, call.urls))


@ROUTES.on("issues/update", needs=("issues",), level="write")
async def update_issue(state: HubState, call: Call) -> Reply:
    """PATCH /repos/{owner}/{repo}/issues/{issue_number}: the title and text (the rest of
    what GitHub lets this change is not imitated); `issues.edited` follows when they changed."""
    repo = repo_for(state, call)
    body = call.body or {}
    with state.lock:
        issue = state.issue(repo, path_number(call, "issue_number"))
        if issue.pull is not None:
            raise not_found()  # a pull request's title is changed through pulls/update
        title = body.get("title")
        changes = state.edit_issue(
            issue,
            title=None if title is None else str(title),
            body=body.get("body") if "body" in body else None,
        )
        reply = issue_json(state, repo, issue, call.urls)
    deliveries: list[Outgoing] = []
    if changes:
        sender = state.bot.login
        payload = issue_edited(state, repo, issue, changes, call.urls, sender=sender)
        deliveries.append(("issues", payload))
    return Reply(200, reply, deliveries=deliveries)


@ROUTES.on("issues/list-comments", needs=("issues", "pull_requests"))
async def list_comments(state: HubState, call: Call) -> Reply:
    """GET …/issues/{issue_number}/comments, paginated with a `Link` header."""
    repo = repo_for(state, call)
    since = query_since(call)
    with state.lock:
        issue = state.issue(repo, path_number(call, "issue_number"))
        items = [
            comment_json(state, repo, c, call.urls) for c in issue.comments if c.updated_at >= since
        ]
    page, headers = paginate(items, call, f"repos/{repo.full_name}/issues/{issue.number}/comments")
    return Reply(200, page, headers)


def query_since(call: Call) -> float:
    """The `since` query parameter (ISO 8601) as a timestamp; 0 when absent or unreadable."""
    try:
        return datetime.fromisoformat(call.query.get("since", "")).timestamp()
    except ValueError:
        return 0.0


@ROUTES.on("issues/create-comment", needs=("issues", "pull_requests"), level="write")
async def create_comment(state: HubState, call: Call) -> Reply:
    """POST …/issues/{issue_number}/comments; the App receives it back as a webhook."""
    repo = repo_for(state, call)
    with state.lock:
        issue = state.issue(repo, path_number(call, "issue_number"))
        comment = state.add_comment(repo, issue, author=state.bot.login, body=call.body["body"])
        body = comment_json(state, repo, comment, call.urls)
    payload = comment_created(state, repo, comment, call.urls)
    return Reply(201, body, {"Location": body["url"]}, deliveries=[("issue_comment", payload)])


@ROUTES.on("issues/update-comment", needs=("issues", "pull_requests"), level="write")
async def update_comment(state: HubState, call: Call) -> Reply:
    """PATCH …/issues/comments/{comment_id}."""
    repo = repo_for(state, call)
    with state.lock:
        _, comment = state.find_comment(repo, path_number(call, "comment_id"))
        comment.body = call.body["body"]
        comment.updated_at = state.clock()
        return Reply(200, comment_json(state, repo, comment, call.urls))


@ROUTES.on("reactions/create-for-issue-comment", needs=("issues", "pull_requests"), level="write")
async def create_comment_reaction(state: HubState, call: Call) -> Reply:
    """POST …/issues/comments/{comment_id}/reactions: 201 when new, 200 when it exists."""
    repo = repo_for(state, call)
    with state.lock:
        _, comment = state.find_comment(repo, path_number(call, "comment_id"))
        return _react(state, call, comment.reactions)


@ROUTES.on("reactions/create-for-issue", needs=("issues", "pull_requests"), level="write")
async def create_reaction(state: HubState, call: Call) -> Reply:
    """POST …/issues/{issue_number}/reactions: 201 when new, 200 when it already exists."""
    repo = repo_for(state, call)
    with state.lock:
        issue = state.issue(repo, path_number(call, "issue_number"))
        return _react(state, call, issue.reactions)


def _react(state: HubState, call: Call, reactions: list[Reaction]) -> Reply:
    """The App's reaction of the asked content among `reactions`, added when new."""
    content, author = call.body["content"], state.bot.login
    for reaction in reactions:
        if reaction.author == author and reaction.content == content:
            return Reply(200, reaction_json(state, reaction, call.urls))
    reaction = Reaction(state.next_id(), author, content, state.clock())
    reactions.append(reaction)
    return Reply(201, reaction_json(state, reaction, call.urls))
