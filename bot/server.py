"""The webhook endpoint: verify, store durably, answer 202; never wait on GitHub or a model.

`POST /webhook` checks the signature over the raw body, stores the delivery (deduplicated
by `X-GitHub-Delivery`) in the same group commit as any other delivery arriving at the
same moment, wakes the worker and answers. `GET /healthz` says whether the store answers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from bot.errors import DeliveryError
from bot.webhooks import MAX_BODY_BYTES, Delivery, parse_delivery
from orchestrator import inbox
from orchestrator.store import Store, Tx, now

log = logging.getLogger(__name__)


def create_app(
    store: Store,
    *,
    secret: str | None,
    events: frozenset[str],
    on_stored: Callable[[], None] = lambda: None,
) -> FastAPI:
    """The App's HTTP face over `store`; `secret=None` accepts unsigned deliveries (loudly)."""
    app = FastAPI(title="TeaParty for GitHub", docs_url=None, redoc_url=None, openapi_url=None)
    if secret is None:
        log.warning("INSECURE: webhook signatures are NOT checked; never expose this server")

    @app.post("/webhook", status_code=202)
    async def webhook(request: Request) -> JSONResponse:
        header_id = request.headers.get("x-github-delivery", "?")
        try:
            body = await _body(request, header_id)
            delivery = parse_delivery(request.headers, body, secret=secret, events=events)
        except DeliveryError as exc:
            log.info("delivery %s refused (%d): %s", exc.delivery_id or header_id, exc.status, exc)
            return JSONResponse({"message": str(exc)}, status_code=exc.status)
        try:
            fresh = await store.write(lambda tx: _store(tx, delivery))
        except Exception:  # the edge's guard: a store failure is ours, GitHub may redeliver
            log.exception("delivery %s: could not be stored", delivery.delivery_id)
            return JSONResponse({"message": "could not store the delivery"}, status_code=500)
        if fresh:
            on_stored()
        status = "queued" if fresh else "duplicate"
        log.debug(
            "delivery %s %s.%s %s", delivery.delivery_id, delivery.event, delivery.action, status
        )
        return JSONResponse(
            {"delivery_id": delivery.delivery_id, "status": status}, status_code=202
        )

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        pending = await store.read(
            lambda tx: tx.execute(
                "SELECT COUNT(*) FROM deliveries WHERE state = 'pending'"
            ).fetchone()[0]
        )
        return {"ok": True, "pending_deliveries": pending}

    return app


async def _body(request: Request, delivery_id: str) -> bytes:
    """The raw body, refusing more than GitHub ever sends before reading it all."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise DeliveryError(413, "body over 25 MB", delivery_id=delivery_id)
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise DeliveryError(
            415,
            f"content type {kind or 'none'!r}: configure the webhook for application/json",
            delivery_id=delivery_id,
        )
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise DeliveryError(413, "body over 25 MB", delivery_id=delivery_id)
        chunks.append(chunk)
    return b"".join(chunks)


def _store(tx: Tx, delivery: Delivery) -> bool:
    return inbox.record(
        tx,
        delivery_id=delivery.delivery_id,
        event=delivery.event,
        action=delivery.action,
        body=delivery.body,
        at=now(),
    )
