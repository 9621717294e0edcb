"""The webhook endpoint: verify, store durably, answer 202; never wait on GitHub or a model.

`POST /webhook` refuses on headers alone what it can (no signature, a size over 25 MB, an
event the App does not take) before reading any body, then streams the body through the
HMAC into a spool that holds at most `SPOOL_RAM_BYTES` in memory (the rest in an unnamed
temporary file, `SPOOL_DISK_BYTES` for all requests at once) and reads it back only once
the signature matched. A verified delivery is stored (deduplicated by `X-GitHub-Delivery`)
in the same group commit as any other arriving at the same moment, the worker is woken and
the answer is 202. A refusal closes the connection. `GET /healthz` says whether the store
answers. How long a request may take to arrive, and how many connections are open at
once, is bounded where `teaparty serve` starts the server (`bot.server.http_server`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from starlette.requests import ClientDisconnect

from bot.errors import DeliveryError
from bot.server.supervisor import WorkerHealth
from bot.server.webhooks import MAX_BODY_BYTES, Head, Signature, check_head, decode, shown
from orchestrator.api import Arrival, Deliveries

log = logging.getLogger(__name__)

SPOOL_RAM_BYTES = 256 * 1024  # GitHub's payloads are mostly 5-50 KB: those never touch disk
SPOOL_DISK_BYTES = 256 * 1024 * 1024  # ~10 bodies of 25 MB waiting for their signature
# Set in a request's scope["state"] by bot.server.http_server's protocol when it closed the
# connection because the request was not complete in time; the value is the limit in seconds.
DEADLINE_PASSED = "teaparty.deadline_passed"
_CLOSE = {"connection": "close"}


Workers = Callable[[], Mapping[str, WorkerHealth]]


def create_app(
    queue: Deliveries,
    *,
    secret: str | None,
    events: frozenset[str],
    on_stored: Callable[[], None] = lambda: None,
    spool_disk_bytes: int = SPOOL_DISK_BYTES,
    workers: Workers = dict,
) -> FastAPI:
    """The App's HTTP face over the deliveries `queue`; `secret=None` accepts unsigned ones.

    `workers` reports the background workers' health for `/healthz` (none by default).
    """
    app = FastAPI(title="TeaParty for GitHub", docs_url=None, redoc_url=None, openapi_url=None)
    ingest = Ingest(queue)
    disk = DiskBudget(spool_disk_bytes)
    if secret is None:
        log.warning("INSECURE: webhook signatures are NOT checked; never expose this server")

    @app.post("/webhook", status_code=202)
    async def webhook(request: Request) -> Response:
        try:
            head = check_head(request.headers, secret=secret, events=events)
        except DeliveryError as exc:
            return _refused(request, exc)
        body = Body(head, secret=secret, disk=disk)
        try:
            delivery = decode(head, await body.read(request))
        except DeliveryError as exc:
            return _refused(request, exc)
        except ClientDisconnect:
            _cut(request, body)
            return Response(status_code=400, headers=_CLOSE)  # nobody is listening
        try:
            fresh = await ingest.put(delivery)
        except Exception:  # the edge's guard: a store failure is ours, GitHub may redeliver
            log.exception("delivery %s: could not be stored", shown(delivery.delivery_id))
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
    async def healthz() -> JSONResponse:
        return await _health(queue, workers())

    return app


async def _health(queue: Deliveries, workers: Mapping[str, WorkerHealth]) -> JSONResponse:
    """200 while every worker runs (or restarts); 503 naming a worker that was given up on.

    Deliveries are still stored (and answered 202) while a worker is down: they are durable,
    and the next process works them off.
    """
    backlog = await queue.backlog()
    failed = [h for h in workers.values() if h.state == "failed"]
    content: dict[str, Any] = {
        "ok": not failed,
        "workers": {name: health.report() for name, health in workers.items()},
        "pending_deliveries": backlog.pending,
        "oldest_pending_age_s": round(backlog.oldest_age_s, 3),
    }
    if failed:
        names = ", ".join(f"{h.name} ({h.last_error})" for h in failed)
        content["error"] = (
            f"stopped after repeated failures: {names}; deliveries are stored and wait for a"
            " restart"
        )
    return JSONResponse(content, status_code=503 if failed else 200)


def _refused(request: Request, exc: DeliveryError) -> JSONResponse:
    """Answer a refusal and close: the rest of the body (if any) is never read."""
    delivery_id = exc.delivery_id or request.headers.get("x-github-delivery", "")
    log.info(
        "delivery %s refused (%d): %s (from %s, user agent %s)",
        shown(delivery_id),
        exc.status,
        exc,
        request.client.host if request.client else "?",
        shown(request.headers.get("user-agent", "")),
    )
    content = {"message": str(exc)} | ({"delivery_id": exc.delivery_id} if exc.delivery_id else {})
    return JSONResponse(content, status_code=exc.status, headers=_CLOSE)


def _cut(request: Request, body: Body) -> None:
    """One line for a body that stopped coming: the client left, or its time ran out."""
    limit = request.scope.get("state", {}).get(DEADLINE_PASSED)
    if limit is None:
        why = f"the client closed the connection after {body.progress()} bytes of the body"
    else:
        why = f"body not complete in {limit:g} s ({body.progress()} bytes); connection closed"
    log.info("delivery %s: %s; nothing stored", shown(body.head.delivery_id), why)


class DiskBudget:
    """Bytes of not yet verified bodies spooled to disk, shared by every request."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    @contextlib.contextmanager
    def lease(self, head: Head) -> Iterator[Callable[[int], None]]:
        """A `take(n)` for one body; what it took is given back when the body is done."""
        held = 0

        def take(size: int) -> None:
            nonlocal held
            if self.used + size > self.limit:
                raise DeliveryError(
                    503,
                    "too many large deliveries arriving at once; redeliver it later",
                    delivery_id=head.delivery_id,
                )
            self.used += size
            held += size

        try:
            yield take
        finally:
            self.used -= held


class Body:
    """One request's body as it streams in: counted, fed to the HMAC, spooled."""

    def __init__(self, head: Head, *, secret: str | None, disk: DiskBudget) -> None:
        self.head = head
        self.received = 0
        self._signature = Signature(secret, head)
        self._disk = disk

    def progress(self) -> str:
        """Bytes received so far, of how many when the length was declared."""
        of = f" of {self.head.length:,}" if self.head.length is not None else ""
        return f"{self.received:,}{of}"

    async def read(self, request: Request) -> bytes:
        """The whole body once its signature matched; DeliveryError (401, 413, 503) else."""
        with (
            tempfile.SpooledTemporaryFile(max_size=SPOOL_RAM_BYTES) as spool,
            self._disk.lease(self.head) as take,
        ):
            async with contextlib.aclosing(request.stream()) as stream:
                async for chunk in stream:
                    self._feed(chunk, spool, take)
            self._signature.check()
            spool.seek(0)
            return spool.read()

    def _feed(
        self,
        chunk: bytes,
        spool: tempfile.SpooledTemporaryFile[bytes],
        take: Callable[[int], None],
    ) -> None:
        self.received += len(chunk)
        if self.received > MAX_BODY_BYTES:
            raise DeliveryError(413, "body over 25 MB", delivery_id=self.head.delivery_id)
        if self.received > SPOOL_RAM_BYTES:
            take(len(chunk))
        self._signature.update(chunk)
        spool.write(chunk)


class Ingest:
    """Stores deliveries in batches: those arriving while a commit runs share the next one.

    One write (one savepoint) per batch instead of one per delivery: at 64 deliveries in
    flight the statements per delivery fall from three to one.
    """

    def __init__(self, queue: Deliveries) -> None:
        self.queue = queue
        self._pending: list[tuple[Arrival, asyncio.Future[bool]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def put(self, delivery: Arrival) -> bool:
        """Store one delivery durably; False when its id was stored before."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending.append((delivery, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                fresh = await self.queue.record_all([delivery for delivery, _ in batch])
            except Exception as exc:  # handed to every waiting request, which answers 500
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), stored in zip(batch, fresh, strict=True):
                if not future.done():
                    future.set_result(stored)
