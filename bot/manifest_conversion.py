"""`teaparty app-manifest --convert`: GitHub's one-time code traded for the App's settings.

Within an hour of the redirect, `POST {api}/app-manifests/{code}/conversions` (no auth)
answers 201 with the App's id, slug, pem, webhook_secret, client_id and client_secret; the
code works once. The key is written to a file only its owner can read; the rest is
printed as `.env` lines.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Final
from urllib.parse import quote

import httpx

from bot.errors import GitHubError
from bot.github.client import USER_AGENT
from bot.settings import DEFAULT_API_URL, DEFAULT_SERVER_URL

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
TIMEOUT_S = 10.0
HEADERS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
        "User-Agent": USER_AGENT,
    }
)

ORG_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?")  # GitHub's logins
_SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # the slug names the key file: no paths


@dataclass(frozen=True)
class RegisteredApp:
    """The App GitHub created from the manifest; the secrets never appear in repr."""

    app_id: int
    slug: str
    html_url: str
    pem: str = field(repr=False)
    webhook_secret: str | None = field(repr=False)
    org: str | None = None  # the owning organization; None when a person owns the App


def env_lines(app: RegisteredApp, *, key_path: Path | None) -> list[str]:
    """The `.env` lines `teaparty serve` needs; never the PEM itself."""
    lines = [f"GITHUB_APP_ID={app.app_id}"]
    if app.webhook_secret:
        lines.append(f"GITHUB_WEBHOOK_SECRET={shlex.quote(app.webhook_secret)}")
    else:  # the schema allows null; the server refuses to start without a secret
        lines.append("# GITHUB_WEBHOOK_SECRET: GitHub returned none; set one in the App's settings")
    if key_path is not None:
        lines.append(f"GITHUB_APP_PRIVATE_KEY_PATH={shlex.quote(str(key_path))}")
    return lines


def registered_app(body: object, *, url: str) -> RegisteredApp:
    """Read the conversion's 201 body; GitHubError if a field we need is missing."""
    if not isinstance(body, dict):
        raise GitHubError(f"POST {url}: the response is not a JSON object")
    app_id, slug, pem = body.get("id"), body.get("slug"), body.get("pem")
    html_url, webhook_secret = body.get("html_url"), body.get("webhook_secret")
    if not isinstance(app_id, int) or not isinstance(pem, str) or not isinstance(html_url, str):
        raise GitHubError(f"POST {url}: the response lacks id, pem or html_url")
    if not isinstance(slug, str) or not _SLUG.fullmatch(slug):
        raise GitHubError(f"POST {url}: unusable slug {slug!r}")
    secret = webhook_secret if isinstance(webhook_secret, str) else None
    org = _organization(body.get("owner"))
    return RegisteredApp(app_id, slug, html_url, pem=pem, webhook_secret=secret, org=org)


def app_settings_url(app: RegisteredApp, *, server_url: str) -> str:
    """The App's settings page, where its owner generates private keys and webhook secrets."""
    owner = f"/organizations/{app.org}" if app.org else ""
    return f"{server_url.rstrip('/')}{owner}/settings/apps/{app.slug}"


def convert_code(code: str, *, api_url: str) -> RegisteredApp:
    """Trade the redirect's one-time code for the new App; GitHubError on any failure."""
    url = f"{api_url.rstrip('/')}/app-manifests/{quote(code, safe='')}/conversions"
    try:
        response = httpx.post(url, headers=dict(HEADERS), timeout=TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise GitHubError(_one_line(f"POST {url}: {type(exc).__name__}: {exc}")) from None
    if not response.is_success:
        status = response.status_code
        why = _failure_reason(response)
        raise GitHubError(_one_line(f"POST {url}: {status} {why}"), status=status)
    try:
        body = response.json()
    except ValueError:
        raise GitHubError(f"POST {url}: the response is not JSON") from None
    return registered_app(body, url=url)


def write_key(path: Path, pem: str) -> None:
    """Create `path` readable by its owner only; FileExistsError if anything is there."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(pem)


def convert_command(code: str, *, key_file: Path | None, env: Mapping[str, str]) -> int:
    if not code.strip():
        return _fail("--convert: give the code from the redirect URL (?code=...)", EXIT_USAGE)
    if key_file is not None and key_file.exists():  # check before spending the one-time code
        return _fail(f"--key-file {key_file}: already exists; not overwriting it", EXIT_FAILED)
    try:
        app = convert_code(code.strip(), api_url=env.get("GITHUB_API_URL") or DEFAULT_API_URL)
    except GitHubError as exc:
        return _fail(str(exc), EXIT_FAILED)
    path = key_file or Path(f"{app.slug}.private-key.pem")
    try:
        write_key(path, app.pem)
    except OSError as exc:  # the code is spent: print what we have, say where a key comes from
        sys.stdout.write("".join(f"{line}\n" for line in env_lines(app, key_path=None)))
        exists = isinstance(exc, FileExistsError)
        problem = (
            "already exists; not overwriting it" if exists else f"cannot write: {exc.strerror}"
        )
        server_url = env.get("GITHUB_SERVER_URL") or DEFAULT_SERVER_URL
        settings = app_settings_url(app, server_url=server_url)
        return _fail(
            f"{path}: {problem}. The App {app.slug!r} exists but its key was not saved: "
            f"generate a new private key at {settings}",
            EXIT_FAILED,
        )
    sys.stdout.write("".join(f"{line}\n" for line in env_lines(app, key_path=path.absolute())))
    sys.stderr.write(
        f"Wrote the private key to {path} (mode 0600). Install the App: "
        f"{app.html_url}/installations/new\n"
    )
    return EXIT_OK


def _failure_reason(response: httpx.Response) -> str:
    if response.status_code == 404:
        return "Not Found: the code is wrong, already used, or older than an hour"
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        errors = body.get("errors")
        details = [str(error) for error in errors] if isinstance(errors, list) else []
        return "; ".join([f"{response.reason_phrase}: {body['message']}", *details])
    return response.reason_phrase


def _organization(owner: object) -> str | None:
    if not isinstance(owner, dict) or owner.get("type") != "Organization":
        return None
    login = owner.get("login")
    return login if isinstance(login, str) and ORG_LOGIN.fullmatch(login) else None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _fail(message: str, status: int) -> int:
    sys.stderr.write(f"teaparty app-manifest: {message}\n")
    return status
