"""The webhook endpoint: verify, store durably, answer 202; never wait on GitHub or a model.

`POST /webhook` checks the signature over the raw body, stores the delivery (deduplicated
by `X-GitHub-Delivery`) in the same group commit as any other delivery arriving at the
same moment, wakes the worker and answers. `GET /healthz` says whether the store answers.
"""

from __future__ import annotations

import asyncio
import functools
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
    ingest = Ingest(store)
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
            fresh = await ingest.put(delivery)
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
    if declared.isdigit():  # the usual case: the size is known and allowed
        return await request.body()
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise DeliveryError(413, "body over 25 MB", delivery_id=delivery_id)
        chunks.append(chunk)
    return b"".join(chunks)


class Ingest:
    """Stores deliveries in batches: those arriving while a commit runs share the next one.

    One write (one savepoint) per batch instead of one per delivery: at 64 deliveries in
    flight the statements per delivery fall from three to one.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._pending: list[tuple[Delivery, asyncio.Future[bool]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def put(self, delivery: Delivery) -> bool:
        """Store one delivery durably; False when its id was stored before."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending.append((delivery, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            deliveries = [delivery for delivery, _ in batch]
            try:
                fresh = await self.store.write(functools.partial(_store_all, deliveries))
            except Exception as exc:  # handed to every waiting request, which answers 500
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), stored in zip(batch, fresh, strict=True):
                if not future.done():
                    future.set_result(stored)


def _store_all(deliveries: list[Delivery], tx: Tx) -> list[bool]:
    at = now()
    return [
        inbox.record(
            tx,
            delivery_id=d.delivery_id,
            event=d.event,
            action=d.action,
            body=d.body,
            at=at,
        )
        for d in deliveries
    ]
