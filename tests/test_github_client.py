"""The GitHub adapter against the stand-in (in-process, no sockets): auth, retries, limits."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
import pytest
from app_harness import APP_ID
from fakehub_support import app_client, push_branch
from fakes import SteppingClock

from bot.demo import private_key_pem
from bot.errors import GitHubError, RateLimitedError
from bot.fakehub.hub import FakeGitHub
from bot.github.client import GitHubApp, Identity, query_time
from bot.github.tracking import marker

OWNER, REPO = "octo", "widgets"
PEM = private_key_pem()
ME = Identity("teaparty-demo[bot]", APP_ID)


def note(text: str) -> str:
    """A comment body as the App writes one: its marker first."""
    return f"{marker('test')}\n{text}"


@pytest.fixture
def hub(tmp_path: Path) -> FakeGitHub:
    hub = FakeGitHub(tmp_path / "hub", app_id=APP_ID, private_key_pem=PEM)
    hub.add_repo(OWNER, REPO)
    hub.add_user("alice", "maintain")
    hub.add_user("carol", "triage")
    return hub


def app_for(hub: FakeGitHub, clock: SteppingClock, *, write_interval_s: float = 0.0) -> GitHubApp:
    return app_client(hub, PEM, sleep=clock.sleep, clock=clock, write_interval_s=write_interval_s)


def minted(hub: FakeGitHub) -> int:
    return sum(r.path.endswith("/access_tokens") for r in hub.requests)


async def test_the_installation_token_is_minted_once_and_renewed_before_expiry(
    hub: FakeGitHub,
) -> None:
    clock = SteppingClock(time.time())
    github = app_for(hub, clock)
    assert await github.login() == "teaparty-demo[bot]"
    first = await github.installation(1)
    await first.permission(OWNER, REPO, "alice")
    second = await github.installation(1)
    await second.permission(OWNER, REPO, "alice")
    assert minted(hub) == 1
    clock.now = 1e12  # long after GitHub's hour: a new token, never an expired one
    await (await github.installation(1)).permission(OWNER, REPO, "alice")
    assert minted(hub) == 2
    assert hub.violations == []


async def test_write_access_follows_githubs_permission_mapping(hub: FakeGitHub) -> None:
    gh = await app_for(hub, SteppingClock(time.time())).installation(1)
    assert await gh.permission(OWNER, REPO, "alice") == "write"  # maintain maps to write
    assert await gh.permission(OWNER, REPO, "carol") == "read"  # triage maps to read
    assert await gh.file(OWNER, REPO, ".teaparty/project.yaml", ref="main") is None


async def test_a_502_is_retried_with_backoff_then_succeeds(hub: FakeGitHub) -> None:
    clock = SteppingClock(time.time())
    gh = await app_for(hub, clock).installation(1)
    number = hub.open_issue(OWNER, REPO, title="t", body="b", author="alice")
    hub.fail_next("POST", r"/issues/\d+/comments$", 502, times=2)
    created = await gh.comment(OWNER, REPO, number, note("hello"), identity=ME)
    assert created["body"] == note("hello")
    assert clock.slept == [1.0, 2.0]
    assert [c.body for c in hub.comments(OWNER, REPO, number)] == [note("hello")]


async def test_a_secondary_rate_limit_waits_for_retry_after(hub: FakeGitHub) -> None:
    clock = SteppingClock(time.time())
    gh = await app_for(hub, clock).installation(1)
    number = hub.open_issue(OWNER, REPO, title="t", body="b", author="alice")
    hub.fail_next(
        "POST",
        r"/issues/\d+/comments$",
        403,
        headers={"retry-after": "7"},
        body={"message": "You have exceeded a secondary rate limit. Please wait a few minutes."},
    )
    await gh.comment(OWNER, REPO, number, note("hello"), identity=ME)
    assert clock.slept == [7.0]
    assert len(hub.comments(OWNER, REPO, number)) == 1


async def test_a_long_rate_limit_goes_back_to_the_queue(hub: FakeGitHub) -> None:
    clock = SteppingClock(time.time())
    gh = await app_for(hub, clock).installation(1)
    reset = int(clock.now) + 1800
    hub.fail_next(
        "GET",
        r"/collaborators/",
        403,
        headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)},
        body={"message": "API rate limit exceeded for installation."},
    )
    with pytest.raises(RateLimitedError) as caught:
        await gh.permission(OWNER, REPO, "alice")
    assert caught.value.retry_at == pytest.approx(reset, abs=2)
    assert clock.slept == []  # no worker held for half an hour


async def test_a_4xx_fails_at_once_naming_the_request(hub: FakeGitHub) -> None:
    clock = SteppingClock(time.time())
    gh = await app_for(hub, clock).installation(1)
    with pytest.raises(GitHubError, match=r"POST /repos/octo/widgets/issues/999/comments.*404"):
        await gh.comment(OWNER, REPO, 999, note("hello"), identity=ME)
    assert clock.slept == []


async def test_writes_are_spaced_as_github_asks(hub: FakeGitHub) -> None:
    clock = SteppingClock(time.time())
    gh = await app_for(hub, clock, write_interval_s=1.0).installation(1)
    number = hub.open_issue(OWNER, REPO, title="t", body="b", author="alice")
    for text in ("one", "two", "three"):
        await gh.comment(OWNER, REPO, number, note(text), identity=ME)
    assert clock.slept == [1.0, 1.0, 1.0]  # the token POST, then each comment a second apart


class Counting(httpx.ASGITransport):
    """The stand-in's transport, counting how often something closes it."""

    closed = 0

    async def aclose(self) -> None:
        self.closed += 1
        await super().aclose()


async def test_every_request_shares_one_connection_pool_closed_once(hub: FakeGitHub) -> None:
    transport = Counting(app=hub.asgi)
    github = GitHubApp(
        app_id=str(APP_ID), private_key=PEM, api_url="http://hub/", transport=transport
    )
    gh = await github.installation(1)
    for _ in range(3):
        await gh.permission(OWNER, REPO, "alice")
    assert transport.closed == 0  # githubkit's per-request clients leave the pool open
    await github.aclose()
    assert transport.closed == 1


# -- a 5xx on a write is "maybe applied": each write happens once ---------------------------


def requests_to(hub: FakeGitHub, method: str, pattern: str) -> int:
    return sum(r.method == method and re.search(pattern, r.path) is not None for r in hub.requests)


async def test_a_comment_github_made_before_answering_502_is_not_posted_again(
    hub: FakeGitHub,
) -> None:
    clock = SteppingClock(time.time())
    gh = await app_for(hub, clock).installation(1)
    number = hub.open_issue(OWNER, REPO, title="t", body="b", author="alice")
    hub.fail_next("POST", r"/issues/\d+/comments$", 502, apply=True)
    created = await gh.comment(OWNER, REPO, number, note("hello"), identity=ME)
    assert [c.body for c in hub.comments(OWNER, REPO, number)] == [note("hello")]
    assert created["id"] == hub.comments(OWNER, REPO, number)[0].comment_id
    assert requests_to(hub, "POST", r"/comments$") == 1
    assert hub.violations == []


async def test_someone_elses_comment_with_the_marker_does_not_stand_for_a_failed_one(
    hub: FakeGitHub,
) -> None:
    gh = await app_for(hub, SteppingClock(time.time())).installation(1)
    number = hub.open_issue(OWNER, REPO, title="t", body="b", author="alice")
    await hub.comment_as(OWNER, REPO, number, "mallory", note("planted"))
    hub.fail_next("POST", r"/issues/\d+/comments$", 502)  # not applied
    created = await gh.comment(OWNER, REPO, number, note("hello"), identity=ME)
    assert created["user"]["login"] == ME.login
    assert [c.author for c in hub.comments(OWNER, REPO, number)] == ["mallory", ME.login]


async def test_a_comment_without_the_apps_marker_is_refused_before_any_request(
    hub: FakeGitHub,
) -> None:
    gh = await app_for(hub, SteppingClock(time.time())).installation(1)
    before = len(hub.requests)
    with pytest.raises(ValueError, match="marker"):
        await gh.comment(OWNER, REPO, 1, "no marker here", identity=ME)
    assert len(hub.requests) == before


async def test_an_edit_and_a_reaction_that_answered_502_are_repeated_harmlessly(
    hub: FakeGitHub,
) -> None:
    gh = await app_for(hub, SteppingClock(time.time())).installation(1)
    number = hub.open_issue(OWNER, REPO, title="t", body="b", author="alice")
    posted = await gh.comment(OWNER, REPO, number, note("one"), identity=ME)
    hub.fail_next("PATCH", r"/issues/comments/\d+$", 502, apply=True)
    await gh.edit_comment(OWNER, REPO, int(posted["id"]), note("two"))
    hub.fail_next("POST", r"/issues/\d+/reactions$", 502, apply=True)
    await gh.react_eyes(OWNER, REPO, number)
    assert [c.body for c in hub.comments(OWNER, REPO, number)] == [note("two")]
    assert [r.content for r in hub.reactions(OWNER, REPO, number)] == ["eyes"]
    assert hub.violations == []


async def test_a_pull_request_github_opened_before_answering_502_is_not_opened_again(
    hub: FakeGitHub, tmp_path: Path
) -> None:
    gh = await app_for(hub, SteppingClock(time.time())).installation(1)
    push_branch(hub, tmp_path / "work", "teaparty/job-1-x", {"a.txt": "a"})
    hub.fail_next("POST", r"/pulls$", 502, apply=True)
    opened = await gh.create_pull(
        OWNER, REPO, title="T", head="teaparty/job-1-x", base="main", body="B", identity=ME
    )
    assert [p.number for p in hub.pulls(OWNER, REPO)] == [opened["number"]]
    hub.fail_next("PATCH", r"/pulls/\d+$", 502, apply=True)
    await gh.update_pull(OWNER, REPO, int(opened["number"]), title="T2", body="B2")
    assert [p.title for p in hub.pulls(OWNER, REPO)] == ["T2"]
    assert requests_to(hub, "POST", r"/pulls$") == 1
    assert hub.violations == []


async def test_a_write_that_keeps_failing_says_it_may_have_been_applied(hub: FakeGitHub) -> None:
    clock = SteppingClock(time.time())
    gh = await app_for(hub, clock).installation(1)
    number = hub.open_issue(OWNER, REPO, title="t", body="b", author="alice")
    hub.fail_next("POST", r"/issues/\d+/comments$", 502, times=5)
    with pytest.raises(GitHubError, match="502"):
        await gh.comment(OWNER, REPO, number, note("hello"), identity=ME)
    assert requests_to(hub, "GET", r"/comments$") == 4  # looked for it before each retry
    assert hub.comments(OWNER, REPO, number) == []


def test_a_time_in_a_query_is_iso_8601_utc_in_whole_seconds_rounded_down() -> None:
    assert query_time(1_795_822_259.999) == "2026-11-27T23:30:59Z"
    assert query_time(0) == "1970-01-01T00:00:00Z"


async def test_comments_since_a_time_ask_as_github_documents_and_miss_nothing(
    tmp_path: Path,
) -> None:
    clock = SteppingClock(float(int(time.time())))
    hub = FakeGitHub(tmp_path / "hub", app_id=APP_ID, private_key_pem=PEM, clock=clock)
    hub.add_repo(OWNER, REPO)
    number = hub.open_issue(OWNER, REPO, title="t", body="b", author="alice")
    await hub.comment_as(OWNER, REPO, number, "alice", "before")
    clock.now += 60.25
    await hub.comment_as(OWNER, REPO, number, "alice", "in the second asked for")
    gh = await app_for(hub, clock).installation(1)
    said = await gh.comments(OWNER, REPO, number, since=clock.now + 0.5)
    assert [c["body"] for c in said] == ["in the second asked for"]
    (asked,) = [r for r in hub.requests if r.operation_id == "issues/list-comments"]
    assert asked.query["since"] == query_time(clock.now)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", asked.query["since"])
    assert hub.violations == []
