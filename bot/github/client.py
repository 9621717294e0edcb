"""The GitHub REST adapter: App auth, cached installation tokens, retries, polite writes.

githubkit does the HTTP and the JWT; its own retries are off so that rate limits and 5xx
are handled here with an injected sleep: a 5xx or a dropped connection is retried with
backoff, a rate limit waits for `retry-after` or `x-ratelimit-reset` when that is short and
otherwise raises RateLimitedError so the work is retried after the reset. Responses are
read as plain JSON (githubkit's strict models reject real responses; see GITHUBKIT.md),
and mutating requests are spaced by `write_interval_s`, as GitHub asks of integrations.

A 5xx or a lost connection on a write means "maybe applied": GitHub may have made the
comment or the pull request and failed to say so. A write that is not idempotent (a new
comment, a new pull request) therefore names how to find its effect, and before each retry
that lookup runs; what it finds is the write's result. Edits and reactions are idempotent
and simply repeated.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import math
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import httpx
from githubkit import AppAuthStrategy, GitHub, TokenAuthStrategy
from githubkit.cache import MemCacheStrategy
from githubkit.exception import RateLimitExceeded, RequestError, RequestFailed
from githubkit.response import Response
from githubkit.utils import UNSET

from bot.errors import GitHubError, RateLimitedError

log = logging.getLogger(__name__)

USER_AGENT = "teaparty-github/0.1"
TOKEN_MARGIN_S = 300.0  # a token is renewed this long before GitHub says it expires
PERMISSION_TTL_S = 60.0
MAX_WAIT_S = 60.0  # longer waits go back to the delivery queue instead of holding a worker
RETRIES = 4
PER_PAGE = 100
MAX_PAGES = 50  # a listing longer than 5,000 items is cut there (and says so in the log)

Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]
Json = Any
Call = Callable[[GitHub[Any]], Awaitable[Response[Any]]]
Effect = Callable[[], Awaitable[Json | None]]
_MARKER = re.compile(r"<!-- teaparty:[^>]*? -->")
_NEXT_CURSOR = re.compile(r"[?&]cursor=([^&>]+)[^>]*>;\s*rel=\"next\"")


@dataclass(frozen=True)
class Identity:
    """Who the App is on GitHub: what its comments and pull requests are authored as.

    `login` is the author's login (`{slug}[bot]` for an App); `app_id` is what GitHub puts in
    a comment's `performed_via_github_app.id` (None where it puts none, e.g. a person's
    token). Runner mode passes the identity of its token instead (`github-actions[bot]`, the
    Actions App's id).
    """

    login: str
    app_id: int | None

    def wrote(self, comment: Json) -> bool:
        """Whether an issue comment is ours: our login, made through our App where we have one."""
        if not self.opened(comment):
            return False
        if self.app_id is None:
            return True
        via = comment.get("performed_via_github_app")
        app_id = via.get("id") if isinstance(via, dict) else None
        return type(app_id) is int and app_id == self.app_id

    def opened(self, item: Json) -> bool:
        """Whether a pull request (which names no App) or comment is authored by our login."""
        user = item.get("user") if isinstance(item, dict) else None
        login = user.get("login") if isinstance(user, dict) else None
        return isinstance(login, str) and login.casefold() == self.login.casefold()


@dataclass(frozen=True)
class Quota:
    """What GitHub last said of one rate-limit resource (`core`, `graphql`): requests left,
    the hour's limit, and when it resets (epoch seconds)."""

    remaining: int
    limit: int
    reset_at: float


@dataclass
class _Token:
    value: str
    expires_at: float


class GitHubApp:
    """One GitHub App: its JWT client, its installations' tokens and clients."""

    def __init__(
        self,
        *,
        app_id: str,
        private_key: str,
        api_url: str,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = time.time,
        write_interval_s: float = 1.0,
    ) -> None:
        self.api_url = api_url.rstrip("/") + "/"
        self._pool = transport or httpx.AsyncHTTPTransport(retries=0)
        self._transport = _Shared(self._pool)
        self._app = self._client(AppAuthStrategy(app_id, private_key))
        self._sleep = sleep
        self._clock = clock
        self._write_interval_s = write_interval_s
        self._last_write = 0.0
        self._write_lock = asyncio.Lock()
        self._tokens: dict[int, _Token] = {}
        self._token_locks: dict[int, asyncio.Lock] = {}
        self._clients: dict[int, tuple[str, GitHub[Any]]] = {}
        self._identity: Identity | None = None
        self.requests = 0  # sent since this object was made, retries included
        self.quotas: dict[str, Quota] = {}  # by resource, as the latest response said
        # Told each installation token as it is minted: the engine looks for every secret
        # it holds in what it pushes (Runtime.open wires it).
        self.minted: Callable[[str], None] = lambda _: None

    def _client(self, auth: Any) -> GitHub[Any]:
        return GitHub(
            auth,
            base_url=self.api_url,
            user_agent=USER_AGENT,
            async_transport=self._transport,
            http_cache=False,
            cache_strategy=MemCacheStrategy(),  # githubkit's default cache is process-wide
            auto_retry=False,
            timeout=30.0,
            # A job's log answers 302 to blob storage: followed by this client, and httpx
            # drops the Authorization header when a redirect leaves the API's origin.
            follow_redirects=True,
        )

    async def identity(self) -> Identity:
        """The App as the author of its comments: `{slug}[bot]` and its id, asked once."""
        if self._identity is None:
            app = await self.call(self._app, lambda gh: gh.rest.apps.async_get_authenticated())
            self._identity = Identity(f"{app['slug']}[bot]", int(app["id"]))
        return self._identity

    async def login(self) -> str:
        """The app's bot login, `{slug}[bot]`: what its comments are authored as."""
        return (await self.identity()).login

    async def token(self, installation_id: int) -> str:
        """An installation token, minted once and reused until shortly before it expires."""
        lock = self._token_locks.setdefault(installation_id, asyncio.Lock())
        async with lock:
            cached = self._tokens.get(installation_id)
            if cached is None or cached.expires_at - TOKEN_MARGIN_S <= self._clock():
                minted = await self.call(
                    self._app,
                    lambda gh: gh.rest.apps.async_create_installation_access_token(installation_id),
                    write=True,
                )
                cached = _Token(str(minted["token"]), _epoch(str(minted["expires_at"])))
                self._tokens[installation_id] = cached
                self.minted(cached.value)
            return cached.value

    async def deliveries(self, *, cursor: str | None = None) -> tuple[list[Json], str | None]:
        """One page of the App's webhook delivery attempts, newest first, and the next cursor."""
        headers: dict[str, str] = {}

        def listed(gh: GitHub[Any]) -> Awaitable[Response[Any]]:
            if cursor is None:  # githubkit would send an empty cursor, which GitHub refuses
                return gh.rest.apps.async_list_webhook_deliveries(per_page=100)
            return gh.rest.apps.async_list_webhook_deliveries(per_page=100, cursor=cursor)

        page = await self.call(self._app, listed, headers=headers)
        found = _NEXT_CURSOR.search(headers.get("link", ""))
        return list(page or []), found[1] if found else None

    async def installations(self) -> list[Json]:
        """The App's installations (all pages)."""

        def page(n: int) -> Call:
            return lambda gh: gh.rest.apps.async_list_installations(per_page=PER_PAGE, page=n)

        return await _pages(lambda call: self.call(self._app, call), page, what="installations")

    async def repo_installation(self, owner: str, repo: str) -> int:
        """The id of the App's installation on `owner/repo` (404 when it has none)."""
        found = await self.call(
            self._app, lambda gh: gh.rest.apps.async_get_repo_installation(owner, repo)
        )
        return int(found["id"])

    async def redeliver(self, attempt_id: int) -> None:
        """Ask GitHub to send a delivery attempt again (same X-GitHub-Delivery id)."""
        await self.call(
            self._app,
            lambda gh: gh.rest.apps.async_redeliver_webhook_delivery(attempt_id),
            write=True,
        )

    async def installation(self, installation_id: int) -> Installation:
        """A client acting as one installation."""
        token = await self.token(installation_id)
        known = self._clients.get(installation_id)
        if known is None or known[0] != token:
            known = (token, self._client(TokenAuthStrategy(token)))
            self._clients[installation_id] = known
        return Installation(self, known[1], installation_id)

    async def call(
        self,
        gh: GitHub[Any],
        call: Call,
        *,
        write: bool = False,
        effect: Effect | None = None,
        headers: dict[str, str] | None = None,
        text: bool = False,
    ) -> Json:
        """Run one request with retries; its JSON body (None for an empty one), or with
        `text` its body as text (a job's log, where GitHub redirected to it).

        `effect` finds what a non-idempotent write made: after a 5xx or a lost connection it
        is looked for before the write is tried again, and returned if found. `headers`, if
        given, receives the response's headers (a `Link` to the next page).
        """
        maybe_applied = False
        for attempt in range(RETRIES + 1):
            if maybe_applied and (found := await _look(effect)) is not None:
                return found
            maybe_applied = False
            try:
                return await self._send(gh, call, write=write, headers=headers, text=text)
            except RateLimitExceeded as exc:
                wait = exc.retry_after.total_seconds()
                if wait > MAX_WAIT_S or attempt == RETRIES:
                    raise RateLimitedError(
                        f"GitHub rate limit ({exc.response.status_code}) for {wait:.0f}s",
                        retry_at=self._clock() + wait,
                        status=exc.response.status_code,
                    ) from None
                log.warning("GitHub rate limit: waiting %.1fs before retrying", wait)
                await self._sleep(max(wait, 1.0))
                continue
            except RequestFailed as exc:
                status = exc.response.status_code
                if status < 500 or attempt == RETRIES:
                    raise _failed(exc) from None
                log.warning("GitHub answered %d; retry %d of %d", status, attempt + 1, RETRIES)
                maybe_applied = write
            except RequestError as exc:
                if attempt == RETRIES:
                    raise GitHubError(f"GitHub unreachable: {exc}") from None
                log.warning("GitHub unreachable (%s); retry %d of %d", exc, attempt + 1, RETRIES)
                maybe_applied = write
            await self._sleep(float(2**attempt))
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    async def _send(
        self,
        gh: GitHub[Any],
        call: Call,
        *,
        write: bool,
        headers: dict[str, str] | None,
        text: bool = False,
    ) -> Json:
        if write:
            await self._pace()
        self.requests += 1
        response = await call(gh)
        self._note_quota(response.headers)
        if headers is not None:
            headers.update({k.lower(): v for k, v in response.headers.items()})
        if text:
            return response.text
        return response.json() if response.content else None

    def _note_quota(self, headers: Mapping[str, str]) -> None:
        left, limit = headers.get("x-ratelimit-remaining", ""), headers.get("x-ratelimit-limit", "")
        reset = headers.get("x-ratelimit-reset", "")
        if left.isdigit() and limit.isdigit() and reset.isdigit():
            resource = headers.get("x-ratelimit-resource", "core")
            self.quotas[resource] = Quota(int(left), int(limit), float(reset))

    async def _pace(self) -> None:
        async with self._write_lock:
            wait = self._last_write + self._write_interval_s - self._clock()
            if wait > 0:
                await self._sleep(wait)
            self._last_write = self._clock()

    async def aclose(self) -> None:
        """Close the connection pool every client shares."""
        self._clients.clear()
        await self._pool.aclose()


class _Shared(httpx.AsyncBaseTransport):
    """One connection pool for every request: githubkit, used outside `async with`, makes
    and closes an httpx client per request, which would close a transport it owned (a new
    TCP and TLS connection per API call)."""

    def __init__(self, pool: httpx.AsyncBaseTransport) -> None:
        self.pool = pool

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send through the shared pool."""
        return await self.pool.handle_async_request(request)

    async def aclose(self) -> None:
        """Keep the pool open: GitHubApp.aclose closes it."""


async def _look(effect: Effect | None) -> Json | None:
    """What a write that failed may have made, if it names how to find it."""
    found = None if effect is None else await effect()
    if found is not None:
        log.warning("GitHub failed a write that took effect; using what it made")
    return found


def _failed(exc: RequestFailed) -> GitHubError:
    request = exc.response.raw_request
    message = ""
    try:
        body = exc.response.json()
        message = str(body.get("message", "")) if isinstance(body, dict) else ""
        errors = body.get("errors") if isinstance(body, dict) else None
        if isinstance(errors, list) and errors:
            message += ": " + "; ".join(str(e.get("message", e)) for e in errors if e)
    except ValueError:
        message = exc.response.text[:200]
    return GitHubError(
        f"GitHub {request.method} {request.url.path} answered "
        f"{exc.response.status_code}: {message}",
        status=exc.response.status_code,
    )


async def _pages(
    get: Callable[[Call], Awaitable[Json]],
    page: Callable[[int], Call],
    *,
    what: str,
    key: str | None = None,
) -> list[Json]:
    """Every item of a page-numbered listing (`key`: where a page's items are in its body)."""
    found: list[Json] = []
    for n in range(1, MAX_PAGES + 1):
        body = await get(page(n))
        batch = list((body or {}).get(key) or []) if key else list(body or [])
        found.extend(batch)
        if len(batch) < PER_PAGE:
            return found
    log.warning("listing %s stopped at %d pages (%d items)", what, MAX_PAGES, len(found))
    return found


def query_time(at: float) -> str:
    """A time (epoch seconds) as GitHub documents times in query parameters:
    `2026-11-27T23:30:59Z`, UTC, whole seconds rounded down (so nothing is missed)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(math.floor(at)))


class _QueryTime(datetime):
    """A datetime that goes into a query as `query_time` writes it.

    githubkit's typed calls take a datetime and hand it to httpx as it is, and httpx writes
    str(datetime) (`2026-11-27 23:30:59.507251+00:00`), a format GitHub does not document:
    a strict server answers 422.
    """

    def __str__(self) -> str:
        return query_time(self.timestamp())


def query_datetime(at: float) -> datetime:
    """`at` for a githubkit call's time parameter, written into the query by `query_time`."""
    return _QueryTime.fromtimestamp(math.floor(at), UTC)


def _since(stamp: float | None) -> dict[str, Any]:
    """githubkit's `since` argument: a time `query_time` writes, or nothing at all."""
    return {} if stamp is None else {"since": query_datetime(stamp)}


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def github_time(stamp: object) -> float:
    """A timestamp GitHub wrote (`2026-11-25T12:00:00Z`) in epoch seconds; 0 when unreadable."""
    try:
        return _epoch(str(stamp))
    except ValueError:
        return 0.0


class Installation:
    """The calls the bot makes as one installation."""

    def __init__(self, app: GitHubApp, gh: GitHub[Any], installation_id: int) -> None:
        self.app = app
        self.gh = gh
        self.installation_id = installation_id
        self.remaining: int | None = None  # requests left this hour, as GitHub last said

    async def _get(self, call: Call) -> Json:
        headers: dict[str, str] = {}
        body = await self.app.call(self.gh, call, headers=headers)
        if (left := headers.get("x-ratelimit-remaining", "")).isdigit():
            self.remaining = int(left)
        return body

    async def _write(self, call: Call, *, effect: Effect | None = None) -> Json:
        return await self.app.call(self.gh, call, write=True, effect=effect)

    async def permission(self, owner: str, repo: str, login: str) -> str:
        """`admin`, `write`, `read` or `none`: GitHub maps `maintain` to `write` (custom
        roles to their base), so write access is `admin` or `write`."""
        try:
            body = await self._get(
                lambda gh: gh.rest.repos.async_get_collaborator_permission_level(owner, repo, login)
            )
        except GitHubError as exc:
            if exc.status == 404:
                return "none"
            raise
        return str(body.get("permission") or "none")

    async def file(self, owner: str, repo: str, path: str, *, ref: str) -> str | None:
        """A file's text on `ref`, or None when it is not there."""
        try:
            body = await self._get(
                lambda gh: gh.rest.repos.async_get_content(owner, repo, path, ref=ref)
            )
        except GitHubError as exc:
            if exc.status == 404:
                return None
            raise
        if not isinstance(body, dict) or body.get("type") != "file":
            return None
        return base64.b64decode(str(body.get("content", ""))).decode("utf-8", "replace")

    async def react_eyes(self, owner: str, repo: str, number: int) -> None:
        """React 👀 to an issue (GitHub answers 200 for a reaction that exists: idempotent)."""
        await self.react(owner, repo, "eyes", number=number)

    async def react(
        self,
        owner: str,
        repo: str,
        content: Literal["eyes", "+1", "confused"],
        *,
        number: int | None = None,
        comment_id: int | None = None,
    ) -> None:
        """React to an issue or to one comment (200 for a reaction that exists: idempotent)."""
        if comment_id is not None:
            await self._write(
                lambda gh: gh.rest.reactions.async_create_for_issue_comment(
                    owner, repo, comment_id, content=content
                )
            )
        elif number is not None:
            await self._write(
                lambda gh: gh.rest.reactions.async_create_for_issue(
                    owner, repo, number, content=content
                )
            )
        else:
            raise ValueError("react to an issue (number) or a comment (comment_id)")

    async def comments(
        self, owner: str, repo: str, number: int, *, since: float | None = None
    ) -> list[Json]:
        """The comments on an issue (updated at or after `since`, if given), oldest first."""

        def page(n: int) -> Call:
            return lambda gh: gh.rest.issues.async_list_comments(
                owner, repo, number, per_page=PER_PAGE, page=n, **_since(since)
            )

        return await _pages(self._get, page, what=f"comments of {owner}/{repo}#{number}")

    async def repositories(self) -> list[Json]:
        """The repositories this installation may see (all pages)."""

        def page(n: int) -> Call:
            return lambda gh: gh.rest.apps.async_list_repos_accessible_to_installation(
                per_page=PER_PAGE, page=n
            )

        return await _pages(self._get, page, what="repositories", key="repositories")

    async def labelled_issues(self, owner: str, repo: str, label: str) -> list[Json]:
        """Open issues (and pull requests, as GitHub lists them) carrying `label`."""

        def page(n: int) -> Call:
            return lambda gh: gh.rest.issues.async_list_for_repo(
                owner, repo, state="open", labels=label, per_page=PER_PAGE, page=n
            )

        return await _pages(self._get, page, what=f"issues of {owner}/{repo}")

    async def issue_events(self, owner: str, repo: str, number: int) -> list[Json]:
        """An issue's events (labelled, closed, ...), oldest first."""

        def page(n: int) -> Call:
            return lambda gh: gh.rest.issues.async_list_events(
                owner, repo, number, per_page=PER_PAGE, page=n
            )

        return await _pages(self._get, page, what=f"events of {owner}/{repo}#{number}")

    async def comment(
        self, owner: str, repo: str, number: int, body: str, *, identity: Identity
    ) -> Json:
        """Post a new comment, once; the created comment.

        The body carries the App's marker, and a write that failed is looked for by it (and
        by `identity`, its author) before it is tried again.
        """
        found = _MARKER.search(body)
        if found is None:
            raise ValueError("a comment the App posts carries its hidden marker")
        wanted = found[0]

        async def effect() -> Json | None:
            return await self.find_comment(owner, repo, number, wanted, identity)

        return await self._write(
            lambda gh: gh.rest.issues.async_create_comment(owner, repo, number, body=body),
            effect=effect,
        )

    async def find_comment(
        self,
        owner: str,
        repo: str,
        number: int,
        wanted: str,
        identity: Identity,
        *,
        recorded: frozenset[str] = frozenset(),
    ) -> Json | None:
        """The App's comment on an issue that bears the marker `wanted`, or None.

        It is the App's when `identity` wrote it or its id is one the App recorded; a marker
        in anyone else's comment (planted, or quoted) does not make it the App's.
        """
        for comment in await self.comments(owner, repo, number):
            if wanted in str(comment.get("body")) and (
                str(comment.get("id")) in recorded or identity.wrote(comment)
            ):
                return comment
        return None

    async def edit_comment(self, owner: str, repo: str, comment_id: int, body: str) -> Json:
        """Replace a comment's body."""
        return await self._write(
            lambda gh: gh.rest.issues.async_update_comment(owner, repo, comment_id, body=body)
        )

    async def open_pulls(self, owner: str, repo: str, *, head: str) -> list[Json]:
        """Open pull requests from `head` (`owner:branch`)."""
        pulls = await self._get(
            lambda gh: gh.rest.pulls.async_list(owner, repo, state="open", head=head)
        )
        return list(pulls)

    async def create_pull(
        self,
        owner: str,
        repo: str,
        *,
        title: str,
        head: str,
        base: str,
        body: str,
        identity: Identity,
        draft: bool = False,
    ) -> Json:
        """Open a pull request (a draft with `draft`); after a failed attempt, the one
        `identity` opened from `head`."""

        async def effect() -> Json | None:
            return await self.find_pull(owner, repo, head, identity)

        return await self._write(
            lambda gh: gh.rest.pulls.async_create(
                owner,
                repo,
                title=title,
                head=head,
                base=base,
                body=body,
                draft=True if draft else UNSET,  # a plain pull request's request unchanged
            ),
            effect=effect,
        )

    async def find_pull(
        self, owner: str, repo: str, branch: str, identity: Identity
    ) -> Json | None:
        """The open pull request `identity` opened from `branch` of `owner/repo`, or None."""
        pulls = await self.open_pulls(owner, repo, head=f"{owner}:{branch}")
        return next((pull for pull in pulls if identity.opened(pull)), None)

    async def dispatch_workflow(self, owner: str, repo: str, workflow: str, *, ref: str) -> None:
        """Start a run of `workflow` (its file name) on `ref` (workflow_dispatch). Not
        looked for after a failure: a second continuation finds its jobs parked and is cheap."""
        await self._write(
            lambda gh: gh.rest.actions.async_create_workflow_dispatch(
                owner, repo, workflow, ref=ref
            )
        )

    async def update_pull(
        self, owner: str, repo: str, number: int, *, title: str, body: str
    ) -> Json:
        """Rewrite a pull request's title and body."""
        return await self._write(
            lambda gh: gh.rest.pulls.async_update(owner, repo, number, title=title, body=body)
        )

    async def issue(self, owner: str, repo: str, number: int) -> Json:
        """Issue (or pull request) `number` as GitHub has it now: `state`, `closed_at` and,
        while it is closed, `closed_by`."""
        return await self._get(lambda gh: gh.rest.issues.async_get(owner, repo, number))

    async def pull(self, owner: str, repo: str, number: int) -> Json:
        """Pull request `number` as GitHub has it now (`merged`, `state`, `draft`, ...)."""
        return await self._get(lambda gh: gh.rest.pulls.async_get(owner, repo, number))

    async def reopen_pull(self, owner: str, repo: str, number: int) -> Json:
        """Open a closed pull request again (GitHub refuses with 422 when it was merged or its
        head branch is gone)."""
        return await self._write(
            lambda gh: gh.rest.pulls.async_update(owner, repo, number, state="open")
        )

    async def close_pull(self, owner: str, repo: str, number: int, *, body: str) -> Json:
        """Close a pull request unmerged, its body rewritten (one PATCH: closing a closed
        one again changes nothing, so a retry after a 5xx is safe)."""
        return await self._write(
            lambda gh: gh.rest.pulls.async_update(owner, repo, number, state="closed", body=body)
        )

    async def branch_exists(self, owner: str, repo: str, branch: str) -> bool:
        """Whether `branch` is in the repository: GitHub answers 404 once it is deleted."""
        try:
            await self._get(lambda gh: gh.rest.repos.async_get_branch(owner, repo, branch))
        except GitHubError as exc:
            if exc.status == 404:
                return False
            raise
        return True
