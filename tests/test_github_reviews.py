"""The App's review-round calls (bot.github.reviews) against the stand-in, in-process: every
page read, replies made once, and a wrong request caught by the stand-in's checks."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from app_harness import APP_ID
from fakehub_support import NAME, OWNER, app_client
from fakes import SteppingClock
from review_support import FILE, bobs_thread, many_threads, numbered, open_review_pull

from bot.demo import private_key_pem
from bot.errors import GitHubError, GraphQLError
from bot.fakehub.hub import FakeGitHub
from bot.github.client import Identity
from bot.github.graphql_queries import Document
from bot.github.reviews import PullReviews, graphql_url

PEM = private_key_pem()
ME = Identity("teaparty-demo[bot]", APP_ID)


@pytest.fixture
def hub(tmp_path: Path) -> FakeGitHub:
    hub = FakeGitHub(tmp_path / "hub", app_id=APP_ID, private_key_pem=PEM)
    hub.add_repo(OWNER, NAME)
    return hub


@pytest.fixture
def clock() -> SteppingClock:
    return SteppingClock(time.time())


@pytest.fixture
async def reviews(hub: FakeGitHub, clock: SteppingClock) -> PullReviews:
    app = app_client(hub, PEM, sleep=clock.sleep, clock=clock)
    return PullReviews(await app.installation(1))


def calls(hub: FakeGitHub, operation_id: str) -> int:
    return sum(r.operation_id == operation_id for r in hub.requests)


async def test_reviews_and_review_comments_are_read_to_the_last_page(
    hub: FakeGitHub, reviews: PullReviews, tmp_path: Path
) -> None:
    number = await open_review_pull(hub, tmp_path / "work")
    hundred = await hub.review_pr(
        OWNER,
        NAME,
        number,
        "bob",
        "changes_requested",
        "Many",
        comments=[(FILE, 1 + n % 30, f"c{n}") for n in range(100)],
    )
    for n in range(100):
        await hub.review_pr(OWNER, NAME, number, "carol", "commented", f"again {n}")
    await hub.comment_on_line(OWNER, NAME, number, "carol", FILE, 4, "c100")

    everything = await reviews.reviews(OWNER, NAME, number)
    assert len(everything) == 102
    assert [r["state"] for r in everything[:2]] == ["CHANGES_REQUESTED", "COMMENTED"]
    assert calls(hub, "pulls/list-reviews") == 2
    comments = await reviews.review_comments(OWNER, NAME, number)
    assert [c["body"] for c in comments] == [f"c{n}" for n in range(101)]
    assert calls(hub, "pulls/list-review-comments") == 2
    exactly = await reviews.review_comments(OWNER, NAME, number, review_id=hundred)
    assert len(exactly) == 100
    assert calls(hub, "pulls/list-comments-for-review") == 1  # no empty page after 100
    pull = await reviews.pull(OWNER, NAME, number)
    assert (pull["merged"], pull["draft"], pull["review_comments"]) == (False, False, 101)
    assert hub.violations == []


async def test_replies_and_review_requests(
    hub: FakeGitHub, reviews: PullReviews, clock: SteppingClock, tmp_path: Path
) -> None:
    number, root = await bobs_thread(hub, tmp_path / "work", 4, "Why?")
    hub.fail_next("POST", r"/replies$", 502, apply=True)  # made, but GitHub said 502
    made = await reviews.reply(OWNER, NAME, number, root, "Fixed in abc123", identity=ME)
    assert (made["in_reply_to_id"], made["body"]) == (root, "Fixed in abc123")
    assert clock.slept == [1.0]
    [thread] = hub.review_threads(OWNER, NAME, number)
    assert len(thread.comment_ids) == 2  # looked for before trying again: one reply
    assert calls(hub, "pulls/create-reply-for-review-comment") == 1

    pulled = await reviews.request_reviewers(OWNER, NAME, number, ["bob"])
    assert [u["login"] for u in pulled["requested_reviewers"]] == ["bob"]
    assert await reviews.requested_reviewers(OWNER, NAME, number) == ["bob"]
    await hub.review_pr(OWNER, NAME, number, "bob", "approved")
    assert await reviews.requested_reviewers(OWNER, NAME, number) == []
    with pytest.raises(GitHubError) as author:
        await reviews.request_reviewers(OWNER, NAME, number, ["alice"])
    assert author.value.status == 422
    assert hub.violations == []


async def test_threads_are_read_past_100_and_past_100_comments(
    hub: FakeGitHub, reviews: PullReviews, tmp_path: Path
) -> None:
    number = await many_threads(hub, tmp_path / "work", "t", "See")
    first, second = hub.review_threads(OWNER, NAME, number)[:2]
    for n in range(104):
        await hub.reply_in_thread(OWNER, NAME, number, "carol", first.root_id, f"r{n}")
    hub.resolve_thread(OWNER, NAME, number, second.root_id, "bob")
    await hub.push_to_head(OWNER, NAME, number, "alice", {FILE: numbered(changed={2: "two"})})

    threads = await reviews.threads(OWNER, NAME, number)
    assert [t.comments[0].body for t in threads] == [f"t{n}" for n in range(150)]
    assert len(threads[0].comments) == 105
    assert threads[0].comments[-1].reply_to == first.root_id
    assert [c.author for c in threads[0].comments[:2]] == ["bob", "carol"]
    assert (threads[1].resolved, threads[1].outdated, threads[1].line) == (True, True, None)
    assert (threads[2].resolved, threads[2].outdated, threads[2].line) == (False, False, 3)
    assert threads[1].original_line == 2
    assert threads[0].comments[0].comment_id == first.root_id
    assert calls(hub, "graphql/ReviewThreads") == 2
    assert calls(hub, "graphql/ThreadComments") == 1
    assert hub.violations == []


async def test_the_app_replies_in_a_thread_once(
    hub: FakeGitHub, reviews: PullReviews, tmp_path: Path
) -> None:
    number, root = await bobs_thread(hub, tmp_path / "work", 4, "Why?")
    [thread] = await reviews.threads(OWNER, NAME, number)
    hub.fail_next("POST", "^/graphql$", 502, apply=True)
    made = await reviews.reply_in_thread(
        OWNER, NAME, number, thread.thread_id, "Fixed in abc123", identity=ME
    )
    assert (made.author, made.reply_to, made.body) == (ME.login, root, "Fixed in abc123")
    [again] = await reviews.threads(OWNER, NAME, number)
    assert [c.author for c in again.comments] == ["bob", ME.login]  # once, and not resolved
    assert not again.resolved
    assert calls(hub, "graphql/AddThreadReply") == 1
    with pytest.raises(GraphQLError) as unknown:
        await reviews.reply_in_thread(OWNER, NAME, number, "PRRT_x", "x", identity=ME)
    assert unknown.value.errors[0]["type"] == "NOT_FOUND"
    assert hub.violations == []


async def test_the_stand_in_catches_a_wrong_request(
    hub: FakeGitHub, reviews: PullReviews, tmp_path: Path
) -> None:
    number = await open_review_pull(hub, tmp_path / "work")
    stale = Document("ReviewThreads", "query { viewer { login } }")
    with pytest.raises(GraphQLError, match="serves only the documents"):
        await reviews._graphql(stale, {})
    root = await hub.comment_on_line(OWNER, NAME, number, "bob", FILE, 4, "Why?")
    inst = reviews._inst
    url = f"repos/{OWNER}/{NAME}/pulls/{number}/comments/{root}/replies"
    with pytest.raises(GitHubError) as refused:
        await inst.app.call(inst.gh, lambda gh: gh.arequest("POST", url, json={"txt": "x"}))
    assert refused.value.status == 422
    assert [v.split(":")[0] for v in hub.violations] == [
        "graphql",
        "pulls/create-reply-for-review-comment request",
    ]


def test_the_graphql_endpoint_of_a_rest_base_url() -> None:
    assert graphql_url("https://api.github.com") == "https://api.github.com/graphql"
    assert graphql_url("https://ghe.example/api/v3/") == "https://ghe.example/api/graphql"
    assert graphql_url("http://127.0.0.1:9/") == "http://127.0.0.1:9/graphql"
