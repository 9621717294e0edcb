"""Webhook deliveries verified and decoded, with no I/O: headers, then body chunks, then a delivery.

A delivery is checked in three steps so that the server never holds an unauthenticated
body: `check_head` (headers only: ids, size, type, a signature present), `Signature` (the
HMAC, fed chunk by chunk as the body streams in) and `decode` (the JSON, once the
signature held). `parse_delivery` runs all three on a body already in hand. What comes out
is the engine's `Arrival`: the verified delivery, as the deliveries queue stores it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from bot.errors import DeliveryError
from orchestrator.api import Arrival

MAX_BODY_BYTES = 25 * 1024 * 1024  # GitHub never delivers a payload over 25 MB
_DELIVERY_ID = re.compile(r"^[A-Za-z0-9._:-]{1,100}$")
_EVENT = re.compile(r"^[a-z_]{1,64}$")
_ACTION = re.compile(r"^[a-z0-9_]{1,64}$")
_SHOWN_CHARS = 100
# What a delivery is about, by "event.action": the kind, and the object whose id names it.
# A comment or a review read again (a catch-up pass, a runner's reconciliation) is the same
# subject as its webhook, so the deliveries queue stores it once.
_SUBJECTS = {
    "issue_comment.created": ("comment", "comment"),
    "pull_request_review.submitted": ("review", "review"),
}
_CLOSES = {
    "pull_request.closed": ("pull-closed", "pull_request"),
    "issues.closed": ("issue-closed", "issue"),
}


@dataclass(frozen=True)
class Head:
    """What a delivery's headers say, checked before any of its body is read."""

    delivery_id: str
    event: str
    signature: str  # the X-Hub-Signature-256 given; "" when signatures are not checked
    length: int | None  # Content-Length; None for a chunked body


def signature(secret: str, body: bytes) -> str:
    """The `X-Hub-Signature-256` value GitHub sends for `body`."""
    return "sha256=" + hmac.digest(secret.encode(), body, hashlib.sha256).hex()


def shown(value: str) -> str:
    """A value taken from a request, safe in one log line: quoted, escaped, cut short."""
    cut = value[:_SHOWN_CHARS]
    return repr(cut) + ("…" if len(value) > len(cut) else "")


def check_head(headers: Mapping[str, str], *, secret: str | None, events: frozenset[str]) -> Head:
    """Refuse a delivery on its headers alone; `secret=None` accepts it unsigned.

    `headers` must be case-insensitive (Starlette's are); raises DeliveryError with the
    status to answer and a message saying what is wrong.
    """
    delivery_id = headers.get("x-github-delivery", "")
    if not _DELIVERY_ID.match(delivery_id):
        raise DeliveryError(400, "missing or malformed X-GitHub-Delivery header")
    declared = headers.get("content-length")
    length = int(declared) if declared is not None and declared.isdigit() else None
    if length is not None and length > MAX_BODY_BYTES:
        raise DeliveryError(413, "body over 25 MB", delivery_id=delivery_id)
    kind = headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise DeliveryError(
            415,
            f"content type {kind or 'none'!r}: configure the webhook for application/json",
            delivery_id=delivery_id,
        )
    given = headers.get("x-hub-signature-256", "") if secret is not None else ""
    if secret is not None and not given:
        raise DeliveryError(401, "no X-Hub-Signature-256 header", delivery_id=delivery_id)
    event = headers.get("x-github-event", "")
    if not _EVENT.match(event):
        raise DeliveryError(
            400, "missing or malformed X-GitHub-Event header", delivery_id=delivery_id
        )
    if event not in events:
        raise DeliveryError(
            400, f"event {event!r} is not one this app subscribes to", delivery_id=delivery_id
        )
    return Head(delivery_id, event, given, length)


class Signature:
    """The body's HMAC, fed chunk by chunk; `check` once the whole body has been fed."""

    def __init__(self, secret: str | None, head: Head) -> None:
        self._mac = None if secret is None else hmac.new(secret.encode(), None, hashlib.sha256)
        self._head = head

    def update(self, chunk: bytes) -> None:
        """Feed the next piece of the body."""
        if self._mac is not None:
            self._mac.update(chunk)

    def check(self) -> None:
        """Raise DeliveryError (401) unless the body fed matches the signature given."""
        if self._mac is None:
            return
        want = "sha256=" + self._mac.hexdigest()
        if not hmac.compare_digest(self._head.signature.encode(), want.encode()):
            raise DeliveryError(
                401,
                "X-Hub-Signature-256 does not match the body",
                delivery_id=self._head.delivery_id,
            )


def decode(head: Head, body: bytes) -> Arrival:
    """The delivery a verified body carries; DeliveryError (400) when it is no JSON object.

    Python's json refuses nesting deeper than the interpreter's recursion limit
    (RecursionError) and integers longer than `sys.get_int_max_str_digits()` (ValueError):
    both are the sender's fault, so both are a 400 naming the delivery, not a 500.
    """
    delivery_id = head.delivery_id
    try:
        payload = json.loads(body)
    except RecursionError:
        raise DeliveryError(400, "body nests too deeply to read", delivery_id=delivery_id) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DeliveryError(400, f"body is not JSON: {exc}", delivery_id=delivery_id) from None
    except ValueError:  # json's only other ValueError: an integer over the digit limit
        digits = sys.get_int_max_str_digits()
        raise DeliveryError(
            400, f"body has an integer over {digits} digits", delivery_id=delivery_id
        ) from None
    if not isinstance(payload, dict):
        raise DeliveryError(400, "body is not a JSON object", delivery_id=delivery_id)
    action = payload.get("action", "")
    plain = isinstance(action, str) and _ACTION.match(action)
    subject = subject_of(head.event, payload)
    return Arrival(delivery_id, head.event, action if plain else "", body, subject)


def subject_of(event: str, payload: Mapping[str, object]) -> str | None:
    """What a delivery is about (`comment:ID`, `review:ID`, `pull-closed:ID:WHEN`,
    `issue-closed:ID:WHEN`), or None
    when it names nothing the edge reads again; an id that is not a positive integer names
    nothing."""
    name = f"{event}.{payload.get('action')}"
    if name in _CLOSES:  # one close of one issue or pull request: its id and when
        kind, field = _CLOSES[name]
        obj = payload.get(field)
        if isinstance(obj, dict) and type(obj.get("id")) is int and obj.get("closed_at"):
            return f"{kind}:{obj['id']}:{obj['closed_at']}"
        return None
    found = _SUBJECTS.get(name)
    if found is None:
        return None
    kind, field = found
    obj = payload.get(field)
    ident = obj.get("id") if isinstance(obj, dict) else None
    if type(ident) is not int or ident <= 0:
        return None
    return f"{kind}:{ident}"


def parse_delivery(
    headers: Mapping[str, str],
    body: bytes,
    *,
    secret: str | None,
    events: frozenset[str],
) -> Arrival:
    """Verify and decode one delivery whose body is in hand (development: `secret=None`)."""
    head = check_head(headers, secret=secret, events=events)
    if len(body) > MAX_BODY_BYTES:
        raise DeliveryError(413, "body over 25 MB", delivery_id=head.delivery_id)
    mac = Signature(secret, head)
    mac.update(body)
    mac.check()
    return decode(head, body)
