"""`teaparty jobs view ID`: the job page from a read-only server on 127.0.0.1.

Loopback is reachable by every local user (and by agents whose project opens the network),
so nothing is served without the random token of this launch: the printed link carries it
once, and the page sets it as an HttpOnly, SameSite=Strict cookie of this origin and drops
it from the address. The store is read beside whoever holds it (a run, `teaparty serve`);
this server writes nothing.

A job's live part is an event stream (`/jobs/{id}/live`): the store is read every half
second and the part sent again when anything it shows changed; it ends when the job has.
Streams are bounded (LIVE_STREAMS); one more is answered 503 and the page stays whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import secrets
import socket
import sys
import webbrowser
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from urllib.parse import quote

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.responses import StreamingResponse

from bot import job_html
from orchestrator.api import (
    JobNotFoundError,
    JobPage,
    JobViews,
    conversation_transcript,
    job_page,
    redactor,
)

COOKIE = "teaparty_view"
LIVE_STREAMS = 16
POLL_S = 0.5
HEARTBEAT_S = 15.0
ENDED = ("done", "cancelled", "failed")
HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "script-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; form-action 'none'",
}


class Viewer:
    """The viewer's pages over one store, for one launch's token."""

    def __init__(
        self,
        home: Path,
        *,
        org_dir: Path,
        env: Mapping[str, str],
        token: str,
        poll_s: float = POLL_S,
        live_streams: int = LIVE_STREAMS,
    ) -> None:
        self.home, self.org_dir, self.token, self.poll_s = home, org_dir, token, poll_s
        self.shown = job_html.Shown(redactor(env))
        self.streams = asyncio.Semaphore(live_streams)
        self.closed = False  # set at shutdown: open streams end at their next look
        self._views: JobViews | None = None
        # A job's page as its streams last read it: many pages open on one job read the
        # store once a look, not once each.
        self._looked: dict[int, tuple[float, JobPage]] = {}
        self._looking: dict[int, asyncio.Lock] = {}

    @property
    def views(self) -> JobViews:
        assert self._views is not None, "served outside the app's lifespan"
        return self._views

    @contextlib.asynccontextmanager
    async def lifespan(self, _: FastAPI) -> AsyncIterator[None]:
        async with JobViews.open(self.home, org_dir=self.org_dir) as opened:
            self._views = opened
            yield

    async def token_only(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        """Nothing without this launch's token; the link's token becomes a cookie."""
        given = request.query_params.get("token")
        if given is not None and _same(given, self.token):
            clean = request.url.remove_query_params("token")
            response: Response = RedirectResponse(str(clean), status_code=303)
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict", path="/")
            return response
        if not _same(request.cookies.get(COOKIE, ""), self.token):
            return PlainTextResponse(
                "This viewer shows its jobs only through the link `teaparty jobs view` printed.",
                status_code=403,
            )
        response = await call_next(request)
        response.headers.update(HEADERS)
        return response

    async def jobs(self) -> Response:
        return HTMLResponse(job_html.jobs_list(await self.views.jobs(), shown=self.shown))

    async def job(self, job_id: int) -> Response:
        try:
            page = await job_page(self.views, job_id)
        except JobNotFoundError:
            return self.missing(job_id)
        stream = None if page.view.summary.state in ENDED else f"/jobs/{job_id}/live"
        return HTMLResponse(job_html.job_page(page, shown=self.shown, stream=stream))

    async def conversation(self, job_id: int, conversation_id: str, after: int = 0) -> Response:
        """A conversation's messages after message `after`, a page of them at a time."""
        try:
            level, messages = await conversation_transcript(self.views, job_id, conversation_id)
        except JobNotFoundError:
            return self.missing(job_id)
        shown = [m for m in messages if m.seq > after][: job_html.PAGE_MESSAGES]
        page = job_html.transcript(job_id, level, shown, shown=self.shown, after=after)
        return HTMLResponse(page)

    async def live(self, job_id: int, request: Request) -> Response:
        """The job's live part as an event stream: sent again whenever it changed."""
        if self.streams.locked():
            return PlainTextResponse(
                "too many live pages open: reload this one later",
                status_code=503,
                headers={"Retry-After": "10"},
            )
        return StreamingResponse(
            self._events(job_id, request),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def _events(self, job_id: int, request: Request) -> AsyncIterator[str]:
        async with self.streams:
            sent: tuple[object, ...] | None = None
            quiet = 0.0
            while not self.closed and not await request.is_disconnected():
                try:
                    page = await self._look(job_id)
                except JobNotFoundError:
                    break
                if page.version != sent:
                    sent, quiet = page.version, 0.0
                    part = job_html.live_part(page, shown=self.shown)
                    yield f"event: page\ndata: {json.dumps(part)}\n\n"
                elif quiet >= HEARTBEAT_S:
                    quiet = 0.0
                    yield ": still here\n\n"
                if page.view.summary.state in ENDED:
                    break
                await asyncio.sleep(self.poll_s)
                quiet += self.poll_s
            yield "event: end\ndata: {}\n\n"

    async def _look(self, job_id: int) -> JobPage:
        """The job's page, read at most once per half a look's interval for all streams."""
        async with self._looking.setdefault(job_id, asyncio.Lock()):
            now = asyncio.get_running_loop().time()
            looked = self._looked.get(job_id)
            if looked is not None and now - looked[0] < self.poll_s / 2:
                return looked[1]
            page = await job_page(self.views, job_id)
            self._looked[job_id] = (now, page)
            return page

    def close(self) -> None:
        """End every open stream at its next look (the server is stopping)."""
        self.closed = True

    def missing(self, job_id: int) -> Response:
        body = f"<h1>No job {job_id} here</h1>"
        page = job_html.document("No such job", body, shown=self.shown)
        return HTMLResponse(page, status_code=404)


def viewer_app(viewer: Viewer) -> FastAPI:
    """The viewer's application: its pages, each behind the launch's token."""
    app = FastAPI(lifespan=viewer.lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.middleware("http")(viewer.token_only)
    app.get("/", include_in_schema=False)(_to_jobs)
    app.get("/jobs")(viewer.jobs)
    app.get("/jobs/{job_id}")(viewer.job)
    app.get("/jobs/{job_id}/c/{conversation_id:path}")(viewer.conversation)
    app.get("/jobs/{job_id}/live")(viewer.live)
    return app


async def _to_jobs() -> Response:
    return RedirectResponse("/jobs", status_code=303)


def _same(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode(), token.encode())


def new_token() -> str:
    return secrets.token_urlsafe(24)


def loopback_socket() -> socket.socket:
    """A listening socket on 127.0.0.1, on a port the system picks."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


def link(sock: socket.socket, job_id: int, token: str) -> str:
    port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/jobs/{job_id}?token={quote(token)}"


async def serve(app: FastAPI, sock: socket.socket) -> None:
    """Serve `app` on `sock` until cancelled (Ctrl-C)."""
    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
    await uvicorn.Server(config).serve(sockets=[sock])


async def view(
    job_id: int, *, home: Path, org_dir: Path, env: Mapping[str, str], open_browser: bool
) -> int:
    """Serve the job's page on 127.0.0.1 until Ctrl-C, its link printed (and opened in a
    browser when asked and there is a screen to show one on)."""
    token = new_token()
    viewer = Viewer(home, org_dir=org_dir, env=env, token=token)
    with loopback_socket() as sock:
        url = link(sock, job_id, token)
        print(f"job {job_id}'s page: {url}", flush=True)
        print("  only this link opens it (its token is this launch's); Ctrl-C stops it", flush=True)
        if open_browser and _has_screen(env):
            webbrowser.open(url)
        await serve(viewer_app(viewer), sock)
    return 0


def _has_screen(env: Mapping[str, str]) -> bool:
    """Whether a graphical browser can show the page (else a text one would take over the
    terminal the viewer prints to)."""
    return sys.platform == "darwin" or bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))
