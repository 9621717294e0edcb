"""The GitHub adapter against the stand-in (in-process, no sockets): auth, retries, limits."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from app_harness import APP_ID

from bot.demo import private_key_pem
from bot.errors import GitHubError, RateLimitedError
from bot.fakehub.hub import FakeGitHub
from bot.github.client import GitHubApp

OWNER, REPO = "octo", "widgets"
PEM = private_key_pem()


class Clock:
    def __init__(self) -> None:
        self.now = time.time()
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def hub(tmp_path: Path) -> FakeGitHub:
    hub = FakeGitHub(tmp_path / "hub", app_id=APP_ID, private_key_pem=PEM)
    hub.add_repo(OWNER, REPO)
    hub.add_user("alice", "maintain")
    hub.add_user("carol", "triage")
    return hub


def app_for(hub: FakeGitHub, clock: Clock, *, write_interval_s: float = 0.0) -> GitHubApp:
    return GitHubApp(
        app_id=str(APP_ID),
        private_key=PEM,
        api_url="http://hub/",
        transport=httpx.ASGITransport(app=hub.asgi),
        sleep=clock.sleep,
        clock=clock,
        write_interval_s=write_interval_s,
    )


def minted(hub: FakeGitHub) -> int:
    return sum(r.path.endswith("/access_tokens") for r in hub.requests)


async def test_the_installation_token_is_minted_once_and_renewed_before_expiry(
    hub: FakeGitHub,
) -> None:
    clock = Clock()
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
    gh = await app_for(hub, Clock()).installation(1)
    assert await gh.permission(OWNER, REPO, "alice") == "write"  # maintain maps to write
    assert await gh.permission(OWNER, REPO, "carol") == "read"  # triage maps to read
    assert await gh.file(OWNER, REPO, ".teaparty/project.yaml", ref="main") is None


async def test_a_502_is_retried_with_backoff_then_succeeds(hub: FakeGitHub) -> None:
    clock = Clock()
    gh = await app_for(hub, clock).installation(1)
    number = hub.open_issue(OWNER, REPO, title="t", body="b", author="alice")
    hub.fail_next("POST", r"/issues/\d+/comments$", 502, times=2)
    created = await gh.comment(OWNER, REPO, number, "hello")
    assert created["body"] == "hello"
    assert clock.slept == [1.0, 2.0]
    assert [c.body for c in hub.comments(OWNER, REPO, number)] == ["hello"]


async def test_a_secondary_rate_limit_waits_for_retry_after(hub: FakeGitHub) -> None:
    clock = Clock()
    gh = await app_for(hub, clock).installation(1)
    number = hub.open_issue(OWNER, REPO, title="t", body="b", author="alice")
    hub.fail_next(
        "POST",
        r"/issues/\d+/comments$",
        403,
        headers={"retry-after": "7"},
        body={"message": "You have exceeded a secondary rate limit. Please wait a few minutes."},
    )
    await gh.comment(OWNER, REPO, number, "hello")
    assert clock.slept == [7.0]
    assert len(hub.comments(OWNER, REPO, number)) == 1


async def test_a_long_rate_limit_goes_back_to_the_queue(hub: FakeGitHub) -> None:
    clock = Clock()
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
    clock = Clock()
    gh = await app_for(hub, clock).installation(1)
    with pytest.raises(GitHubError, match=r"POST /repos/octo/widgets/issues/999/comments.*404"):
        await gh.comment(OWNER, REPO, 999, "hello")
    assert clock.slept == []


async def test_writes_are_spaced_as_github_asks(hub: FakeGitHub) -> None:
    clock = Clock()
    gh = await app_for(hub, clock, write_interval_s=1.0).installation(1)
    number = hub.open_issue(OWNER, REPO, title="t", body="b", author="alice")
    for text in ("one", "two", "three"):
        await gh.comment(OWNER, REPO, number, text)
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
