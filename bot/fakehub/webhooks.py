"""Webhook deliveries the local GitHub stand-in sends to the App, built from real payloads.

The templates in bot/fakehub/data/payloads/ are octokit/webhooks examples (MIT, see
bot/fakehub/data/LICENSE.octokit-webhooks), except `issues.closed`: octokit has none, so it is
a real App delivery kept by codinasion-archive/codinasion-bot (MIT, LICENSE.codinasion-bot).
Each delivery replaces their repository, issue, label, comment, pull request, review and
sender with the hub's own objects and adds the App's `installation`. Each attempt is kept as
GitHub keeps it for the App's delivery log (`hook_delivery_json`): GitHub does not retry a
failed delivery by itself, so it stays failed unless someone redelivers it.
"""

from __future__ import annotations

import hmac
import json
import time
import uuid
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import httpx

from bot.fakehub.anchors import Anchor
from bot.fakehub.review_shapes import review_comment_json, review_json
from bot.fakehub.review_state import Review, ReviewComment
from bot.fakehub.shapes import (
    Json,
    Urls,
    comment_json,
    issue_json,
    label_json,
    node_id,
    pull_json,
    repo_json,
    timestamp,
    user_json,
)
from bot.fakehub.state import Comment, HubIssue, HubRepo, HubState, Label

DELIVERY_TIMEOUT = 10.0  # GitHub gives a receiver ten seconds
HOOK_ID = 424242
# octokit has no example of these; each carries the same objects as the one it is built on.
_BUILT_ON = {("pull_request", "reopened"): "closed"}


@cache
def _template(event: str, action: str) -> Json:
    name = f"data/payloads/{event}.{_BUILT_ON.get((event, action), action)}.json"
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
        # The hub's repositories belong to users: an org template's `organization` is foreign.
        if key not in ("action", "organization"):
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
    attempt_id: int = 0
    delivered_at: float = 0.0
    duration: float | None = None  # None while the attempt is under way
    outcome: str = ""  # GitHub's words: "OK", "Invalid HTTP Response: 503", "failed to connect"

    @property
    def payload(self) -> Json:
        """The decoded body."""
        decoded: Json = json.loads(self.body)
        return decoded

    @property
    def finished(self) -> bool:
        """Whether the attempt has ended (answered, refused or timed out)."""
        return self.duration is not None


# What a reply asks the hub to deliver once it has answered: a new (event, payload), or a past
# attempt to repeat.
Outgoing = tuple[str, Json] | SentDelivery


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


def redelivery(of: SentDelivery) -> SentDelivery:
    """A new attempt at a past delivery: the same body, headers and delivery id."""
    return SentDelivery(
        of.delivery_id, of.event, of.action, of.body, dict(of.headers), redelivery=True
    )


async def send(
    delivery: SentDelivery, url: str | None, *, limit_s: float = DELIVERY_TIMEOUT
) -> SentDelivery:
    """POST the delivery to `url` and record the answer (or the transport error) and how long."""
    started = time.perf_counter()
    if url is None:
        delivery.error, delivery.outcome = "no webhook_url configured", "failed to connect"
    else:
        await _post(delivery, url, limit_s=limit_s)
    delivery.duration = time.perf_counter() - started
    return delivery


async def _post(delivery: SentDelivery, url: str, *, limit_s: float) -> None:
    try:
        async with httpx.AsyncClient(timeout=limit_s) as client:
            response = await client.post(url, content=delivery.body, headers=delivery.headers)
    except httpx.TimeoutException as exc:
        delivery.error, delivery.outcome = f"{type(exc).__name__}: {exc}", "timed out"
        return
    except httpx.HTTPError as exc:
        delivery.error, delivery.outcome = f"{type(exc).__name__}: {exc}", "failed to connect"
        return
    delivery.status = response.status_code
    delivery.outcome = (
        "OK" if response.is_success else f"Invalid HTTP Response: {response.status_code}"
    )


def hook_delivery_json(delivery: SentDelivery) -> Json:
    """A finished attempt as a `hook-delivery-item` of the App's delivery log."""
    payload = delivery.payload
    return {
        "id": delivery.attempt_id,
        "guid": delivery.delivery_id,
        "delivered_at": timestamp(delivery.delivered_at),
        "redelivery": delivery.redelivery,
        "duration": round(delivery.duration or 0.0, 2),
        "status": delivery.outcome,
        "status_code": delivery.status or 0,
        "event": delivery.event,
        "action": delivery.action or None,
        "installation_id": (payload.get("installation") or {}).get("id"),
        "repository_id": (payload.get("repository") or {}).get("id"),
        "throttled_at": None,
    }


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


def issue_unlabeled(
    state: HubState, repo: HubRepo, issue: HubIssue, label: Label, urls: Urls, *, sender: str
) -> Json:
    """The payload of an `issues.unlabeled` delivery."""
    with state.lock:
        objects = issue_objects(state, repo, issue, urls, sender=sender)
        objects["label"] = label_json(repo, label, urls)
    return build_payload(
        "issues", "unlabeled", objects=objects, installation_id=repo.installation_id
    )


def issue_closed(
    state: HubState, repo: HubRepo, issue: HubIssue, urls: Urls, *, sender: str
) -> Json:
    """The payload of an `issues.closed` delivery."""
    with state.lock:
        objects = issue_objects(state, repo, issue, urls, sender=sender)
    return build_payload("issues", "closed", objects=objects, installation_id=repo.installation_id)


def pull_request_event(
    state: HubState,
    repo: HubRepo,
    issue: HubIssue,
    pull: Json,
    urls: Urls,
    *,
    action: str,
    sender: str,
    extra: Json | None = None,
) -> Json:
    """The payload of a `pull_request.<action>` delivery; `pull` is the full `pull-request`.

    `extra` carries what one action adds (`before` and `after` of a `synchronize`).
    """
    with state.lock:
        objects: Json = {
            "number": issue.number,
            "pull_request": pull,
            "repository": repo_json(state, repo, urls),
            "sender": user_json(state.user(sender), urls),
        }
    return build_payload(
        "pull_request",
        action,
        objects=objects | (extra or {}),
        installation_id=repo.installation_id,
    )


def review_submitted(
    state: HubState, repo: HubRepo, issue: HubIssue, review: Review, urls: Urls
) -> Json:
    """The payload of a `pull_request_review.submitted` delivery."""
    with state.lock:
        objects = {
            "review": review_json(state, repo, issue, review, urls, webhook=True),
            "pull_request": pull_json(state, repo, issue, urls, stats=None),
            "repository": repo_json(state, repo, urls),
            "sender": user_json(state.user(review.author), urls),
        }
    return build_payload(
        "pull_request_review", "submitted", objects=objects, installation_id=repo.installation_id
    )


def review_comment_created(
    state: HubState,
    repo: HubRepo,
    issue: HubIssue,
    comment: ReviewComment,
    anchor: Anchor,
    urls: Urls,
) -> Json:
    """The payload of a `pull_request_review_comment.created` delivery."""
    with state.lock:
        objects = {
            "comment": review_comment_json(state, repo, issue, comment, anchor, urls),
            "pull_request": pull_json(state, repo, issue, urls, stats=None),
            "repository": repo_json(state, repo, urls),
            "sender": user_json(state.user(comment.author), urls),
        }
    return build_payload(
        "pull_request_review_comment",
        "created",
        objects=objects,
        installation_id=repo.installation_id,
    )


def issue_edited(
    state: HubState,
    repo: HubRepo,
    issue: HubIssue,
    changes: Json,
    urls: Urls,
    *,
    sender: str,
) -> Json:
    """The payload of an `issues.edited` delivery; `changes` says what each field read before."""
    with state.lock:
        objects = issue_objects(state, repo, issue, urls, sender=sender)
        objects["changes"] = changes
    return build_payload("issues", "edited", objects=objects, installation_id=repo.installation_id)
