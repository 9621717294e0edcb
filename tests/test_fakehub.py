"""The local GitHub stand-in, driven through githubkit and raw httpx over 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import importlib.util
import json
import os
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from githubkit import AppAuthStrategy, GitHub
from githubkit.cache import MemCacheStrategy
from githubkit.exception import RequestFailed, SecondaryRateLimitExceeded
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bot.fakehub.hub import FakeGitHub
from bot.fakehub.openapi import OpenAPI
from bot.fakehub.serve import serve_local

APP_ID = 4242
INSTALLATION = 77
OWNER, NAME = "octo", "widgets"
SECRET = "It's a Secret to Everybody"
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "Alice",
    "GIT_AUTHOR_EMAIL": "alice@example.com",
    "GIT_COMMITTER_NAME": "Alice",
    "GIT_COMMITTER_EMAIL": "alice@example.com",
}


def _pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


@pytest.fixture(scope="session")
def pem() -> str:
    return _pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))


@pytest.fixture
def hub(tmp_path: Path, pem: str) -> FakeGitHub:
    hub = FakeGitHub(tmp_path / "remotes", app_id=APP_ID, private_key_pem=pem)
    hub.add_repo(OWNER, NAME, installation_id=INSTALLATION)
    return hub


@pytest.fixture
async def base_url(hub: FakeGitHub) -> AsyncIterator[str]:
    async with hub.serve() as url:
        yield url


def _app_client(base_url: str, pem: str) -> GitHub[Any]:
    # githubkit's default token cache is process-wide, keyed by app and installation id:
    # a fresh one per client keeps one test's hub from seeing another hub's token.
    return GitHub(
        AppAuthStrategy(APP_ID, pem),
        base_url=base_url,
        http_cache=False,
        auto_retry=False,
        cache_strategy=MemCacheStrategy(),
    )


@pytest.fixture
async def gh(base_url: str, pem: str) -> AsyncIterator[GitHub[Any]]:
    app_gh = _app_client(base_url, pem)
    async with app_gh.with_auth(app_gh.auth.as_installation(INSTALLATION)) as inst:
        yield inst


def make_jwt(pem: str, *, iss: int | str = APP_ID, exp_in: int = 540) -> str:
    now = int(time.time())
    return jwt.encode(
        {"iat": now - 60, "exp": now + exp_in, "iss": str(iss)}, pem, algorithm="RS256"
    )


async def mint_token(client: httpx.AsyncClient, pem: str) -> str:
    response = await client.post(
        f"app/installations/{INSTALLATION}/access_tokens",
        headers={"Authorization": f"Bearer {make_jwt(pem)}"},
    )
    assert response.status_code == 201, response.text
    token: str = response.json()["token"]
    return token


@pytest.fixture
async def http(base_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=base_url) as client:
        yield client


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def push_branch(hub: FakeGitHub, work: Path, branch: str, files: dict[str, str]) -> None:
    """Clone the bare remote through its file:// URL, commit `files` on `branch`, push."""
    git(work.parent, "clone", "-q", f"{hub.server_url}/{OWNER}/{NAME}.git", str(work))
    git(work, "checkout", "-q", "-b", branch)
    for name, text in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
    git(work, "add", "-A")
    if files:
        git(work, "commit", "-q", "-m", f"work on {branch}")
    git(work, "push", "-q", "origin", branch)


# -- auth -------------------------------------------------------------------------------


async def test_jwt_then_installation_token_through_githubkit(
    hub: FakeGitHub, base_url: str, pem: str
) -> None:
    app_gh = _app_client(base_url, pem)
    app = (await app_gh.rest.apps.async_get_authenticated()).parsed_data
    assert app is not None
    assert (app.slug, app.id) == ("teaparty-demo", APP_ID)
    installation = (await app_gh.rest.apps.async_get_repo_installation(OWNER, NAME)).parsed_data
    assert installation.id == INSTALLATION
    async with app_gh.with_auth(app_gh.auth.as_installation(installation.id)) as inst:
        for _ in range(3):
            repo = (await inst.rest.repos.async_get(OWNER, NAME)).parsed_data
            assert (repo.full_name, repo.default_branch) == ("octo/widgets", "main")
    assert [(r.operation_id, r.auth) for r in hub.requests] == [
        ("apps/get-authenticated", "jwt"),
        ("apps/get-repo-installation", "jwt"),
        ("apps/create-installation-access-token", "jwt"),
        ("repos/get", "token"),
        ("repos/get", "token"),
        ("repos/get", "token"),
    ]
    token = next(iter(hub.state.tokens.values()))
    assert token.token.startswith("ghs_")
    assert 3590 < token.expires_at - time.time() <= 3600
    assert hub.violations == []


async def test_requests_without_valid_credentials_get_401(
    hub: FakeGitHub, http: httpx.AsyncClient, pem: str
) -> None:
    other = _pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    token = await mint_token(http, pem)
    cases = [
        ("repos/octo/widgets", {}),
        ("repos/octo/widgets", {"Authorization": "token ghs_not-issued-by-the-hub"}),
        ("repos/octo/widgets", {"Authorization": f"Bearer {make_jwt(pem)}"}),
        ("app", {}),
        ("app", {"Authorization": f"token {token}"}),
        ("app", {"Authorization": f"Bearer {make_jwt(other)}"}),
        ("app", {"Authorization": f"Bearer {make_jwt(pem, exp_in=1200)}"}),
        ("app", {"Authorization": f"Bearer {make_jwt(pem, exp_in=-5)}"}),
        ("app", {"Authorization": f"Bearer {make_jwt(pem, iss=999)}"}),
    ]
    for path, headers in cases:
        response = await http.get(path, headers=headers)
        assert response.status_code == 401, (path, headers)
    assert (await http.get("repos/octo/widgets")).json()["message"] == "Bad credentials"
    by_client_id = make_jwt(pem, iss=hub.state.client_id)  # GitHub's recommended issuer
    assert (await http.get("app", headers={"Authorization": f"Bearer {by_client_id}"})).is_success
    assert [r.auth for r in hub.requests[-3:]] == ["jwt", "none", "jwt"]
    assert hub.violations == []


async def test_installation_tokens_expire_after_an_hour(tmp_path: Path, pem: str) -> None:
    now = [time.time()]
    hub = FakeGitHub(tmp_path, app_id=APP_ID, private_key_pem=pem, clock=lambda: now[0])
    hub.add_repo(OWNER, NAME, installation_id=INSTALLATION)
    async with hub.serve() as url, httpx.AsyncClient(base_url=url) as http:
        auth = {"Authorization": f"token {await mint_token(http, pem)}"}
        assert (await http.get("repos/octo/widgets", headers=auth)).status_code == 200
        now[0] += 3601
        assert (await http.get("repos/octo/widgets", headers=auth)).status_code == 401


async def test_tokens_see_only_their_installation_and_permissions(
    hub: FakeGitHub, http: httpx.AsyncClient, pem: str
) -> None:
    hub.add_repo(OWNER, "elsewhere", installation_id=INSTALLATION + 1)
    jwt_auth = {"Authorization": f"Bearer {make_jwt(pem)}"}
    minted = await http.post(
        f"app/installations/{INSTALLATION}/access_tokens",
        headers=jwt_auth,
        json={"permissions": {"issues": "read"}},
    )
    auth = {"Authorization": f"Bearer {minted.json()['token']}"}
    number = hub.open_issue(OWNER, NAME, title="t", body="b", author="alice")
    assert (await http.get("repos/octo/elsewhere", headers=auth)).status_code == 404
    assert (await http.get(f"repos/octo/widgets/issues/{number}", headers=auth)).status_code == 200
    denied = await http.post(
        f"repos/octo/widgets/issues/{number}/comments", headers=auth, json={"body": "x"}
    )
    assert denied.status_code == 403
    assert denied.json()["message"] == "Resource not accessible by integration"
    too_much = await http.post(
        f"app/installations/{INSTALLATION}/access_tokens",
        headers=jwt_auth,
        json={"permissions": {"administration": "write"}},
    )
    assert too_much.status_code == 422
    missing = await http.post("app/installations/999/access_tokens", headers=jwt_auth)
    assert missing.status_code == 404
    assert hub.violations == []


# -- operations -------------------------------------------------------------------------


async def test_issue_comments_and_reactions(hub: FakeGitHub, gh: GitHub[Any]) -> None:
    hub.add_user("alice", "write")
    number = hub.open_issue(OWNER, NAME, title="Add widgets", body="Please", author="alice")
    issue = (await gh.rest.issues.async_get(OWNER, NAME, number)).parsed_data
    assert (issue.title, issue.user and issue.user.login) == ("Add widgets", "alice")
    assert issue.author_association == "COLLABORATOR"

    created = await gh.rest.issues.async_create_comment(OWNER, NAME, number, body="On it")
    comment = created.parsed_data
    assert created.status_code == 201
    assert comment.user
    assert (comment.user.login, comment.user.type) == ("teaparty-demo[bot]", "Bot")
    assert comment.performed_via_github_app
    assert comment.performed_via_github_app.slug == "teaparty-demo"
    updated = await gh.rest.issues.async_update_comment(OWNER, NAME, comment.id, body="Done")
    assert (updated.status_code, updated.parsed_data.body) == (200, "Done")
    assert [c.body for c in hub.comments(OWNER, NAME, number)] == ["Done"]

    first = await gh.rest.reactions.async_create_for_issue(OWNER, NAME, number, content="eyes")
    again = await gh.rest.reactions.async_create_for_issue(OWNER, NAME, number, content="eyes")
    other = await gh.rest.reactions.async_create_for_issue(OWNER, NAME, number, content="rocket")
    assert [first.status_code, again.status_code, other.status_code] == [201, 200, 201]
    assert again.parsed_data.id == first.parsed_data.id
    assert [r.content for r in hub.reactions(OWNER, NAME, number)] == ["eyes", "rocket"]
    reactions = (await gh.rest.issues.async_get(OWNER, NAME, number)).parsed_data.reactions
    assert reactions
    assert (reactions.total_count, reactions.eyes) == (2, 1)
    assert hub.violations == []


async def test_list_comments_paginates_with_a_link_header(
    hub: FakeGitHub, gh: GitHub[Any], http: httpx.AsyncClient, pem: str
) -> None:
    number = hub.open_issue(OWNER, NAME, title="t", body="b", author="alice")
    for i in range(5):
        await hub.comment_as(OWNER, NAME, number, "alice", f"comment {i}")
    auth = {"Authorization": f"token {await mint_token(http, pem)}"}
    first = await http.get(f"repos/octo/widgets/issues/{number}/comments?per_page=2", headers=auth)
    assert [c["body"] for c in first.json()] == ["comment 0", "comment 1"]
    assert 'page=2>; rel="next"' in first.headers["link"]
    assert 'page=3>; rel="last"' in first.headers["link"]
    default = await http.get(f"repos/octo/widgets/issues/{number}/comments", headers=auth)
    assert len(default.json()) == 5
    assert "link" not in default.headers
    before = len(hub.requests)
    pages: Any = gh.rest.paginate(
        gh.rest.issues.async_list_comments, owner=OWNER, repo=NAME, issue_number=number, per_page=2
    )
    bodies = [comment.body async for comment in pages]
    assert bodies == [f"comment {i}" for i in range(5)]
    assert [
        r.query.get("page")
        for r in hub.requests[before:]
        if r.operation_id == "issues/list-comments"
    ] == [
        None,
        "2",
        "3",
    ]
    assert hub.violations == []


async def test_collaborator_permission_maps_roles_like_github(
    hub: FakeGitHub, gh: GitHub[Any]
) -> None:
    for login, role in [("ann", "admin"), ("mo", "maintain"), ("wu", "write"), ("tri", "triage")]:
        hub.add_user(login, role)  # type: ignore[arg-type]
    hub.add_user("nobody", "none")
    seen = {}
    for login in ["ann", "mo", "wu", "tri", "nobody", "stranger", OWNER]:
        reply = await gh.rest.repos.async_get_collaborator_permission_level(OWNER, NAME, login)
        seen[login] = (reply.parsed_data.permission, reply.parsed_data.role_name)
    assert seen == {
        "ann": ("admin", "admin"),
        "mo": ("write", "maintain"),
        "wu": ("write", "write"),
        "tri": ("read", "triage"),
        "nobody": ("none", "none"),
        "stranger": ("read", "read"),
        OWNER: ("admin", "admin"),
    }
    assert hub.violations == []


async def test_contents_come_from_the_bare_repo(
    hub: FakeGitHub, gh: GitHub[Any], tmp_path: Path
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    git(source, "init", "-q", "-b", "trunk")
    (source / "docs").mkdir()
    (source / "docs" / "guide.md").write_text("# Guide\n" + "x" * 100 + "\n")
    git(source, "add", "-A")
    git(source, "commit", "-q", "-m", "docs")
    path = hub.add_repo(
        OWNER, "docs", source=source, default_branch="trunk", installation_id=INSTALLATION
    )
    assert path == hub.root / OWNER / "docs.git"

    reply = await gh.rest.repos.async_get_content(OWNER, "docs", "docs/guide.md")
    data: Any = reply.json()
    assert (data["type"], data["encoding"], data["path"]) == ("file", "base64", "docs/guide.md")
    assert all(len(line) <= 60 for line in data["content"].splitlines())  # GitHub wraps at 60
    assert base64.b64decode(data["content"]) == (source / "docs" / "guide.md").read_bytes()
    listing: Any = (
        await gh.rest.repos.async_get_content(OWNER, "docs", "docs", ref="trunk")
    ).json()
    assert [(e["name"], e["type"]) for e in listing] == [("guide.md", "file")]
    for missing in [("docs/nope.md", None), ("docs/guide.md", "no-such-ref")]:
        with pytest.raises(RequestFailed) as failed:
            await gh.rest.repos.async_get_content(
                OWNER, "docs", missing[0], ref=missing[1] or "trunk"
            )
        assert failed.value.response.status_code == 404
    assert hub.violations == []


async def test_pull_requests_follow_github_rules(
    hub: FakeGitHub, gh: GitHub[Any], tmp_path: Path
) -> None:
    push_branch(hub, tmp_path / "work", "feature", {"widget.py": "print('hi')\n"})
    created = await gh.rest.pulls.async_create(
        OWNER, NAME, head="octo:feature", base="main", title="Add widget", body="Closes #1"
    )
    pull = created.parsed_data
    assert created.status_code == 201
    assert (pull.head.ref, pull.base.ref, pull.user.login) == (
        "feature",
        "main",
        "teaparty-demo[bot]",
    )
    assert (pull.commits, pull.additions, pull.changed_files) == (1, 1, 1)
    assert pull.head.sha == git(tmp_path / "work", "rev-parse", "HEAD")

    with pytest.raises(RequestFailed) as duplicate:
        await gh.rest.pulls.async_create(
            OWNER, NAME, head="octo:feature", base="main", title="Again"
        )
    assert duplicate.value.response.status_code == 422
    assert duplicate.value.response.json()["documentation_url"] == (
        "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"
    )
    assert duplicate.value.response.json()["errors"] == [
        {
            "resource": "PullRequest",
            "code": "custom",
            "message": "A pull request already exists for octo:feature.",
        }
    ]
    with pytest.raises(RequestFailed) as no_branch:
        await gh.rest.pulls.async_create(
            OWNER, NAME, head="octo:missing", base="main", title="Nope"
        )
    assert no_branch.value.response.status_code == 422
    assert no_branch.value.response.json()["errors"][0]["field"] == "head"

    listed = await gh.rest.pulls.async_list(OWNER, NAME, head="octo:feature", base="main")
    found: list[Any] = listed.parsed_data
    assert [p.number for p in found] == [pull.number]
    assert (await gh.rest.pulls.async_list(OWNER, NAME, head="octo:other")).parsed_data == []
    unfiltered = await gh.rest.pulls.async_list(OWNER, NAME, head="other")  # no owner: ignored
    assert len(unfiltered.json()) == 1
    closed = await gh.rest.pulls.async_update(
        OWNER, NAME, pull.number, state="closed", title="Renamed"
    )
    assert (closed.parsed_data.state, closed.parsed_data.title) == ("closed", "Renamed")
    assert (await gh.rest.pulls.async_list(OWNER, NAME)).parsed_data == []
    fetched = (await gh.rest.pulls.async_get(OWNER, NAME, pull.number)).parsed_data
    assert fetched.closed_at is not None
    assert (await gh.rest.issues.async_get(OWNER, NAME, pull.number)).parsed_data.pull_request
    assert [p.number for p in hub.pulls(OWNER, NAME)] == [pull.number]
    assert hub.violations == []


async def test_pull_request_without_new_commits_is_refused(
    hub: FakeGitHub, gh: GitHub[Any], tmp_path: Path
) -> None:
    push_branch(hub, tmp_path / "work", "empty", {})
    with pytest.raises(RequestFailed) as failed:
        await gh.rest.pulls.async_create(OWNER, NAME, head="empty", base="main", title="Nothing")
    assert (
        failed.value.response.json()["errors"][0]["message"] == "No commits between main and empty"
    )
    assert hub.violations == []


async def test_pull_from_an_issue_and_reopening_rules(
    hub: FakeGitHub, gh: GitHub[Any], tmp_path: Path
) -> None:
    push_branch(hub, tmp_path / "work", "fix", {"fix.txt": "fixed\n"})
    number = hub.open_issue(OWNER, NAME, title="Broken", body="It breaks", author="alice")
    converted = await gh.rest.pulls.async_create(OWNER, NAME, head="fix", base="main", issue=number)
    assert (converted.parsed_data.number, converted.parsed_data.title) == (number, "Broken")
    await gh.rest.pulls.async_update(OWNER, NAME, number, state="closed")
    second = await gh.rest.pulls.async_create(OWNER, NAME, head="fix", base="main", title="Again")
    with pytest.raises(RequestFailed) as reopened:
        await gh.rest.pulls.async_update(OWNER, NAME, number, state="open")
    assert reopened.value.response.status_code == 422
    with pytest.raises(RequestFailed) as bad_base:
        await gh.rest.pulls.async_update(OWNER, NAME, second.parsed_data.number, base="nope")
    assert bad_base.value.response.json()["errors"][0]["field"] == "base"
    with pytest.raises(RequestFailed) as not_a_pull:
        await gh.rest.pulls.async_get(OWNER, NAME, 999)
    assert not_a_pull.value.response.status_code == 404
    assert hub.violations == []


async def test_contents_raw_symlinks_and_large_files(
    hub: FakeGitHub, http: httpx.AsyncClient, pem: str, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    git(source, "init", "-q", "-b", "main")
    (source / "big.bin").write_bytes(b"x" * (1024 * 1024 + 1))
    (source / "link").symlink_to("big.bin")
    git(source, "add", "-A")
    git(source, "commit", "-q", "-m", "files")
    hub.add_repo(OWNER, "files", source=source, installation_id=INSTALLATION)
    auth = {"Authorization": f"token {await mint_token(http, pem)}"}
    big = (await http.get("repos/octo/files/contents/big.bin", headers=auth)).json()
    assert (big["encoding"], big["content"], big["size"]) == ("none", "", 1024 * 1024 + 1)
    link = (await http.get("repos/octo/files/contents/link", headers=auth)).json()
    assert (link["type"], link["target"]) == ("symlink", "big.bin")
    raw = await http.get(
        "repos/octo/files/contents/big.bin",
        headers=auth | {"Accept": "application/vnd.github.raw+json"},
    )
    assert raw.content == b"x" * (1024 * 1024 + 1)
    root = (await http.get("repos/octo/files/contents/", headers=auth)).status_code
    assert root == 404  # GitHub lists the root here; the stand-in needs a path
    assert hub.violations == []


async def test_tokens_narrowed_to_repositories(
    hub: FakeGitHub, http: httpx.AsyncClient, pem: str
) -> None:
    hub.add_repo(OWNER, "gadgets", installation_id=INSTALLATION)
    jwt_auth = {"Authorization": f"Bearer {make_jwt(pem)}"}
    url = f"app/installations/{INSTALLATION}/access_tokens"
    minted = await http.post(url, headers=jwt_auth, json={"repositories": ["widgets"]})
    assert [r["name"] for r in minted.json()["repositories"]] == ["widgets"]
    auth = {"Authorization": f"token {minted.json()['token']}"}
    assert (await http.get("repos/octo/widgets", headers=auth)).status_code == 200
    assert (await http.get("repos/octo/gadgets", headers=auth)).status_code == 404
    unknown = await http.post(url, headers=jwt_auth, json={"repositories": ["nope"]})
    assert unknown.status_code == 422
    assert hub.violations == []


async def test_list_comments_since(tmp_path: Path, pem: str) -> None:
    now = [float(int(time.time()))]
    between = datetime.fromtimestamp(now[0] + 30, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    hub = FakeGitHub(tmp_path / "since", app_id=APP_ID, private_key_pem=pem, clock=lambda: now[0])
    hub.add_repo(OWNER, NAME, installation_id=INSTALLATION)
    number = hub.open_issue(OWNER, NAME, title="t", body="b", author="alice")
    await hub.comment_as(OWNER, NAME, number, "alice", "old")
    now[0] += 60
    await hub.comment_as(OWNER, NAME, number, "alice", "new")
    async with hub.serve() as url, httpx.AsyncClient(base_url=url) as http:
        auth = {"Authorization": f"token {await mint_token(http, pem)}"}
        listed = await http.get(
            f"repos/octo/widgets/issues/{number}/comments", params={"since": between}, headers=auth
        )
    assert [c["body"] for c in listed.json()] == ["new"]
    assert hub.violations == []


# -- faults and validation --------------------------------------------------------------


async def test_fail_next_answers_before_anything_else(hub: FakeGitHub, gh: GitHub[Any]) -> None:
    hub.fail_next("GET", r"^/repos/octo/widgets$", 502)
    with pytest.raises(RequestFailed) as failed:
        await gh.rest.repos.async_get(OWNER, NAME)
    assert failed.value.response.status_code == 502
    assert (await gh.rest.repos.async_get(OWNER, NAME)).status_code == 200

    message = (
        "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
    )
    hub.fail_next(
        "POST", r"/comments$", 403, headers={"retry-after": "1"}, body={"message": message}, times=2
    )
    number = hub.open_issue(OWNER, NAME, title="t", body="b", author="alice")
    for _ in range(2):
        with pytest.raises(SecondaryRateLimitExceeded) as limited:
            await gh.rest.issues.async_create_comment(OWNER, NAME, number, body="hi")
        assert limited.value.retry_after.total_seconds() == 1
    assert hub.comments(OWNER, NAME, number) == []
    await gh.rest.issues.async_create_comment(OWNER, NAME, number, body="hi")
    assert [r.status for r in hub.requests if r.operation_id == "issues/create-comment"] == [
        403,
        403,
        201,
    ]
    assert hub.violations == []


async def test_bad_request_bodies_get_422_and_a_violation(
    hub: FakeGitHub, http: httpx.AsyncClient, pem: str
) -> None:
    auth = {"Authorization": f"token {await mint_token(http, pem)}"}
    number = hub.open_issue(OWNER, NAME, title="t", body="b", author="alice")
    bad = await http.post(
        f"repos/octo/widgets/issues/{number}/comments", headers=auth, json={"body": 5}
    )
    assert bad.status_code == 422
    assert "request.body: expected string, got integer" in bad.json()["message"]
    reaction = await http.post(
        f"repos/octo/widgets/issues/{number}/reactions", headers=auth, json={"content": "party"}
    )
    assert reaction.status_code == 422
    assert hub.violations == [
        "issues/create-comment request: request.body: expected string, got integer",
        "reactions/create-for-issue request: request.content: 'party' is not one of"
        " ['+1', '-1', 'laugh', 'confused', 'heart', 'hooray', 'rocket', 'eyes']",
    ]
    assert hub.comments(OWNER, NAME, number) == []
    not_json = await http.patch(
        "repos/octo/widgets/pulls/1",
        headers=auth | {"Content-Type": "application/json"},
        content=b"{",
    )
    assert not_json.status_code == 400
    assert hub.violations[-1] == "pulls/update request: body is not JSON"


async def test_unknown_endpoints_are_404_and_recorded(
    hub: FakeGitHub, http: httpx.AsyncClient
) -> None:
    response = await http.delete("repos/octo/widgets/issues/comments/1")
    assert response.status_code == 404
    assert response.json()["message"] == "Not Found"
    assert [(r.method, r.path) for r in hub.unexpected] == [
        ("DELETE", "/repos/octo/widgets/issues/comments/1")
    ]


# -- webhooks ---------------------------------------------------------------------------


@dataclass
class Receiver:
    url: str
    got: asyncio.Queue[tuple[httpx.Headers, bytes]]

    async def next(self) -> tuple[httpx.Headers, bytes]:
        return await asyncio.wait_for(self.got.get(), timeout=10)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    got: asyncio.Queue[tuple[httpx.Headers, bytes]] = asyncio.Queue()

    async def hook(request: Request) -> Response:
        await got.put((httpx.Headers(request.headers.raw), await request.body()))
        return Response(status_code=202)

    async with serve_local(Starlette(routes=[Route("/webhook", hook, methods=["POST"])])) as url:
        yield Receiver(f"{url}webhook", got)


def verify(headers: httpx.Headers, body: bytes) -> bool:
    want = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(headers["x-hub-signature-256"], want)


async def test_labeling_delivers_a_signed_issues_labeled_webhook(
    hub: FakeGitHub, base_url: str, receiver: Receiver
) -> None:
    hub.webhook_url, hub.webhook_secret = receiver.url, SECRET
    number = hub.open_issue(OWNER, NAME, title="Add widgets", body="Please", author="alice")
    delivery_id = await hub.label_issue(OWNER, NAME, number, "teaparty", sender="alice")
    headers, body = await receiver.next()
    assert verify(headers, body)
    assert headers["x-github-event"] == "issues"
    assert headers["x-github-delivery"] == delivery_id
    assert headers["user-agent"] == "GitHub-Hookshot/fake"
    assert headers["content-type"] == "application/json"
    assert headers["x-github-hook-id"]
    payload = json.loads(body)
    assert payload["action"] == "labeled"
    assert payload["label"]["name"] == "teaparty"
    assert [label["name"] for label in payload["issue"]["labels"]] == ["teaparty"]
    assert (payload["issue"]["number"], payload["sender"]["login"]) == (number, "alice")
    assert payload["installation"]["id"] == INSTALLATION
    assert payload["installation"]["node_id"]
    repo = payload["repository"]
    assert (repo["full_name"], repo["default_branch"], repo["owner"]["login"]) == (
        "octo/widgets",
        "main",
        "octo",
    )
    assert b"Codertocat" not in body
    assert b"Hello-World" not in body

    again = await hub.redeliver(delivery_id)
    headers2, body2 = await receiver.next()
    assert (headers2["x-github-delivery"], body2) == (delivery_id, body)
    assert verify(headers2, body2)
    assert again.redelivery
    assert [(d.delivery_id, d.status) for d in hub.deliveries] == [(delivery_id, 202)] * 2


async def test_comments_are_delivered_including_the_apps_own(
    hub: FakeGitHub, gh: GitHub[Any], receiver: Receiver
) -> None:
    hub.webhook_url, hub.webhook_secret = receiver.url, SECRET
    number = hub.open_issue(OWNER, NAME, title="t", body="b", author="alice")
    comment_id = await hub.comment_as(OWNER, NAME, number, "alice", "@teaparty-demo go")
    headers, body = await receiver.next()
    payload = json.loads(body)
    assert headers["x-github-event"] == "issue_comment"
    assert verify(headers, body)
    assert (payload["action"], payload["comment"]["id"]) == ("created", comment_id)
    assert payload["comment"]["user"]["login"] == "alice"

    await gh.rest.issues.async_create_comment(OWNER, NAME, number, body="Working on it")
    headers, body = await receiver.next()  # GitHub sends an App its own comments too
    payload = json.loads(body)
    assert payload["sender"]["type"] == "Bot"
    assert payload["comment"]["performed_via_github_app"]["id"] == APP_ID
    assert payload["issue"]["comments"] == 2
    assert hub.violations == []


async def test_deliveries_record_unreachable_receivers(hub: FakeGitHub) -> None:
    number = hub.open_issue(OWNER, NAME, title="t", body="b", author="alice")
    await hub.label_issue(OWNER, NAME, number, "bug", sender="alice")
    hub.webhook_url = "http://127.0.0.1:9/unreachable"
    await hub.label_issue(OWNER, NAME, number, "bug", sender="alice")
    assert [(d.status, d.error is not None) for d in hub.deliveries] == [(None, True), (None, True)]
    assert "X-Hub-Signature-256" not in hub.deliveries[0].headers  # no secret, no signature


# -- serving from synchronous code ------------------------------------------------------


def test_serve_in_thread_for_synchronous_callers(hub: FakeGitHub, pem: str) -> None:
    with hub.serve_in_thread() as url:
        app_gh = _app_client(url, pem)
        app = app_gh.rest.apps.get_authenticated().parsed_data
    assert app is not None
    assert app.slug == "teaparty-demo"
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}app")
    assert hub.violations == []


# -- the schema checker -----------------------------------------------------------------


DOC = {
    "paths": {},
    "components": {
        "schemas": {
            "user": {
                "type": "object",
                "required": ["login"],
                "properties": {"login": {"type": "string"}, "id": {"type": "integer"}},
            },
            "nullable-user": {"$ref": "#/components/schemas/user", "nullable": True},
        }
    },
}


@pytest.mark.parametrize(
    ("schema", "value", "errors"),
    [
        (
            {"type": "object", "properties": {"user": {"$ref": "#/components/schemas/user"}}},
            {"user": {"login": None}},
            ["response.user.login: expected string, got null"],
        ),
        (
            {"$ref": "#/components/schemas/user"},
            {},
            ["response.login: required property is missing"],
        ),
        ({"$ref": "#/components/schemas/nullable-user"}, None, []),
        ({"type": "string", "nullable": True}, None, []),
        ({"type": "integer"}, True, ["response: expected integer, got boolean"]),
        (
            {"type": "array", "minItems": 1, "items": {"type": "string"}},
            [],
            ["response: expected at least 1 items, got 0"],
        ),
        (
            {"type": "array", "items": {"type": "string"}},
            ["a", 1],
            ["response[1]: expected string, got integer"],
        ),
        (
            {"type": "object", "additionalProperties": {"type": "string"}},
            {"a": "x", "b": 2},
            ["response.b: expected string, got integer"],
        ),
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, 3, []),
        (
            {"oneOf": [{"type": "number"}, {"type": "integer"}]},
            3,
            ["response: matches 2 alternatives of oneOf, expected exactly one"],
        ),
        ({"anyOf": [{"type": "number"}, {"type": "integer"}]}, 3, []),
        (
            {"anyOf": [{"type": "string"}]},
            3,
            ["response: matches none of anyOf (response: expected string, got integer)"],
        ),
        (
            {"allOf": [{"$ref": "#/components/schemas/user"}, {"required": ["id"]}]},
            {"login": "a"},
            ["response.id: required property is missing"],
        ),
        ({"enum": ["a", "b"]}, "c", ["response: 'c' is not one of ['a', 'b']"]),
        ({"type": "string", "format": "uri", "pattern": "^x$"}, "anything", []),
    ],
)
def test_schema_checker(schema: dict[str, Any], value: object, errors: list[str]) -> None:
    assert OpenAPI(DOC).validate(schema, value, where="response") == errors


def test_bundled_description_matches_paths_to_operations() -> None:
    spec = OpenAPI.bundled()
    matched = spec.match("PATCH", "/repos/o/r/issues/comments/5")
    assert matched
    assert matched[0].operation_id == "issues/update-comment"
    matched = spec.match("GET", "/repos/o/r/contents/a/b/c.md")
    assert matched
    assert (matched[0].operation_id, matched[1]["path"]) == (
        "repos/get-content",
        "a/b/c.md",
    )
    assert spec.match("GET", "/repos/o/r/issues/comments/5") is None
    assert len(spec.operations) == 15


def test_trim_keeps_referenced_components_and_drops_documentation() -> None:
    loader = importlib.util.spec_from_file_location(
        "trim_openapi", Path(__file__).parent.parent / "tools" / "trim_openapi.py"
    )
    assert loader
    assert loader.loader
    trim_openapi = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(trim_openapi)
    ok = {"$ref": "#/components/schemas/thing"}
    full = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1.2.3"},
        "paths": {
            f"/{op}": {
                "get": {
                    "operationId": op,
                    "description": "d",
                    "responses": {
                        "200": {"description": "x", "content": {"application/json": {"schema": ok}}}
                    },
                }
            }
            for op in trim_openapi.OPERATIONS
        }
        | {"/other": {"get": {"operationId": "other", "responses": {}}}},
        "components": {
            "schemas": {
                "thing": {
                    "description": "doc",
                    "example": 1,
                    "properties": {"description": {"$ref": "#/components/schemas/leaf"}},
                },
                "leaf": {"type": "string"},
                "unused": {"type": "string"},
            },
            "examples": {"thing": {"value": 1}},
        },
    }
    trimmed = trim_openapi.trim(full, source_name="full.json")
    assert set(trimmed["components"]["schemas"]) == {"thing", "leaf"}
    assert trimmed["components"]["schemas"]["thing"] == {
        "properties": {"description": {"$ref": "#/components/schemas/leaf"}}
    }
    assert "/other" not in trimmed["paths"]
    assert "examples" not in trimmed["components"]
    assert trimmed["info"]["version"] == "1.2.3"
    assert trimmed["x-trimmed-from"].startswith("full.json")
