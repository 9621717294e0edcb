"""The App acting for a person who signs in to the job pages: GitHub's OAuth web flow, and
what that person's user token may see.

A role is asked with the person's own token (`GET /repos/{owner}/{repo}` answers with their
`permissions`; a repository they cannot see is 404), so the page shows no more than GitHub
would. The sign-in's web pages are on GITHUB_SERVER_URL (github.com, or a GitHub Enterprise
host); with local `file://` remotes (the bundled stand-in) they are on GITHUB_API_URL's host.
"""

from __future__ import annotations

import logging
from typing import Literal
from urllib.parse import urlencode

import httpx

from bot.errors import GitHubError
from bot.github.client import USER_AGENT

Role = Literal["none", "read", "triage", "write", "maintain", "admin"]
ROLES: tuple[Role, ...] = ("none", "read", "triage", "write", "maintain", "admin")
_FLAGS: tuple[tuple[str, Role], ...] = (
    ("admin", "admin"),
    ("maintain", "maintain"),
    ("push", "write"),
    ("triage", "triage"),
    ("pull", "read"),
)
TIMEOUT_S = 10.0

log = logging.getLogger(__name__)


class SignInError(GitHubError):
    """GitHub did not trade the sign-in's code for a token; the message says why."""


class GitHubUsers:
    """The App's OAuth client and the calls it makes with a person's token."""

    def __init__(
        self,
        *,
        server_url: str,
        api_url: str,
        client_id: str,
        client_secret: str,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        web = server_url if server_url.startswith(("http://", "https://")) else api_url
        self.web_url = web.rstrip("/")
        self.api_url = api_url.rstrip("/")
        self.client_id = client_id
        self._secret = client_secret
        self._http = httpx.AsyncClient(
            transport=transport,
            timeout=TIMEOUT_S,
            headers={"User-Agent": USER_AGENT, "X-GitHub-Api-Version": "2022-11-28"},
        )

    def authorize_url(self, *, state: str, redirect_uri: str) -> str:
        """Where the browser goes to sign in (GitHub comes back to `redirect_uri`)."""
        query = {"client_id": self.client_id, "redirect_uri": redirect_uri, "state": state}
        return f"{self.web_url}/login/oauth/authorize?{urlencode(query)}"

    async def exchange(self, code: str, *, redirect_uri: str) -> str:
        """The user token for a sign-in's `code`; SignInError when GitHub refuses it."""
        form = {
            "client_id": self.client_id,
            "client_secret": self._secret,
            "code": code,
            "redirect_uri": redirect_uri,
        }
        url = f"{self.web_url}/login/oauth/access_token"
        try:
            answer = await self._http.post(url, data=form, headers={"Accept": "application/json"})
            body = answer.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise SignInError(f"POST {url}: {type(exc).__name__}") from None
        token = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token:
            error = body.get("error") if isinstance(body, dict) else None
            raise SignInError(f"GitHub refused the sign-in: {error or answer.status_code}")
        return token

    async def login(self, token: str) -> str:
        """The login `token` acts for."""
        body = await self._get("/user", token)
        login = body.get("login") if body is not None else None
        if not isinstance(login, str):
            raise GitHubError("GET /user: no login in the answer")
        return login

    async def role(self, token: str, repository: str) -> Role:
        """What the token's person may do in `repository` (owner/name): `none` when GitHub
        does not show it to them."""
        body = await self._get(f"/repos/{repository}", token)
        flags = body.get("permissions") if body is not None else None
        if not isinstance(flags, dict):
            return "none"
        return next((role for flag, role in _FLAGS if flags.get(flag) is True), "none")

    async def _get(self, path: str, token: str) -> dict[str, object] | None:
        """GitHub's JSON object at `path`; None on 401, 403 or 404 (not theirs to see)."""
        url = self.api_url + path
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json"}
        try:
            answer = await self._http.get(url, headers=headers)
        except httpx.HTTPError as exc:
            raise GitHubError(f"GET {path}: {type(exc).__name__}") from None
        if answer.status_code in (401, 403, 404):
            return None
        if not answer.is_success:
            raise GitHubError(f"GET {path}: {answer.status_code}", status=answer.status_code)
        try:
            body = answer.json()
        except ValueError:
            raise GitHubError(
                f"GET {path}: {answer.status_code} with a body that is no JSON"
            ) from None
        return body if isinstance(body, dict) else None

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._http.aclose()
