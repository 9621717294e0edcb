"""The stand-in's catch-up operations: the App's webhook delivery log and redelivery, its
installations and their repositories, and an issue list and events to reconcile against."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from app_harness import until
from fakehub_support import (
    APP_ID,
    INSTALLATION,
    NAME,
    OWNER,
    SECRET,
    make_jwt,
    push_branch,
)
from githubkit import GitHub
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bot.fakehub import webhooks
from bot.fakehub.hub import FakeGitHub
from bot.fakehub.serve import serve_local
from bot.fakehub.shapes import timestamp
from bot.github.client import query_datetime


@dataclass
class Ticks:
    """The hub's clock: it stands still until a test moves it (near real time, so JWTs pass)."""

    now: float

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def ticks() -> Ticks:
    return Ticks(float(int(datetime.now(UTC).timestamp())))


@pytest.fixture
def hub(tmp_path: Path, pem: str, ticks: Ticks) -> FakeGitHub:
    hub = FakeGitHub(tmp_path / "remotes", app_id=APP_ID, private_key_pem=pem, clock=ticks)
    hub.add_repo(OWNER, NAME, installation_id=INSTALLATION)
    return hub


@dataclass
class Receiver:
    """The App's webhook endpoint: records what arrives, answers `answers` in turn, then 202."""

    url: str
    got: asyncio.Queue[tuple[httpx.Headers, bytes]]
    answers: list[int] = field(default_factory=list)

    async def next(self) -> tuple[httpx.Headers, bytes]:
        return await asyncio.wait_for(self.got.get(), timeout=10)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    got: asyncio.Queue[tuple[httpx.Headers, bytes]] = asyncio.Queue()
    answers: list[int] = []

    async def hook(request: Request) -> Response:
        await got.put((httpx.Headers(request.headers.raw), await request.body()))
        return Response(status_code=answers.pop(0) if answers else 202)

    async with serve_local(Starlette(routes=[Route("/webhook", hook, methods=["POST"])])) as url:
        yield Receiver(f"{url}webhook", got, answers)


def dead_url() -> str:
    """A webhook URL on a port of 127.0.0.1 that nobody listens on: the App is down."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/webhook"


async def attempts(hub: FakeGitHub, count: int) -> list[dict[str, Any]]:
    """The delivery log once it holds `count` finished attempts (redeliveries run after 202)."""
    await until(lambda: len(hub.delivery_log()) >= count, what=f"{count} attempts", limit=10)
    return hub.delivery_log()


def repo_id(hub: FakeGitHub) -> int:
    return hub.state.repo(OWNER, NAME).repo_id


# -- the webhook delivery log -----------------------------------------------------------


async def test_a_delivery_missed_while_the_app_was_down_is_listed_and_redelivered(
    hub: FakeGitHub, gh: GitHub[Any], receiver: Receiver, ticks: Ticks
) -> None:
    hub.webhook_url, hub.webhook_secret = dead_url(), SECRET
    number = hub.open_issue(OWNER, NAME, title="Add widgets", body="Please", author="alice")
    guid = await hub.label_issue(OWNER, NAME, number, "teaparty", sender="alice")  # no raise
    [missed] = (await gh.rest.apps.async_list_webhook_deliveries()).parsed_data
    assert (missed.guid, missed.status, missed.status_code) == (guid, "failed to connect", 0)
    assert (missed.event, missed.action, missed.redelivery) == ("issues", "labeled", False)
    assert (missed.installation_id, missed.repository_id) == (INSTALLATION, repo_id(hub))
    assert missed.delivered_at == datetime.fromtimestamp(ticks.now, UTC)
    assert missed.throttled_at is None

    hub.webhook_url = receiver.url  # the App is back
    ticks.now += 60
    answer = await gh.rest.apps.async_redeliver_webhook_delivery(missed.id)
    assert (answer.status_code, answer.json()) == (202, {})
    headers, body = await receiver.next()
    assert (headers["x-github-delivery"], body) == (guid, hub.deliveries[0].body)
    assert headers["x-hub-signature-256"] == hub.deliveries[0].headers["X-Hub-Signature-256"]
    first, again = await attempts(hub, 2)
    assert first["id"] == missed.id
    assert (again["guid"], again["redelivery"], again["status"]) == (guid, True, "OK")
    assert (again["status_code"], again["delivered_at"]) == (202, timestamp(ticks.now))
    assert again["id"] != missed.id
    listed = (await gh.rest.apps.async_list_webhook_deliveries()).parsed_data
    assert [item.id for item in listed] == [again["id"], missed.id]  # newest first
    assert hub.violations == []


async def test_the_status_filter_goes_by_status_code_as_documented(
    hub: FakeGitHub, gh: GitHub[Any], receiver: Receiver
) -> None:
    hub.webhook_url = receiver.url
    receiver.answers[:] = [503]
    number = hub.open_issue(OWNER, NAME, title="t", body="b", author="alice")
    await hub.label_issue(OWNER, NAME, number, "bug", sender="alice")
    await hub.label_issue(OWNER, NAME, number, "ui", sender="alice")
    hub.webhook_url = dead_url()
    await hub.label_issue(OWNER, NAME, number, "docs", sender="alice")
    log = hub.delivery_log()
    assert [(a["status"], a["status_code"]) for a in log] == [
        ("Invalid HTTP Response: 503", 503),
        ("OK", 202),
        ("failed to connect", 0),
    ]
    apps = gh.rest.apps
    failed = (await apps.async_list_webhook_deliveries(status="failure")).parsed_data
    succeeded = (await apps.async_list_webhook_deliveries(status="success")).parsed_data
    # "failure" is status_code 400-599: an attempt that got no answer is in neither list.
    assert [item.id for item in failed] == [log[0]["id"]]
    assert [item.id for item in succeeded] == [log[1]["id"]]
    assert hub.violations == []


async def test_cursor_pagination_walks_every_attempt(
    hub: FakeGitHub, gh: GitHub[Any], http: httpx.AsyncClient, pem: str
) -> None:
    number = hub.open_issue(OWNER, NAME, title="t", body="b", author="alice")
    for label in ("a", "b", "c", "d", "e"):  # no webhook_url: every attempt fails
        await hub.label_issue(OWNER, NAME, number, label, sender="alice")
    await hub.redeliver(hub.deliveries[0].delivery_id)
    log = hub.delivery_log()
    assert [a["redelivery"] for a in log] == [False] * 5 + [True]
    assert log[-1]["guid"] == log[0]["guid"]
    assert {a["status"] for a in log} == {"failed to connect"}
    newest_first = [a["id"] for a in reversed(log)]

    pages: Any = gh.rest.paginate(gh.rest.apps.async_list_webhook_deliveries, per_page=4)
    assert [item.id async for item in pages] == newest_first

    auth = {"Authorization": f"Bearer {make_jwt(pem)}"}
    first = await http.get("app/hook/deliveries?per_page=4", headers=auth)
    assert [item["id"] for item in first.json()] == newest_first[:4]
    following = f"{http.base_url}app/hook/deliveries?per_page=4&cursor=v1_{newest_first[4]}"
    assert first.headers["link"] == f'<{following}>; rel="next"'
    last = await http.get(following, headers=auth)
    assert [item["id"] for item in last.json()] == newest_first[4:]
    assert "link" not in last.headers
    bad = await http.get("app/hook/deliveries?cursor=nonsense", headers=auth)
    assert bad.status_code == 400
    unknown = await http.post("app/hook/deliveries/999999/attempts", headers=auth)
    assert unknown.status_code == 404
    assert len(hub.delivery_log()) == 6
    assert hub.violations == []


async def test_a_receiver_that_does_not_answer_in_time_is_a_timed_out_attempt() -> None:
    release = asyncio.Event()

    async def hook(request: Request) -> Response:
        await release.wait()
        return Response(status_code=202)

    delivery = webhooks.prepare("issues", {"action": "opened"}, secret=None, app_id=APP_ID)
    async with serve_local(Starlette(routes=[Route("/webhook", hook, methods=["POST"])])) as url:
        await webhooks.send(delivery, f"{url}webhook", limit_s=0.05)
        release.set()
    assert (delivery.outcome, delivery.status, delivery.finished) == ("timed out", None, True)
    item = webhooks.hook_delivery_json(delivery)
    assert (item["status"], item["status_code"], item["action"]) == ("timed out", 0, "opened")
    assert (item["installation_id"], item["repository_id"]) == (None, None)


# -- installations and their repositories -----------------------------------------------


async def test_list_installations(hub: FakeGitHub, gh: GitHub[Any]) -> None:
    hub.add_repo("acme", "tools", installation_id=99)
    installations = (await gh.rest.apps.async_list_installations()).parsed_data
    assert [(i.id, i.account and i.account.login) for i in installations] == [
        (INSTALLATION, OWNER),
        (99, "acme"),
    ]
    first = await gh.rest.apps.async_list_installations(per_page=1)
    assert [i.id for i in first.parsed_data] == [INSTALLATION]
    assert 'page=2>; rel="next"' in first.headers["link"]
    assert hub.violations == []


async def test_installation_repositories_follow_the_token(
    hub: FakeGitHub, gh: GitHub[Any], http: httpx.AsyncClient, pem: str
) -> None:
    hub.add_repo(OWNER, "gadgets", installation_id=INSTALLATION)
    hub.add_repo("acme", "tools", installation_id=99)
    listed = (await gh.rest.apps.async_list_repos_accessible_to_installation()).parsed_data
    assert listed.total_count == 2
    assert sorted(r.full_name for r in listed.repositories) == ["octo/gadgets", "octo/widgets"]
    first = await gh.rest.apps.async_list_repos_accessible_to_installation(per_page=1)
    assert (first.parsed_data.total_count, len(first.parsed_data.repositories)) == (2, 1)
    assert 'page=2>; rel="next"' in first.headers["link"]

    minted = await http.post(
        f"app/installations/{INSTALLATION}/access_tokens",
        headers={"Authorization": f"Bearer {make_jwt(pem)}"},
        json={"repositories": ["gadgets"]},
    )
    scoped = {"Authorization": f"token {minted.json()['token']}"}
    narrow = (await http.get("installation/repositories", headers=scoped)).json()
    assert (narrow["total_count"], narrow["repositories"][0]["full_name"]) == (1, "octo/gadgets")
    assert hub.violations == []


# -- issues and their events ------------------------------------------------------------


async def test_list_issues_filters_sorts_and_includes_pull_requests(
    hub: FakeGitHub, gh: GitHub[Any], ticks: Ticks, tmp_path: Path
) -> None:
    one = hub.open_issue(OWNER, NAME, title="one", body="b", author="alice")
    two = hub.open_issue(OWNER, NAME, title="two", body="b", author="alice")
    ticks.now += 10
    await hub.label_issue(OWNER, NAME, one, "bug", sender="alice")
    ticks.now += 10
    await hub.label_issue(OWNER, NAME, two, "Bug", sender="alice")
    await hub.label_issue(OWNER, NAME, two, "ui", sender="alice")
    push_branch(hub, tmp_path / "work", "feature", {"a.txt": "a\n"})
    pull = await hub.open_pull_as(
        OWNER, NAME, author="alice", head="feature", base="main", title="three"
    )

    async def numbers(**query: Any) -> list[int]:
        found = (await gh.rest.issues.async_list_for_repo(OWNER, NAME, **query)).parsed_data
        return [issue.number for issue in found]

    assert await numbers() == [pull, two, one]
    assert await numbers(labels="BUG,ui") == [two]
    assert await numbers(labels="bug") == [two, one]
    assert await numbers(sort="updated", direction="asc") == [one, two, pull]
    assert await numbers(since=query_datetime(ticks.now)) == [pull, two]
    listed = (await gh.rest.issues.async_list_for_repo(OWNER, NAME)).parsed_data
    assert [bool(issue.pull_request) for issue in listed] == [True, False, False]

    await gh.rest.pulls.async_update(OWNER, NAME, pull, state="closed")
    assert await numbers() == [two, one]
    assert await numbers(state="closed") == [pull]
    assert await numbers(state="all", direction="asc") == [one, two, pull]
    page = await gh.rest.issues.async_list_for_repo(OWNER, NAME, per_page=1)
    assert [issue.number for issue in page.parsed_data] == [two]
    assert 'page=2>; rel="next"' in page.headers["link"]
    assert hub.violations == []


async def test_issue_events_name_who_labeled(
    hub: FakeGitHub, gh: GitHub[Any], ticks: Ticks
) -> None:
    number = hub.open_issue(OWNER, NAME, title="t", body="b", author="alice")
    await hub.label_issue(OWNER, NAME, number, "teaparty", sender="alice")
    first_at = ticks.now
    ticks.now += 5
    await hub.label_issue(OWNER, NAME, number, "teaparty", sender="bob")  # already there
    await hub.label_issue(OWNER, NAME, number, "urgent", sender="bob")
    listed = await gh.rest.issues.async_list_events(OWNER, NAME, number)
    assert [(e.event, e.actor.login) for e in listed.parsed_data] == [
        ("labeled", "alice"),
        ("labeled", "bob"),
    ]
    events = listed.json()
    assert [(e["label"]["name"], e["created_at"]) for e in events] == [
        ("teaparty", timestamp(first_at)),
        ("urgent", timestamp(ticks.now)),
    ]
    assert all(e["commit_id"] is None and e["performed_via_github_app"] is None for e in events)
    first = await gh.rest.issues.async_list_events(OWNER, NAME, number, per_page=1)
    assert [e.id for e in first.parsed_data] == [events[0]["id"]]
    assert 'page=2>; rel="next"' in first.headers["link"]
    assert hub.violations == []
