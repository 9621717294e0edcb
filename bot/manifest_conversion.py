"""`teaparty app-manifest --convert`: GitHub's one-time code traded for the App's settings.

Within an hour of the redirect, `POST {api}/app-manifests/{code}/conversions` (no auth)
answers 201 with the App's id, slug, pem, webhook_secret, client_id and client_secret; the
code works once. The key is written to a file only its owner can read; the rest (the client
id and secret too: `teaparty serve` signs people in to the job page with them) is printed as
`.env` lines.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import tempfile
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
    client_id: str | None = None  # the App's OAuth client: signing in to the job page
    client_secret: str | None = field(default=None, repr=False)


def env_lines(app: RegisteredApp, *, key_path: Path | None) -> list[str]:
    """The `.env` lines `teaparty serve` needs; never the PEM itself."""
    lines = [f"GITHUB_APP_ID={app.app_id}"]
    if app.webhook_secret:
        lines.append(f"GITHUB_WEBHOOK_SECRET={shlex.quote(app.webhook_secret)}")
    else:  # the schema allows null; the server refuses to start without a secret
        lines.append("# GITHUB_WEBHOOK_SECRET: GitHub returned none; set one in the App's settings")
    if key_path is not None:
        lines.append(f"GITHUB_APP_PRIVATE_KEY_PATH={shlex.quote(str(key_path))}")
    if app.client_id and app.client_secret:
        lines.append(f"GITHUB_CLIENT_ID={shlex.quote(app.client_id)}")
        lines.append(f"GITHUB_CLIENT_SECRET={shlex.quote(app.client_secret)}")
    else:
        lines.append(
            "# GITHUB_CLIENT_ID, GITHUB_CLIENT_SECRET: GitHub returned none; generate a client"
            " secret in the App's settings for signing in to job pages"
        )
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
    client_id, client_secret = body.get("client_id"), body.get("client_secret")
    return RegisteredApp(
        app_id,
        slug,
        html_url,
        pem=pem,
        webhook_secret=secret,
        org=org,
        client_id=client_id if isinstance(client_id, str) and client_id else None,
        client_secret=client_secret if isinstance(client_secret, str) and client_secret else None,
    )


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


@dataclass
class KeySlot:
    """The file the App's key goes into, created empty (mode 0600) before the one-time code is
    spent: a path that exists or cannot be written is found while the code still works.

    Without --key-file the key's name, `{slug}.private-key.pem`, is known only once the code
    is converted; until then the slot has a temporary name in the current directory, and is
    linked to that name when the key is in it (a link never replaces a file).
    """

    path: Path
    fd: int
    named: bool  # whether `path` is the key's own name
    open: bool = True

    @classmethod
    def take(cls, key_file: Path | None) -> KeySlot:
        """The slot at `key_file`, or a temporary one here; OSError if it cannot be had
        (FileExistsError: something is at `key_file`)."""
        if key_file is not None:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL  # O_EXCL: not through a symlink either
            return cls(key_file, os.open(key_file, flags, 0o600), named=True)
        fd, name = tempfile.mkstemp(prefix="new-app-", suffix=".private-key.pem", dir=".")
        return cls(Path(os.path.basename(name)), fd, named=False)  # mkstemp: O_EXCL, 0600

    def fill(self, pem: str, *, name: Path) -> Path:
        """Write the key and return where it is: `name`, unless something is there already."""
        self.open = False
        with os.fdopen(self.fd, "w", encoding="utf-8") as file:
            file.write(pem)
            file.flush()
            os.fsync(file.fileno())
        if self.named:
            return self.path
        try:
            os.link(self.path, name)
        except OSError:  # FileExistsError, or a file system without hard links: keep ours
            return self.path
        self.path.unlink()
        return name

    def discard(self) -> None:
        """Remove the slot: no key came to fill it."""
        if self.open:
            os.close(self.fd)
            self.open = False
        self.path.unlink(missing_ok=True)


def convert_command(code: str, *, key_file: Path | None, env: Mapping[str, str]) -> int:
    """Take the key's place, trade the code for the App, write its key, print its settings."""
    if not code.strip():
        return _fail("--convert: give the code from the redirect URL (?code=...)", EXIT_USAGE)
    try:
        slot = KeySlot.take(key_file)
    except OSError as exc:  # the code is not spent yet: nothing is lost
        return _fail(_unwritable(key_file, exc), EXIT_FAILED)
    converted = False
    try:
        app = convert_code(code.strip(), api_url=env.get("GITHUB_API_URL") or DEFAULT_API_URL)
        converted = True
    except GitHubError as exc:
        return _fail(str(exc), EXIT_FAILED)
    finally:
        if not converted:  # (Ctrl-C too) no key is coming: leave no empty file behind
            slot.discard()
    wanted = key_file or Path(f"{app.slug}.private-key.pem")
    try:
        path = slot.fill(app.pem, name=wanted)
    except OSError as exc:  # the code is spent: print what we have, say where a key comes from
        slot.discard()
        return _key_lost(app, wanted, exc, env=env)
    sys.stdout.write("".join(f"{line}\n" for line in env_lines(app, key_path=path.absolute())))
    if path != wanted:
        sys.stderr.write(f"{wanted}: already exists; not overwriting it. The new key is {path}.\n")
    sys.stderr.write(
        f"Wrote the private key to {path} (mode 0600). Install the App: "
        f"{app.html_url}/installations/new\n"
    )
    if app.webhook_secret or app.client_secret:
        sys.stderr.write(
            "The .env lines hold the App's secrets: keep their file private (`chmod 600 .env`).\n"
        )
    return EXIT_OK


def _unwritable(key_file: Path | None, exc: OSError) -> str:
    if key_file is None:
        return (
            f"cannot write the private key in {_here()}: {exc.strerror} "
            "(give --key-file PATH elsewhere); the code is not spent"
        )
    if isinstance(exc, FileExistsError):
        return f"--key-file {key_file}: already exists; not overwriting it"
    return f"--key-file {key_file}: cannot write: {exc.strerror}; the code is not spent"


def _here() -> str:
    try:
        return str(Path.cwd())
    except OSError:  # the directory was removed while we were in it
        return "the current directory"


def _key_lost(app: RegisteredApp, path: Path, exc: OSError, *, env: Mapping[str, str]) -> int:
    sys.stdout.write("".join(f"{line}\n" for line in env_lines(app, key_path=None)))
    settings = app_settings_url(app, server_url=env.get("GITHUB_SERVER_URL") or DEFAULT_SERVER_URL)
    return _fail(
        f"{path}: cannot write: {exc.strerror}. The App {app.slug!r} exists but its key was "
        f"not saved: generate a new private key at {settings}",
        EXIT_FAILED,
    )


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
