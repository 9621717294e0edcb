"""Webhook deliveries the local GitHub stand-in sends to the App, built from real payloads.

The templates in bot/fakehub/data/payloads/ are octokit/webhooks examples (MIT, see
bot/fakehub/data/LICENSE.octokit-webhooks); each delivery replaces their repository, issue, label,
comment and sender with the hub's own objects and adds the App's `installation`.
"""

from __future__ import annotations

import hmac
import json
import uuid
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import httpx

from bot.fakehub.shapes import (
    Json,
    Urls,
    comment_json,
    issue_json,
    label_json,
    node_id,
    repo_json,
    user_json,
)
from bot.fakehub.state import Comment, HubIssue, HubRepo, HubState, Label

DELIVERY_TIMEOUT = 10.0  # GitHub gives a receiver ten seconds
HOOK_ID = 424242


@cache
def _template(event: str, action: str) -> Json:
    name = f"data/payloads/{event}.{action}.json"
    loaded: Json = json.loads(resources.files("bot.fakehub").joinpath(name).read_text("utf-8"))
    return loaded


def _overlay(template: Any, ours: Any) -> Any:
    """`ours`, keeping the template's key order and any keys we do not build."""
    if not isinstance(template, dict) or not isinstance(ours, dict):
        return ours
    merged = {
        key: _overlay(value, ours[key]) if key in ours else value for key, value in template.items()
    }
    return merged | {key: value for key, value in ours.items() if key not in merged}


def build_payload(event: str, action: str, *, objects: Json, installation_id: int) -> Json:
    """The payload of an `event.action` delivery from its template and the hub's objects."""
    template = _template(event, action)
    payload: Json = {"action": action}
    for key, value in template.items():
        if key != "action":
            payload[key] = _overlay(value, objects[key]) if key in objects else value
    payload["installation"] = {
        "id": installation_id,
        "node_id": node_id("Installation", installation_id),
    }
    return payload


def sign(secret: str, body: bytes, *, digest: str = "sha256") -> str:
    """The `X-Hub-Signature-256` (or, with sha1, `X-Hub-Signature`) value for `body`."""
    return f"{digest}=" + hmac.new(secret.encode(), body, digest).hexdigest()


@dataclass
class SentDelivery:
    """One attempt to deliver a webhook, and what the receiver answered."""

    delivery_id: str
    event: str
    action: str
    body: bytes = field(repr=False)
    headers: dict[str, str] = field(repr=False)
    status: int | None = None
    error: str | None = None
    redelivery: bool = False

    @property
    def payload(self) -> Json:
        """The decoded body."""
        decoded: Json = json.loads(self.body)
        return decoded


def prepare(
    event: str, payload: Json, *, secret: str | None, app_id: int, delivery_id: str | None = None
) -> SentDelivery:
    """Serialise and sign a delivery the way GitHub does (compact UTF-8 JSON, HMAC of the bytes)."""
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    delivery_id = delivery_id or str(uuid.uuid4())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/fake",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery_id,
        "X-GitHub-Hook-ID": str(HOOK_ID),
        "X-GitHub-Hook-Installation-Target-ID": str(app_id),
        "X-GitHub-Hook-Installation-Target-Type": "integration",
    }
    if secret is not None:
        headers["X-Hub-Signature"] = sign(secret, body, digest="sha1")
        headers["X-Hub-Signature-256"] = sign(secret, body)
    return SentDelivery(delivery_id, event, str(payload.get("action", "")), body, headers)


async def send(delivery: SentDelivery, url: str | None) -> SentDelivery:
    """POST the delivery to `url` and record the status (or the transport error)."""
    if url is None:
        delivery.error = "no webhook_url configured"
        return delivery
    try:
        async with httpx.AsyncClient(timeout=DELIVERY_TIMEOUT) as client:
            response = await client.post(url, content=delivery.body, headers=delivery.headers)
        delivery.status = response.status_code
    except httpx.HTTPError as exc:
        delivery.error = f"{type(exc).__name__}: {exc}"
    return delivery


def issue_objects(
    state: HubState, repo: HubRepo, issue: HubIssue, urls: Urls, *, sender: str
) -> Json:
    """The `issue`, `repository` and `sender` objects every issue-family delivery carries."""
    return {
        "issue": issue_json(state, repo, issue, urls),
        "repository": repo_json(state, repo, urls),
        "sender": user_json(state.user(sender), urls),
    }


def comment_created(state: HubState, repo: HubRepo, comment: Comment, urls: Urls) -> Json:
    """The payload of an `issue_comment.created` delivery."""
    with state.lock:
        issue = repo.issues[comment.issue_number]
        objects = issue_objects(state, repo, issue, urls, sender=comment.author)
        objects["comment"] = comment_json(state, repo, comment, urls)
    return build_payload(
        "issue_comment", "created", objects=objects, installation_id=repo.installation_id
    )


def issue_labeled(
    state: HubState, repo: HubRepo, issue: HubIssue, label: Label, urls: Urls, *, sender: str
) -> Json:
    """The payload of an `issues.labeled` delivery."""
    with state.lock:
        objects = issue_objects(state, repo, issue, urls, sender=sender)
        objects["label"] = label_json(repo, label, urls)
    return build_payload("issues", "labeled", objects=objects, installation_id=repo.installation_id)
