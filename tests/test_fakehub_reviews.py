"""The stand-in's review routes: reviews, review comments, replies, requested reviewers and the
pull request's own state, each checked against GitHub's OpenAPI description."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from fakehub_support import NAME, OWNER, make_jwt
from githubkit import GitHub
from githubkit.exception import RequestFailed
from githubkit.response import Response
from review_support import FILE, numbered, open_review_pull

from bot.fakehub.hub import FakeGitHub
from bot.fakehub.routes import ROUTES
from bot.fakehub.state import HubError


def js(response: Response[Any, Any]) -> Any:
    """A response's JSON, untyped (githubkit's TypedDicts say nothing the asserts need)."""
    return response.json()


async def status_of(call: Any) -> int:
    with pytest.raises(RequestFailed) as failed:
        await call
    return failed.value.response.status_code


async def test_reviews_and_their_comments_are_listed_as_github_lists_them(
    hub: FakeGitHub, gh: GitHub[Any], tmp_path: Path
) -> None:
    number = await open_review_pull(hub, tmp_path / "work")
    asked = await hub.review_pr(
        OWNER,
        NAME,
        number,
        "bob",
        "changes_requested",
        "Two things",
        comments=[(FILE, 3, "Rename this"), (FILE, 12, "And this")],
    )
    approved = await hub.review_pr(OWNER, NAME, number, "carol", "APPROVED")
    head = js(await gh.rest.pulls.async_get(OWNER, NAME, number))["head"]["sha"]

    reviews = js(await gh.rest.pulls.async_list_reviews(OWNER, NAME, number))
    assert [(r["id"], r["state"], r["user"]["login"]) for r in reviews] == [
        (asked, "CHANGES_REQUESTED", "bob"),
        (approved, "APPROVED", "carol"),
    ]
    assert [r["body"] for r in reviews] == ["Two things", ""]  # REST: "" for no body
    assert {r["commit_id"] for r in reviews} == {head}
    one = js(await gh.rest.pulls.async_get_review(OWNER, NAME, number, asked))
    assert one["html_url"].endswith(f"/pull/{number}#pullrequestreview-{asked}")
    assert await status_of(gh.rest.pulls.async_get_review(OWNER, NAME, number, 999999)) == 404

    of_review = js(await gh.rest.pulls.async_list_comments_for_review(OWNER, NAME, number, asked))
    assert [(c["line"], c["original_line"], c["body"]) for c in of_review] == [
        (3, 3, "Rename this"),
        (12, 12, "And this"),
    ]
    assert {c["pull_request_review_id"] for c in of_review} == {asked}
    first = of_review[0]
    assert first["diff_hunk"].startswith("@@ -0,0 +1,30 @@")
    assert first["diff_hunk"].endswith("+line 3")
    assert (first["position"], first["side"], first["commit_id"]) == (3, "RIGHT", head)
    assert "in_reply_to_id" not in first
    assert (
        await status_of(gh.rest.pulls.async_list_comments_for_review(OWNER, NAME, number, 1)) == 404
    )
    everything = js(await gh.rest.pulls.async_list_review_comments(OWNER, NAME, number))
    assert [c["id"] for c in everything] == [c["id"] for c in of_review]
    pull = js(await gh.rest.pulls.async_get(OWNER, NAME, number))
    assert pull["review_comments"] == 2
    assert hub.violations == []


async def test_review_comments_paginate_and_sort_like_other_listings(
    hub: FakeGitHub, gh: GitHub[Any], tmp_path: Path
) -> None:
    number = await open_review_pull(hub, tmp_path / "work")
    comments = [(FILE, 1 + n % 30, f"note {n}") for n in range(105)]
    await hub.review_pr(OWNER, NAME, number, "bob", "COMMENTED", comments=comments)
    first = await gh.rest.pulls.async_list_review_comments(OWNER, NAME, number, per_page=100)
    assert len(js(first)) == 100
    link = first.headers["link"]
    assert 'rel="next"' in link
    assert 'rel="last"' in link
    assert "page=2" in link
    second = await gh.rest.pulls.async_list_review_comments(
        OWNER, NAME, number, per_page=100, page=2
    )
    assert [c["body"] for c in js(second)] == [f"note {n}" for n in range(100, 105)]
    assert 'rel="prev"' in second.headers["link"]
    assert 'rel="next"' not in second.headers["link"]
    newest = await gh.rest.pulls.async_list_review_comments(
        OWNER, NAME, number, sort="created", direction="desc", per_page=3
    )
    assert [c["body"] for c in js(newest)] == ["note 104", "note 103", "note 102"]
    reviews = await gh.rest.pulls.async_list_reviews(OWNER, NAME, number, per_page=1)
    assert len(js(reviews)) == 1
    assert "link" not in reviews.headers
    assert hub.violations == []


async def test_a_reply_joins_its_thread_and_arrives_as_a_review_of_its_own(
    hub: FakeGitHub, gh: GitHub[Any], tmp_path: Path
) -> None:
    number = await open_review_pull(hub, tmp_path / "work")
    await hub.review_pr(OWNER, NAME, number, "bob", "COMMENTED", comments=[(FILE, 5, "Why?")])
    root = hub.review_threads(OWNER, NAME, number)[0].root_id
    answer = await hub.reply_in_thread(OWNER, NAME, number, "alice", root, "Because")
    sent = len(hub.deliveries)

    made = await gh.rest.pulls.async_create_reply_for_review_comment(
        OWNER, NAME, number, answer, body="Fixed in abc123"
    )
    reply = js(made)
    assert made.status_code == 201
    assert made.headers["location"] == reply["url"]
    assert (reply["in_reply_to_id"], reply["user"]["login"]) == (root, "teaparty-demo[bot]")
    assert (reply["path"], reply["line"], reply["original_line"]) == (FILE, 5, 5)
    [thread] = hub.review_threads(OWNER, NAME, number)
    assert thread.comment_ids == [root, answer, reply["id"]]
    assert not thread.resolved  # the App never resolves
    reviews = js(await gh.rest.pulls.async_list_reviews(OWNER, NAME, number))
    assert [r["state"] for r in reviews] == ["COMMENTED"] * 3
    assert reviews[-1]["id"] == reply["pull_request_review_id"]
    assert [(d.event, d.action) for d in hub.deliveries[sent:]] == [
        ("pull_request_review_comment", "created"),
        ("pull_request_review", "submitted"),
    ]
    assert {d.payload["sender"]["login"] for d in hub.deliveries[sent:]} == {"teaparty-demo[bot]"}
    missing = gh.rest.pulls.async_create_reply_for_review_comment(
        OWNER, NAME, number, 424242, body="x"
    )
    assert await status_of(missing) == 404
    assert hub.violations == []


async def test_a_comment_whose_line_changed_is_outdated_and_the_others_move(
    hub: FakeGitHub, gh: GitHub[Any], tmp_path: Path
) -> None:
    number = await open_review_pull(hub, tmp_path / "work")
    await hub.review_pr(
        OWNER, NAME, number, "bob", "COMMENTED", comments=[(FILE, 5, "five"), (FILE, 20, "twenty")]
    )
    text = numbered(changed={5: "line five", 10: "line 10\ninserted"})
    head = await hub.push_to_head(OWNER, NAME, number, "alice", {FILE: text})

    five, twenty = js(await gh.rest.pulls.async_list_review_comments(OWNER, NAME, number))
    assert (five["line"], five["position"], five["original_line"]) == (None, None, 5)
    assert five["commit_id"] == five["original_commit_id"] != head
    assert (twenty["line"], twenty["position"], twenty["original_line"]) == (21, 21, 20)
    assert twenty["commit_id"] == head
    assert twenty["diff_hunk"].endswith("+line 20")  # the hunk it was written on
    assert hub.violations == []


async def test_reviewers_are_requested_from_collaborators_and_again_after_they_review(
    hub: FakeGitHub, gh: GitHub[Any], tmp_path: Path
) -> None:
    number = await open_review_pull(hub, tmp_path / "work")
    hub.add_user("dora", "none")
    asked = await gh.rest.pulls.async_request_reviewers(OWNER, NAME, number, reviewers=["bob"])
    assert asked.status_code == 201
    assert [u["login"] for u in js(asked)["requested_reviewers"]] == ["bob"]
    listed = js(await gh.rest.pulls.async_list_requested_reviewers(OWNER, NAME, number))
    assert (listed["teams"], [u["login"] for u in listed["users"]]) == ([], ["bob"])
    for bad in (["alice"], ["dora"], ["stranger"]):  # the author; no access; never added
        call = gh.rest.pulls.async_request_reviewers(OWNER, NAME, number, reviewers=bad)
        assert await status_of(call) == 422
    teams = gh.rest.pulls.async_request_reviewers(OWNER, NAME, number, team_reviewers=["core"])
    assert await status_of(teams) == 422

    await hub.review_pr(OWNER, NAME, number, "bob", "APPROVED")
    listed = js(await gh.rest.pulls.async_list_requested_reviewers(OWNER, NAME, number))
    assert listed["users"] == []
    again = await gh.rest.pulls.async_request_reviewers(OWNER, NAME, number, reviewers=["bob"])
    assert [u["login"] for u in js(again)["requested_reviewers"]] == ["bob"]
    assert hub.violations == []


async def test_pulls_get_reports_draft_head_and_merge(
    hub: FakeGitHub, gh: GitHub[Any], tmp_path: Path
) -> None:
    number = await open_review_pull(hub, tmp_path / "work")

    async def pull() -> dict[str, Any]:
        got: dict[str, Any] = js(await gh.rest.pulls.async_get(OWNER, NAME, number))
        return got

    await hub.set_draft(OWNER, NAME, number, "alice")
    assert (await pull())["draft"] is True
    updated = await gh.rest.pulls.async_update(OWNER, NAME, number, data={"draft": False})  # type: ignore[call-overload]
    assert js(updated)["draft"] is True  # REST cannot change it, like GitHub
    await hub.set_draft(OWNER, NAME, number, "alice", draft=False)
    head = await hub.push_to_head(OWNER, NAME, number, "carol", {"extra.txt": "more\n"})
    got = await pull()
    assert (got["draft"], got["head"]["sha"], got["commits"], got["merged"]) == (
        False,
        head,
        2,
        False,
    )
    merge = await hub.merge_pr(OWNER, NAME, number, "bob")
    got = await pull()
    assert (got["state"], got["merged"], got["merge_commit_sha"]) == ("closed", True, merge)
    assert got["merged_by"]["login"] == "bob"
    assert got["merged_at"] is not None
    assert got["head"]["sha"] == head
    issue = js(await gh.rest.issues.async_get(OWNER, NAME, number))
    assert issue["pull_request"]["merged_at"] == got["merged_at"]
    reopen = gh.rest.pulls.async_update(OWNER, NAME, number, state="open")
    assert await status_of(reopen) == 422
    assert hub.violations == []


async def test_a_pull_request_whose_head_is_gone_cannot_be_reopened(
    hub: FakeGitHub, gh: GitHub[Any], tmp_path: Path
) -> None:
    number = await open_review_pull(hub, tmp_path / "work")
    await hub.delete_head_branch(OWNER, NAME, number, "alice")
    got = js(await gh.rest.pulls.async_get(OWNER, NAME, number))
    assert (got["state"], got["merged"]) == ("closed", False)
    assert await status_of(gh.rest.pulls.async_update(OWNER, NAME, number, state="open")) == 422
    assert hub.violations == []


async def test_review_routes_need_the_pull_requests_permission(
    hub: FakeGitHub, http: httpx.AsyncClient, pem: str, tmp_path: Path
) -> None:
    number = await open_review_pull(hub, tmp_path / "work")
    await hub.review_pr(OWNER, NAME, number, "bob", "COMMENTED", comments=[(FILE, 2, "Hm")])
    root = hub.review_threads(OWNER, NAME, number)[0].root_id

    async def token(permissions: dict[str, str]) -> dict[str, str]:
        minted = await http.post(
            "app/installations/77/access_tokens",
            headers={"Authorization": f"Bearer {make_jwt(pem)}"},
            json={"permissions": permissions},
        )
        return {"Authorization": f"token {minted.json()['token']}"}

    issues_only = await token({"issues": "write"})
    reader = await token({"pull_requests": "read"})
    base = f"repos/{OWNER}/{NAME}/pulls/{number}"
    assert (await http.get(f"{base}/reviews", headers=issues_only)).status_code == 403
    assert (await http.get(f"{base}/comments", headers=issues_only)).status_code == 403
    assert (await http.get(f"{base}/comments", headers=reader)).status_code == 200
    reply = await http.post(f"{base}/comments/{root}/replies", headers=reader, json={"body": "x"})
    assert reply.status_code == 403
    ask = await http.post(f"{base}/requested_reviewers", headers=reader, json={"reviewers": []})
    assert ask.status_code == 403
    assert hub.violations == []


async def test_a_reply_without_a_body_is_refused_and_recorded(
    hub: FakeGitHub, http: httpx.AsyncClient, gh: GitHub[Any], tmp_path: Path
) -> None:
    number = await open_review_pull(hub, tmp_path / "work")
    await hub.review_pr(OWNER, NAME, number, "bob", "COMMENTED", comments=[(FILE, 2, "Hm")])
    root = hub.review_threads(OWNER, NAME, number)[0].root_id
    await gh.rest.pulls.async_get(OWNER, NAME, number)  # mints the token
    [token] = hub.state.tokens
    refused = await http.post(
        f"repos/{OWNER}/{NAME}/pulls/{number}/comments/{root}/replies",
        headers={"Authorization": f"token {token}"},
        json={"text": "the field is called body"},
    )
    assert refused.status_code == 422
    assert hub.violations == [
        "pulls/create-reply-for-review-comment request: request.body: required property is missing"
    ]


async def test_people_review_as_github_lets_them(hub: FakeGitHub, tmp_path: Path) -> None:
    number = await open_review_pull(hub, tmp_path / "work")
    with pytest.raises(HubError, match="approve your own"):
        await hub.review_pr(OWNER, NAME, number, "alice", "approved")
    with pytest.raises(HubError, match="request changes on your own"):
        await hub.review_pr(OWNER, NAME, number, "alice", "changes_requested", "Hm")
    with pytest.raises(HubError, match="part of the diff"):
        await hub.review_pr(OWNER, NAME, number, "bob", "commented", comments=[(FILE, 31, "x")])
    with pytest.raises(HubError, match="part of the diff"):
        await hub.review_pr(OWNER, NAME, number, "bob", "commented", comments=[("nope", 1, "x")])
    with pytest.raises(HubError, match="needs a body"):
        await hub.review_pr(OWNER, NAME, number, "bob", "commented")
    with pytest.raises(ValueError, match="one of"):
        await hub.review_pr(OWNER, NAME, number, "bob", "dismissed")
    own = await hub.comment_on_line(OWNER, NAME, number, "alice", FILE, 4, "Note to self")
    assert hub.review_threads(OWNER, NAME, number)[0].root_id == own
    hub.resolve_thread(OWNER, NAME, number, own, "alice")
    assert hub.review_threads(OWNER, NAME, number)[0].resolved_by == "alice"
    hub.resolve_thread(OWNER, NAME, number, own, "alice", resolved=False)
    assert not hub.review_threads(OWNER, NAME, number)[0].resolved
    assert hub.deliveries  # each act was announced


def test_every_route_is_an_operation_of_the_description(hub: FakeGitHub) -> None:
    served = set(hub._routes.handlers)
    described = {operation.operation_id for operation in hub.spec.operations}
    assert served == described
    assert set(ROUTES.handlers) < served
    assert {"pulls/list-reviews", "pulls/request-reviewers"} <= set(hub._routes.needs)
