"""Webhook deliveries verified and decoded, with no I/O: headers and raw body in, a delivery out."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from bot.errors import DeliveryError

MAX_BODY_BYTES = 25 * 1024 * 1024  # GitHub never delivers a payload over 25 MB
_DELIVERY_ID = re.compile(r"^[A-Za-z0-9._:-]{1,100}$")
_EVENT = re.compile(r"^[a-z_]{1,64}$")


@dataclass(frozen=True)
class Delivery:
    """A verified delivery: its id, event, the payload's action, and the exact body."""

    delivery_id: str
    event: str
    action: str
    body: bytes


def signature(secret: str, body: bytes) -> str:
    """The `X-Hub-Signature-256` value GitHub sends for `body`."""
    return "sha256=" + hmac.digest(secret.encode(), body, hashlib.sha256).hex()


def parse_delivery(
    headers: Mapping[str, str],
    body: bytes,
    *,
    secret: str | None,
    events: frozenset[str],
) -> Delivery:
    """Verify and decode one delivery; `secret=None` accepts it unsigned (development only).

    `headers` must be case-insensitive (Starlette's are); raises DeliveryError with the
    status to answer and a message naming the delivery and what is wrong.
    """
    delivery_id = headers.get("x-github-delivery", "")
    if not _DELIVERY_ID.match(delivery_id):
        raise DeliveryError(400, "missing or malformed X-GitHub-Delivery header")
    if len(body) > MAX_BODY_BYTES:
        raise DeliveryError(413, "body over 25 MB", delivery_id=delivery_id)
    if secret is not None:
        given = headers.get("x-hub-signature-256", "")
        if not given:
            raise DeliveryError(401, "no X-Hub-Signature-256 header", delivery_id=delivery_id)
        if not hmac.compare_digest(given.encode(), signature(secret, body).encode()):
            raise DeliveryError(
                401, "X-Hub-Signature-256 does not match the body", delivery_id=delivery_id
            )
    event = headers.get("x-github-event", "")
    if not _EVENT.match(event):
        raise DeliveryError(
            400, "missing or malformed X-GitHub-Event header", delivery_id=delivery_id
        )
    if event not in events:
        raise DeliveryError(
            400, f"event {event!r} is not one this app subscribes to", delivery_id=delivery_id
        )
    return Delivery(delivery_id, event, _action(body, delivery_id), body)


def _action(body: bytes, delivery_id: str) -> str:
    try:
        payload = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DeliveryError(400, f"body is not JSON: {exc}", delivery_id=delivery_id) from None
    if not isinstance(payload, dict):
        raise DeliveryError(400, "body is not a JSON object", delivery_id=delivery_id)
    action = payload.get("action", "")
    return action if isinstance(action, str) else ""
