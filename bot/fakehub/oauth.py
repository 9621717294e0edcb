"""The App's user authorization on the local GitHub stand-in: the OAuth web flow.

As GitHub documents it ("Generating a user access token for a GitHub App", "Authorizing OAuth
apps"): `GET /login/oauth/authorize` sends the browser back to a registered callback URL with a
one-time `code` and the caller's `state`; `POST /login/oauth/access_token` trades the code (with
the App's client id and secret) for a user access token (`ghu_`, eight hours), answered as JSON
when the caller accepts it and as a form otherwise, its errors (`bad_verification_code`,
`incorrect_client_credentials`, `redirect_uri_mismatch`) with status 200 as GitHub answers them.
A code lives ten minutes and is used once.

Who is signed in to "GitHub" in the browser is `OAuthDesk.signed_in`, a login the test sets
(GitHub would show its own sign-in page first: the stand-in answers 401 while nobody is).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from bot.fakehub.shapes import Json, Urls, timestamp, user_json
from bot.fakehub.state import HubError, HubState, User

AUTHORIZE_PATH = "/login/oauth/authorize"
ACCESS_TOKEN_PATH = "/login/oauth/access_token"
USER_TOKEN_PREFIX = "ghu_"
# What a user access token may call on the stand-in: who it is, and a repository with the
# user's permissions on it (what the job page asks).
USER_OPERATIONS = frozenset({"users/get-authenticated", "repos/get"})
CODE_LIFETIME = 600  # GitHub: "The code expires after 10 minutes"
USER_TOKEN_LIFETIME = 8 * 3600  # a GitHub App's user access token: eight hours
REFRESH_LIFETIME = 15_897_600  # six months, as GitHub says in `refresh_token_expires_in`
_TROUBLE = (
    "https://docs.github.com/apps/managing-oauth-apps/"
    "troubleshooting-oauth-app-access-token-request-errors/"
)
ERRORS = {
    "incorrect_client_credentials": "The client_id and/or client_secret passed are incorrect.",
    "redirect_uri_mismatch": "The redirect_uri MUST match the registered callback URL for this"
    " application.",
    "bad_verification_code": "The code passed is incorrect or expired.",
}


@dataclass(frozen=True)
class UserToken:
    """A user access token the stand-in issued: whose it is and until when."""

    token: str = field(repr=False)
    login: str
    expires_at: float


@dataclass(frozen=True)
class _Grant:
    login: str
    client_id: str
    redirect_uri: str
    expires_at: float


class OAuthDesk:
    """The web flow's two endpoints and the user tokens they issued."""

    def __init__(
        self, state: HubState, *, client_secret: str, callback_urls: tuple[str, ...] = ()
    ) -> None:
        self.state = state
        self.client_secret = client_secret
        self.callback_urls = list(callback_urls)  # the App's registered callback URLs
        self.signed_in: str | None = None  # who the browser is signed in to GitHub as
        self._codes: dict[str, _Grant] = {}
        self._tokens: dict[str, UserToken] = {}

    async def authorize(self, request: Request) -> Response:
        """GET /login/oauth/authorize: back to the callback with a code and the state."""
        query = request.query_params
        if query.get("client_id") != self.state.client_id:
            return PlainTextResponse("Not Found", status_code=404)
        redirect = query.get("redirect_uri") or (self.callback_urls or [""])[0]
        registered = self.callback_urls[0] if self.callback_urls else ""
        if not registered:
            return PlainTextResponse("The App has no callback URL", status_code=400)
        extra = {"state": query["state"]} if "state" in query else {}
        if redirect not in self.callback_urls:
            error = {
                "error": "redirect_uri_mismatch",
                "error_description": ERRORS["redirect_uri_mismatch"],
                "error_uri": "https://docs.github.com/apps/managing-oauth-apps/"
                "troubleshooting-authorization-request-errors/#redirect-uri-mismatch",
            }
            return RedirectResponse(_with(registered, error | extra), status_code=302)
        if self.signed_in is None:
            return PlainTextResponse("Sign in to GitHub to continue", status_code=401)
        user = self.state.user(self.signed_in)
        code = secrets.token_hex(10)
        with self.state.lock:
            self._codes[code] = _Grant(
                user.login, self.state.client_id, redirect, self.state.clock() + CODE_LIFETIME
            )
        return RedirectResponse(_with(redirect, {"code": code} | extra), status_code=302)

    async def access_token(self, request: Request) -> Response:
        """POST /login/oauth/access_token: a user access token for a code, once."""
        raw = await request.body()
        kind = request.headers.get("content-type", "")
        given: Mapping[str, str] = (
            {k: str(v) for k, v in json.loads(raw or b"{}").items()}
            if kind.startswith("application/json")
            else dict(parse_qsl(raw.decode(), keep_blank_values=True))
        ) | dict(request.query_params)
        answer = self.exchange(given)
        if "application/json" in request.headers.get("accept", ""):
            return Response(json.dumps(answer), media_type="application/json; charset=utf-8")
        return Response(
            urlencode({k: str(v) for k, v in answer.items()}),
            media_type="application/x-www-form-urlencoded; charset=utf-8",
        )

    def exchange(self, given: Mapping[str, str]) -> dict[str, object]:
        """What GitHub answers for these form fields: a token, or an error (status 200)."""
        id_ok = given.get("client_id") == self.state.client_id
        if not (
            id_ok and secrets.compare_digest(given.get("client_secret", ""), self.client_secret)
        ):
            return _error("incorrect_client_credentials")
        with self.state.lock:
            grant = self._codes.pop(given.get("code", ""), None)
            now = self.state.clock()
            if grant is None or grant.expires_at <= now:
                return _error("bad_verification_code")
            if given.get("redirect_uri", grant.redirect_uri) != grant.redirect_uri:
                return _error("redirect_uri_mismatch")
            token = UserToken(
                "ghu_" + secrets.token_hex(18), grant.login, now + USER_TOKEN_LIFETIME
            )
            self._tokens[token.token] = token
        return {
            "access_token": token.token,
            "expires_in": USER_TOKEN_LIFETIME,
            "refresh_token": "ghr_" + secrets.token_hex(36),
            "refresh_token_expires_in": REFRESH_LIFETIME,
            "scope": "",
            "token_type": "bearer",
        }

    def caller(self, operation_id: str, *, kind: str, value: str) -> str | None:
        """The login a user access token acts for (None: not a user token), or 401 / 403:
        the stand-in serves user tokens on USER_OPERATIONS only."""
        if kind != "token" or not value.startswith(USER_TOKEN_PREFIX):
            return None
        user = self.user_of(value)
        if user is None:
            raise HubError(401, "Bad credentials")
        if operation_id not in USER_OPERATIONS:
            raise HubError(403, "Resource not accessible by integration")
        return user.login

    @property
    def issued(self) -> list[str]:
        """Every user access token issued so far."""
        with self.state.lock:
            return list(self._tokens)

    def user_of(self, token: str) -> User | None:
        """The account a live user access token acts for (None: unknown or expired)."""
        with self.state.lock:
            found = self._tokens.get(token)
            if found is None or found.expires_at <= self.state.clock():
                return None
            return self.state.user(found.login)


def public_user_json(user: User, urls: Urls) -> Json:
    """A `public-user` (what `GET /user` answers): a simple user and its profile."""
    profile = dict.fromkeys(["name", "company", "blog", "location", "email", "hireable", "bio"])
    when = timestamp(0)
    counts = dict.fromkeys(["public_repos", "public_gists", "followers", "following"], 0)
    return user_json(user, urls) | profile | counts | {"created_at": when, "updated_at": when}


_RANKS = ("read", "triage", "write", "maintain", "admin")


def user_permissions(role: str) -> Json:
    """A repository's `permissions` for a user of `role` (read < triage < write < maintain <
    admin; none: no permission)."""
    rank = _RANKS.index(role) if role in _RANKS else -1
    names = ("pull", "triage", "push", "maintain", "admin")
    return {name: rank >= at for at, name in enumerate(names)}


def _error(name: str) -> dict[str, object]:
    return {
        "error": name,
        "error_description": ERRORS[name],
        "error_uri": _TROUBLE + "#" + name.replace("_", "-"),
    }


def _with(url: str, params: Mapping[str, str]) -> str:
    parts = urlsplit(url)
    query = "&".join(q for q in (parts.query, urlencode(params)) if q)
    return urlunsplit(parts._replace(query=query))
