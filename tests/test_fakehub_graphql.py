"""The stand-in's `POST /graphql`: the App's documents answered as GitHub answers them, in the
shape GitHub's schema gives them; any other document refused and recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from fakehub_support import NAME, OWNER, make_jwt, mint_token
from graphql import execute_sync, parse
from review_support import FILE, bobs_thread, many_threads, numbered, open_review_pull
from test_graphql_documents import github_schema

from bot.fakehub.hub import FakeGitHub
from bot.github.graphql_queries import (
    ADD_THREAD_REPLY,
    MARK_READY,
    REVIEW_THREADS,
    THREAD_COMMENTS,
    Document,
)


class Client:
    """GraphQL calls to the stand-in with one installation token."""

    def __init__(self, http: httpx.AsyncClient, token: str) -> None:
        self.http = http
        self.headers = {"Authorization": f"token {token}"}

    async def post(self, body: Any) -> httpx.Response:
        return await self.http.post("graphql", json=body, headers=self.headers)

    async def run(self, document: Document, **variables: Any) -> dict[str, Any]:
        response = await self.post({"query": document.text, "variables": variables})
        assert response.status_code == 200
        assert response.headers["x-ratelimit-resource"] == "graphql"
        body: dict[str, Any] = response.json()
        if "errors" not in body:
            conforms(document, variables, body["data"])
        return body

    async def threads(self, number: int, after: str | None = None) -> dict[str, Any]:
        body = await self.run(REVIEW_THREADS, owner=OWNER, name=NAME, number=number, after=after)
        connection: dict[str, Any] = body["data"]["repository"]["pullRequest"]["reviewThreads"]
        return connection


def conforms(document: Document, variables: dict[str, Any], data: dict[str, Any]) -> None:
    """`data` is what GitHub's schema lets `document` answer: executing the document over it
    (each field read from the answer) gives it back whole, with no error."""
    result = execute_sync(
        github_schema(), parse(document.text), root_value=data, variable_values=variables
    )
    assert result.errors is None, result.errors
    assert result.data == data


@pytest.fixture
async def client(http: httpx.AsyncClient, pem: str) -> Client:
    return Client(http, await mint_token(http, pem))


async def test_review_threads_page_by_100_with_their_state(
    hub: FakeGitHub, client: Client, tmp_path: Path
) -> None:
    number = await many_threads(hub, tmp_path / "work", "thread ", "Lots")
    threads = hub.review_threads(OWNER, NAME, number)
    hub.resolve_thread(OWNER, NAME, number, threads[1].root_id, "bob")
    await hub.push_to_head(OWNER, NAME, number, "alice", {FILE: numbered(changed={1: "one"})})

    first = await client.threads(number)
    assert (len(first["nodes"]), first["pageInfo"]["hasNextPage"]) == (100, True)
    second = await client.threads(number, first["pageInfo"]["endCursor"])
    assert (len(second["nodes"]), second["pageInfo"]["hasNextPage"]) == (50, False)
    nodes = first["nodes"] + second["nodes"]
    assert [n["comments"]["nodes"][0]["body"] for n in nodes] == [f"thread {n}" for n in range(150)]
    assert [n["isResolved"] for n in nodes[:3]] == [False, True, False]
    assert [(n["isOutdated"], n["line"], n["originalLine"]) for n in nodes[:2]] == [
        (True, None, 1),  # line 1 was changed by the push
        (False, 2, 2),
    ]
    comment = nodes[0]["comments"]["nodes"][0]
    assert comment["author"] == {"__typename": "User", "login": "bob"}
    assert comment["fullDatabaseId"] == str(threads[0].root_id)
    assert comment["replyTo"] is None
    assert comment["diffHunk"].endswith("+line 1")
    empty = await client.threads(number, second["pageInfo"]["endCursor"])
    assert empty == {"pageInfo": {"hasNextPage": False, "endCursor": None}, "nodes": []}
    assert hub.violations == []


async def test_a_long_thread_is_read_on_through_its_node(
    hub: FakeGitHub, client: Client, tmp_path: Path
) -> None:
    number, root = await bobs_thread(hub, tmp_path / "work", 3, "Start")
    for n in range(104):
        await hub.reply_in_thread(OWNER, NAME, number, "carol" if n % 2 else "alice", root, f"r{n}")
    [thread] = (await client.threads(number))["nodes"]
    assert len(thread["comments"]["nodes"]) == 100
    assert thread["comments"]["pageInfo"]["hasNextPage"] is True
    more = await client.run(
        THREAD_COMMENTS, thread=thread["id"], after=thread["comments"]["pageInfo"]["endCursor"]
    )
    rest = more["data"]["node"]["comments"]
    assert [c["body"] for c in rest["nodes"]] == ["r99", "r100", "r101", "r102", "r103"]
    assert {c["replyTo"]["fullDatabaseId"] for c in rest["nodes"]} == {str(root)}
    assert rest["pageInfo"]["hasNextPage"] is False
    assert hub.violations == []


async def test_the_app_replies_in_a_thread_without_resolving_it(
    hub: FakeGitHub, client: Client, tmp_path: Path
) -> None:
    number, root = await bobs_thread(hub, tmp_path / "work", 3, "Why?")
    [thread] = (await client.threads(number))["nodes"]
    sent = len(hub.deliveries)
    body = await client.run(ADD_THREAD_REPLY, thread=thread["id"], body="Fixed in abc123")
    comment = body["data"]["addPullRequestReviewThreadReply"]["comment"]
    assert comment["author"] == {"__typename": "Bot", "login": "teaparty-demo"}  # no [bot]
    assert comment["replyTo"] == {"fullDatabaseId": str(root)}
    [stored] = hub.review_threads(OWNER, NAME, number)
    assert stored.comment_ids == [root, int(comment["fullDatabaseId"])]
    assert not stored.resolved
    assert [(d.event, d.payload["sender"]["login"]) for d in hub.deliveries[sent:]] == [
        ("pull_request_review_comment", "teaparty-demo[bot]"),
        ("pull_request_review", "teaparty-demo[bot]"),
    ]
    [after] = (await client.threads(number))["nodes"]
    assert [c["body"] for c in after["comments"]["nodes"]] == ["Why?", "Fixed in abc123"]
    assert hub.violations == []


async def test_other_documents_and_bad_variables_are_refused_and_recorded(
    hub: FakeGitHub, client: Client, tmp_path: Path
) -> None:
    number = await open_review_pull(hub, tmp_path / "work")
    bad_field = REVIEW_THREADS.text.replace("isOutdated", "isStale")
    answer = await client.post({"query": bad_field, "variables": {}})
    assert answer.status_code == 200
    [error] = answer.json()["errors"]
    assert "departs from ReviewThreads at line 9, column 11 ('isStale')" in error["message"]
    reformatted = " ".join(REVIEW_THREADS.text.split()).replace(" {", ", {")  # same tokens
    ok = await client.run(
        Document("ReviewThreads", reformatted),
        owner=OWNER,
        name=NAME,
        number=number,
    )
    assert ok["data"]["repository"]["pullRequest"]["reviewThreads"]["nodes"] == []
    missing = await client.run(REVIEW_THREADS, owner=OWNER, name=NAME)
    assert missing == {
        "errors": [{"message": "Variable $number of type Int! was provided invalid value"}]
    }
    wrong = await client.run(REVIEW_THREADS, owner=OWNER, name=NAME, number="1")
    assert "errors" in wrong
    nothing = (await client.post({"variables": {}})).json()
    assert nothing == {
        "errors": [{"message": "A query attribute must be specified and must be a string."}]
    }
    assert len(hub.violations) == 4
    assert hub.violations[0].startswith("graphql: The stand-in serves only the documents")
    assert hub.violations[1] == (
        "graphql ReviewThreads: Variable $number of type Int! was provided invalid value"
    )


async def test_graphql_errors_say_what_github_says(
    hub: FakeGitHub, client: Client, http: httpx.AsyncClient, pem: str, tmp_path: Path
) -> None:
    number = await open_review_pull(hub, tmp_path / "work")
    await hub.comment_on_line(OWNER, NAME, number, "bob", FILE, 3, "Why?")
    gone = await client.run(REVIEW_THREADS, owner=OWNER, name="nope", number=number)
    assert gone["data"] == {"repository": None}
    assert gone["errors"] == [
        {
            "type": "NOT_FOUND",
            "path": ["repository"],
            "message": "Could not resolve to a Repository with the name 'octo/nope'.",
        }
    ]
    issue = hub.open_issue(OWNER, NAME, title="Not a PR", body="", author="alice")
    not_pull = await client.run(REVIEW_THREADS, owner=OWNER, name=NAME, number=issue)
    assert not_pull["errors"][0]["message"] == (
        f"Could not resolve to a PullRequest with the number of {issue}."
    )
    cursor = await client.run(REVIEW_THREADS, owner=OWNER, name=NAME, number=number, after="x")
    assert cursor["errors"][0]["type"] == "INVALID_CURSOR_ARGUMENTS"
    node = await client.run(THREAD_COMMENTS, thread="PRRT_nope")
    assert (node["data"], node["errors"][0]["type"]) == ({"node": None}, "NOT_FOUND")
    reply = await client.run(ADD_THREAD_REPLY, thread="PRRT_bm9wZQ==", body="x")
    assert reply["data"] == {"addPullRequestReviewThreadReply": None}

    minted = await http.post(
        "app/installations/77/access_tokens",
        headers={"Authorization": f"Bearer {make_jwt(pem)}"},
        json={"permissions": {"pull_requests": "read"}},
    )
    reader = Client(http, minted.json()["token"])
    [thread] = (await reader.threads(number))["nodes"]
    forbidden = await reader.run(ADD_THREAD_REPLY, thread=thread["id"], body="x")
    assert forbidden["errors"] == [
        {
            "type": "FORBIDDEN",
            "path": ["addPullRequestReviewThreadReply"],
            "message": "Resource not accessible by integration",
        }
    ]
    jwt = await http.post(
        "graphql",
        json={"query": REVIEW_THREADS.text},
        headers={"Authorization": f"Bearer {make_jwt(pem)}"},
    )
    assert jwt.status_code == 401
    assert len(hub.review_threads(OWNER, NAME, number)[0].comment_ids) == 1
    assert hub.violations == []


async def test_graphql_has_its_own_rate_limit_and_is_recorded(
    hub: FakeGitHub, client: Client, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    number = await open_review_pull(hub, tmp_path / "work")
    variables = {"owner": OWNER, "name": NAME, "number": number}
    first = await client.post({"query": REVIEW_THREADS.text, "variables": variables})
    second = await client.post({"query": REVIEW_THREADS.text, "variables": variables})
    assert [r.headers["x-ratelimit-used"] for r in (first, second)] == ["1", "2"]
    assert second.headers["x-ratelimit-remaining"] == "4998"
    rest = await http.get(f"repos/{OWNER}/{NAME}", headers=client.headers)
    assert (rest.headers["x-ratelimit-resource"], rest.headers["x-ratelimit-used"]) == (
        "core",
        "2",  # the token and this call; GraphQL points are counted apart
    )
    graphql = [r for r in hub.requests if r.path == "/graphql"]
    assert [r.operation_id for r in graphql] == ["graphql/ReviewThreads"] * 2
    hub.fail_next("POST", "^/graphql$", 502)
    assert (
        await client.post({"query": REVIEW_THREADS.text, "variables": variables})
    ).status_code == 502
    assert hub.unexpected == []


async def test_a_draft_is_marked_ready_once_by_the_app_with_write_access(
    hub: FakeGitHub, client: Client, http: httpx.AsyncClient, pem: str, tmp_path: Path
) -> None:
    number = await open_review_pull(hub, tmp_path / "work")
    await hub.set_draft(OWNER, NAME, number, "alice")
    pull = (await http.get(f"repos/{OWNER}/{NAME}/pulls/{number}", headers=client.headers)).json()
    assert pull["draft"] is True
    minted = await http.post(
        "app/installations/77/access_tokens",
        headers={"Authorization": f"Bearer {make_jwt(pem)}"},
        json={"permissions": {"pull_requests": "read"}},
    )
    reader = Client(http, minted.json()["token"])
    forbidden = await reader.run(MARK_READY, pull=pull["node_id"])
    assert forbidden["errors"][0]["type"] == "FORBIDDEN"
    unknown = await client.run(MARK_READY, pull="PR_nope")
    assert unknown["data"] == {"markPullRequestReadyForReview": None}
    assert unknown["errors"][0]["type"] == "NOT_FOUND"
    sent = len(hub.deliveries)
    ready = await client.run(MARK_READY, pull=pull["node_id"])
    made = ready["data"]["markPullRequestReadyForReview"]["pullRequest"]
    assert made == {"id": pull["node_id"], "isDraft": False}
    assert not hub.issue(OWNER, NAME, number).pull.draft  # type: ignore[union-attr]
    again = await client.run(MARK_READY, pull=pull["node_id"])  # ready already: no event
    assert "errors" not in again
    assert [
        (d.event, d.payload["action"], d.payload["sender"]["login"]) for d in hub.deliveries[sent:]
    ] == [("pull_request", "ready_for_review", "teaparty-demo[bot]")]
    assert hub.violations == []
