"""The local GitHub stand-in's REST operations, driven through githubkit and raw httpx."""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakehub_support import (
    APP_ID,
    INSTALLATION,
    NAME,
    OWNER,
    git,
    mint_token,
    push_branch,
)
from githubkit import GitHub
from githubkit.exception import RequestFailed, SecondaryRateLimitExceeded

from bot.fakehub.hub import FakeGitHub


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


async def get_as_installation(
    http: httpx.AsyncClient, pem: str, path: str, **query: str
) -> httpx.Response:
    """GET `path` with `query` as the App's installation."""
    auth = {"Authorization": f"token {await mint_token(http, pem)}"}
    return await http.get(path, params=query, headers=auth)


async def test_a_time_in_the_query_is_iso_8601_as_github_documents(
    hub: FakeGitHub, http: httpx.AsyncClient, pem: str
) -> None:
    number = hub.open_issue(OWNER, NAME, title="t", body="b", author="alice")
    comments = f"repos/{OWNER}/{NAME}/issues/{number}/comments"
    for good in ("2026-11-27T23:30:59Z", "2026-11-27T23:30:59.507+01:00"):
        assert (await get_as_installation(http, pem, comments, since=good)).status_code == 200
    assert hub.violations == []
    spaced = await get_as_installation(http, pem, comments, since="2026-11-27 23:30:59+00:00")
    assert spaced.status_code == 422
    assert spaced.json()["message"] == "Validation Failed"
    (error,) = spaced.json()["errors"]
    assert (error["field"], error["code"], error["value"]) == (
        "since",
        "invalid",
        "2026-11-27 23:30:59+00:00",
    )
    assert hub.violations == [  # and the 422 itself conforms to the description
        "issues/list-comments query parameter since: '2026-11-27 23:30:59+00:00' is not an"
        " ISO 8601 time (YYYY-MM-DDTHH:MM:SSZ)"
    ]


async def test_query_values_are_read_as_their_type_and_checked(
    hub: FakeGitHub, http: httpx.AsyncClient, pem: str
) -> None:
    issues, pulls = f"repos/{OWNER}/{NAME}/issues", f"repos/{OWNER}/{NAME}/pulls"
    listed = await get_as_installation(http, pem, issues, per_page="30", state="all")
    assert listed.status_code == 200
    assert hub.violations == []
    assert (await get_as_installation(http, pem, issues, per_page="abc")).status_code == 422
    assert (await get_as_installation(http, pem, pulls, state="merged")).status_code == 422
    assert hub.violations == [
        "issues/list-for-repo query parameter per_page: 'abc' is not an integer",
        "pulls/list query parameter state: 'merged' is not one of ['open', 'closed', 'all']",
    ]


async def test_a_path_parameter_that_does_not_fit_finds_nothing(
    hub: FakeGitHub, http: httpx.AsyncClient, pem: str
) -> None:
    answer = await get_as_installation(http, pem, f"repos/{OWNER}/{NAME}/issues/abc")
    assert (answer.status_code, answer.json()["message"]) == (404, "Not Found")  # as GitHub
    assert hub.violations == ["issues/get path parameter issue_number: 'abc' is not an integer"]


async def test_an_undocumented_query_parameter_is_recorded_and_ignored_as_github_does(
    hub: FakeGitHub, http: httpx.AsyncClient, pem: str
) -> None:
    answer = await get_as_installation(http, pem, f"repos/{OWNER}/{NAME}/pulls", author="alice")
    assert (answer.status_code, answer.json()) == (200, [])
    assert hub.violations == [
        "pulls/list undocumented query parameter author: not in the description (GitHub ignores it)"
    ]


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
