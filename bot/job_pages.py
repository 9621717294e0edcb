"""The job pages `teaparty serve` shows at TEAPARTY_PUBLIC_URL, to people signed in with GitHub.

The pages are those of `teaparty jobs view` (bot/job_viewer.py, bot/job_html.py), behind a
sign-in instead of a launch token. Someone not signed in sees only the sign-in page. The
sign-in is GitHub's OAuth web flow with `state`, bound to the browser by a sealed cookie and
taken once (bot/server/sessions.py); the session is a sealed, expiring cookie: HttpOnly,
Secure when the public URL is https, and SameSite=Lax, because GitHub's redirect back to
/auth/callback and a click on the tracking comment's link are cross-site top-level
navigations, which a Strict cookie would not join (the person would arrive signed out). Lax
still keeps it off cross-site subrequests and forms; the pages change nothing.

A job is shown to people GitHub says have triage, write, maintain or admin access to its
repository, asked with their own token and cached for ROLE_CACHE_S; a project's
`job_page: {readers: true}` opens it to readers. To anyone else a job does not exist (404),
and /jobs lists only what the viewer may see. Live streams are bounded by the viewer
(TEAPARTY_PAGE_STREAMS) and held outside the webhook edge's room (bot/server/http_server.py);
`teaparty serve` adds the pages to the App (bot/serve.py).
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from urllib.parse import quote

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from bot import job_html
from bot.errors import GitHubError
from bot.github.users import GitHubUsers, Role, SignInError
from bot.job_viewer import HEADERS, Viewer
from bot.server.sessions import (
    SESSION_COOKIE,
    SESSION_TTL,
    SIGNIN_COOKIE,
    SIGNIN_TTL,
    Session,
    Sessions,
    load_keys,
)
from bot.settings import CALLBACK_PATH, Settings
from orchestrator.api import JobNotFoundError, JobSummary, job_page, shipped_org_dir

STREAM_PATH = re.compile(r"/jobs/[0-9]+/live")
ROLE_CACHE_S = 60.0
ROLE_CACHE_ENTRIES = 1024  # (login, repository) pairs before the expired ones are dropped
SHOWN_TO: frozenset[Role] = frozenset({"triage", "write", "maintain", "admin"})

log = logging.getLogger(__name__)


class JobPages:
    """The served job pages: the viewer's pages, each behind a GitHub sign-in and a role."""

    def __init__(
        self,
        settings: Settings,
        *,
        env: Mapping[str, str],
        users: GitHubUsers,
        sessions: Sessions,
        clock: Callable[[], float] = time.time,
        poll_s: float = 0.5,
    ) -> None:
        assert settings.public_url is not None, "job pages need TEAPARTY_PUBLIC_URL"
        self.viewer = Viewer(
            settings.home,
            org_dir=settings.config_dir or shipped_org_dir(),
            env=env,
            token="",  # not used: the sign-in stands at the door
            poll_s=poll_s,
            live_streams=settings.page_streams,
        )
        self.users, self.sessions, self.clock = users, sessions, clock
        self.public_url = settings.public_url
        self.secure = settings.public_url.startswith("https://")
        self.redirect_uri = settings.public_url + CALLBACK_PATH
        self._roles: dict[tuple[str, str], tuple[Role, float]] = {}
        self._open: contextlib.AsyncExitStack | None = None

    @classmethod
    async def start(
        cls,
        settings: Settings,
        env: Mapping[str, str],
        app: FastAPI,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.time,
    ) -> JobPages | None:
        """The pages on `app`, opened, when the settings give a public URL (and the client it
        needs); None otherwise. `transport` carries the calls to GitHub (tests)."""
        if settings.public_url is None or not settings.client_id or not settings.client_secret:
            return None
        users = GitHubUsers(
            server_url=settings.server_url,
            api_url=settings.api_url,
            client_id=settings.client_id,
            client_secret=settings.client_secret,
            transport=transport,
        )
        sessions = Sessions(load_keys(settings.home, now=clock()), clock=clock)
        pages = cls(settings, env=env, users=users, sessions=sessions, clock=clock)
        await pages.open()
        pages.routes(app)
        return pages

    async def open(self) -> None:
        """Open the store's read-only views the pages read."""
        stack = contextlib.AsyncExitStack()
        await stack.enter_async_context(self.viewer.lifespan(FastAPI()))
        self._open = stack

    def close(self) -> None:
        """End the open live streams (the server is stopping)."""
        self.viewer.close()

    async def aclose(self) -> None:
        """Close the views and the GitHub client."""
        self.viewer.close()
        if self._open is not None:
            await self._open.aclose()
        await self.users.aclose()

    def routes(self, app: FastAPI) -> None:
        """Add the pages to the App's application."""
        app.get("/jobs")(self.jobs)
        app.get("/jobs/{job_id}")(self.job)
        app.get("/jobs/{job_id}/c/{conversation_id:path}")(self.conversation)
        app.get("/jobs/{job_id}/live")(self.live)
        app.get("/auth/signin")(self.sign_in)
        app.get(CALLBACK_PATH)(self.callback)

    async def jobs(self, request: Request) -> Response:
        """The jobs the signed-in person may see."""
        session = self._session(request)
        if session is None:
            return self._sign_in_page(request)
        shown = [job for job in await self.viewer.views.jobs() if await self._sees(session, job)]
        return _guarded(HTMLResponse(job_html.jobs_list(shown, shown=self.viewer.shown)))

    async def job(self, job_id: int, request: Request) -> Response:
        """A job's page; 404 to whoever may not see it."""
        return await self._behind(request, job_id, lambda: self.viewer.job(job_id))

    async def conversation(
        self, job_id: int, conversation_id: str, request: Request, after: int = 0
    ) -> Response:
        """A page of one of the job's transcripts."""
        return await self._behind(
            request, job_id, lambda: self.viewer.conversation(job_id, conversation_id, after)
        )

    async def live(self, job_id: int, request: Request) -> Response:
        """The job's live part as an event stream."""
        if self._session(request) is None:
            return PlainTextResponse("sign in first", status_code=401)
        return await self._behind(request, job_id, lambda: self.viewer.live(job_id, request))

    async def sign_in(self, request: Request, next: str = "/jobs") -> Response:
        """Off to GitHub to sign in; the state's cookie binds the sign-in to this browser."""
        state, sealed = self.sessions.begin(next)
        url = self.users.authorize_url(state=state, redirect_uri=self.redirect_uri)
        response = RedirectResponse(url, status_code=302)
        self._cookie(response, SIGNIN_COOKIE, sealed, max_age=SIGNIN_TTL, path="/auth")
        return _guarded(response)

    async def callback(
        self, request: Request, code: str = "", state: str = "", error: str = ""
    ) -> Response:
        """GitHub's way back: the state checked, the code traded for the person's token."""
        after = self.sessions.finish(request.cookies.get(SIGNIN_COOKIE, ""), state)
        if error or not code or after is None:
            why = "GitHub did not sign you in" if error else "this sign-in was not begun here"
            return self._refused(f"{why}, or it was used already.")
        try:
            token = await self.users.exchange(code, redirect_uri=self.redirect_uri)
            login = await self.users.login(token)
        except (SignInError, GitHubError) as exc:
            log.warning("sign-in refused: %s", exc)
            return self._refused("GitHub did not confirm the sign-in.")
        response = RedirectResponse(after, status_code=303)
        sealed = self.sessions.seal(Session(login, token))
        self._cookie(response, SESSION_COOKIE, sealed, max_age=SESSION_TTL, path="/")
        response.delete_cookie(SIGNIN_COOKIE, path="/auth")
        return _guarded(response)

    async def _behind(
        self, request: Request, job_id: int, page: Callable[[], Awaitable[Response]]
    ) -> Response:
        session = self._session(request)
        if session is None:
            return self._sign_in_page(request)
        try:
            summary = (await self.viewer.views.job(job_id)).summary
        except JobNotFoundError:
            return _guarded(self.viewer.missing(job_id))
        if not await self._sees(session, summary):
            return _guarded(self.viewer.missing(job_id))  # as if it were not there
        return _guarded(await page())

    async def _sees(self, session: Session, job: JobSummary) -> bool:
        origin = job.origin
        if origin.forge != "github" or not origin.repository:
            return False
        role = await self._role(session, origin.repository)
        if role in SHOWN_TO:
            return True
        if role != "read":
            return False
        try:
            return (await job_page(self.viewer.views, job.job_id)).readers
        except JobNotFoundError:
            return False

    async def _role(self, session: Session, repository: str) -> Role:
        key, now = (session.login.lower(), repository.lower()), self.clock()
        cached = self._roles.get(key)
        if cached is not None and now - cached[1] < ROLE_CACHE_S:
            return cached[0]
        try:
            role = await self.users.role(session.token, repository)
        except GitHubError as exc:  # not cached: the next page asks again
            log.warning("%s's role in %s not known: %s", session.login, repository, exc)
            return "none"
        if len(self._roles) >= ROLE_CACHE_ENTRIES:  # a long-running server forgets the stale
            self._roles = {k: v for k, v in self._roles.items() if now - v[1] < ROLE_CACHE_S}
        self._roles[key] = (role, now)
        return role

    def _session(self, request: Request) -> Session | None:
        cookie = request.cookies.get(SESSION_COOKIE)
        return self.sessions.open(cookie) if cookie else None

    def _sign_in_page(self, request: Request) -> Response:
        here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        link = f"/auth/signin?next={quote(here, safe='')}"
        body = (
            "<h1>Sign in</h1><p>Job pages are shown to people with access to the job's "
            f'repository on GitHub.</p><p><a id="sign-in" href="{self.viewer.shown(link)}">'
            "Sign in with GitHub</a></p>"
        )
        page = job_html.document("Sign in", body, shown=self.viewer.shown)
        return _guarded(HTMLResponse(page, status_code=401))

    def _refused(self, why: str) -> Response:
        body = f'<h1>Not signed in</h1><p>{why}</p><p><a href="/auth/signin">Sign in again</a></p>'
        page = job_html.document("Not signed in", body, shown=self.viewer.shown)
        return _guarded(HTMLResponse(page, status_code=400))

    def _cookie(
        self, response: Response, name: str, value: str, *, max_age: int, path: str
    ) -> None:
        response.set_cookie(
            name,
            value,
            max_age=max_age,
            path=path,
            httponly=True,
            secure=self.secure,
            samesite="lax",
        )


def _guarded(response: Response) -> Response:
    response.headers.update(HEADERS)
    return response
