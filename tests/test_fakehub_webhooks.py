"""The stand-in delivers signed webhooks, and serves synchronous callers from a thread."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fakehub_support import (
    APP_ID,
    INSTALLATION,
    NAME,
    OWNER,
    SECRET,
    _app_client,
)
from githubkit import GitHub
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from webhook_schemas import webhook_errors

from bot.fakehub.hub import FakeGitHub
from bot.fakehub.serve import serve_local

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


async def test_edits_deliver_issues_edited_with_what_changed(
    hub: FakeGitHub, gh: GitHub[Any], receiver: Receiver
) -> None:
    hub.webhook_url, hub.webhook_secret = receiver.url, SECRET
    number = hub.open_issue(OWNER, NAME, title="Add widgets", body="Please", author="alice")
    delivery_id = await hub.edit_issue(
        OWNER, NAME, number, sender="alice", body="Please, blue ones"
    )
    headers, body = await receiver.next()
    payload = json.loads(body)
    assert verify(headers, body)
    assert (headers["x-github-event"], headers["x-github-delivery"]) == ("issues", delivery_id)
    assert payload["action"] == "edited"
    assert payload["changes"] == {"body": {"from": "Please"}}
    assert webhook_errors("issues", payload) == []
    assert (payload["issue"]["title"], payload["issue"]["body"]) == (
        "Add widgets",
        "Please, blue ones",
    )
    assert payload["sender"]["login"] == "alice"
    assert payload["installation"]["id"] == INSTALLATION
    assert await hub.edit_issue(OWNER, NAME, number, sender="alice", title="Add widgets") is None

    edited = await gh.rest.issues.async_update(OWNER, NAME, number, title="Add blue widgets")
    assert (edited.status_code, edited.parsed_data.title) == (200, "Add blue widgets")
    headers, body = await receiver.next()  # the App's own edit comes back to it too
    payload = json.loads(body)
    assert payload["changes"] == {"title": {"from": "Add widgets"}}
    assert webhook_errors("issues", payload) == []
    assert (payload["sender"]["login"], payload["sender"]["type"]) == ("teaparty-demo[bot]", "Bot")
    assert hub.issue(OWNER, NAME, number).title == "Add blue widgets"
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
