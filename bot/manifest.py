"""`teaparty app-manifest`: the App's manifest, a page that registers it, and the code exchange
(bot/manifest_conversion.py).

GitHub's manifest flow ("Registering a GitHub App from a manifest"): a browser POSTs the
manifest JSON as the form field `manifest` to {server}/settings/apps/new (or
{server}/organizations/ORG/settings/apps/new), with `?state=` on that URL; after the person
confirms, GitHub redirects to the manifest's `redirect_url` with `?code=` (and the state).
Within an hour, `POST {api}/app-manifests/{code}/conversions` (no auth) answers 201 with the
App's id, slug, pem, webhook_secret, client_id and client_secret; the code works once.
"""

from __future__ import annotations

import argparse
import html
import json
import secrets
import sys
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Final
from urllib.parse import SplitResult, quote, urlsplit, urlunsplit

from bot.errors import BotError
from bot.manifest_conversion import ORG_LOGIN, convert_command
from bot.settings import CALLBACK_PATH, DEFAULT_SERVER_URL

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_NAME = "TeaParty"
DEFAULT_HOMEPAGE = "https://github.com"
MAX_NAME_CHARS = 34  # GitHub refuses longer App names
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1"})  # plain http is accepted only for these
# What the bot does today needs these and nothing more (an installer sees and grants each one).
DEFAULT_PERMISSIONS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "issues": "write",  # comment on issues, react to commands, set labels
        "pull_requests": "write",  # open and update the job's pull request
        "contents": "write",  # push job branches; read .teaparty/project.yaml
        "metadata": "read",  # mandatory for every App; collaborator permission checks
        # CI on a job's pull request (bot/handlers/ci.py): read suites, runs and annotations,
        # and rerequest another app's failed check run once to tell a flaky one apart; the
        # job's own `TeaParty` check run with its summary (bot/github/job_check.py).
        "checks": "write",
        # Actions on it: read a failed job's log (GET .../actions/jobs/{id}/logs), and re-run
        # a failed job once (POST .../actions/jobs/{id}/rerun needs write; write covers read).
        "actions": "write",
    }
)
# The deliveries bot.handlers.payloads acts on; installation events reach every App unasked.
DEFAULT_EVENTS: Final[tuple[str, ...]] = (
    "issues",  # labeled: a label hands an issue to the bot; closed, unlabeled: withdrawn
    "issue_comment",  # issue_comment.created: commands written in comments
    "pull_request",  # the job's pull request merged, closed, made a draft, ready, reopened
    "pull_request_review",  # a review of the job's pull request: a review round
    "pull_request_review_comment",  # its inline comments, part of their review's round
    "check_suite",  # a completed check suite on the job's pull request: CI rounds
)


class ManifestError(BotError):
    """An option cannot make a usable manifest or form; the message names the option."""


def build_manifest(
    *,
    webhook_url: str,
    name: str = DEFAULT_NAME,
    homepage: str = DEFAULT_HOMEPAGE,
    public: bool = False,
    redirect_url: str | None = None,
) -> dict[str, object]:
    """The manifest GitHub registers the App from; ManifestError names a bad option."""
    if not name.strip():
        raise ManifestError("--name: must not be empty")
    if len(name) > MAX_NAME_CHARS:
        raise ManifestError(
            f"--name {name!r} is {len(name)} characters; GitHub allows at most {MAX_NAME_CHARS}"
        )
    _check_webhook_url(webhook_url)
    _check_http_url("--url", homepage)
    manifest: dict[str, object] = {
        "name": name,
        "url": homepage,
        "hook_attributes": {"url": webhook_url, "active": True},
        "callback_urls": [callback_url(webhook_url)],
        "public": public,
        "default_permissions": dict(DEFAULT_PERMISSIONS),
        "default_events": list(DEFAULT_EVENTS),
    }
    if redirect_url is not None:
        _check_http_url("--redirect-url", redirect_url)
        manifest["redirect_url"] = redirect_url
    return manifest


def callback_url(webhook_url: str) -> str:
    """Where GitHub sends a person back after signing in to the job page: beside the webhook
    (`.../webhook` becomes `.../auth/callback`), on the server's public URL."""
    parts = urlsplit(webhook_url)
    path = parts.path.removesuffix("/webhook") + CALLBACK_PATH
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def form_action(server_url: str, *, org: str | None, state: str) -> str:
    """Where the registration form POSTs: the account's or `org`'s new-App page, with `state`."""
    _check_http_url("GITHUB_SERVER_URL", server_url)
    owner = ""
    if org is not None:
        if not ORG_LOGIN.fullmatch(org):
            raise ManifestError(f"--org {org!r}: not a GitHub organization login")
        owner = f"/organizations/{org}"
    return f"{server_url.rstrip('/')}{owner}/settings/apps/new?state={quote(state, safe='')}"


def form_html(manifest: Mapping[str, object], *, action: str) -> str:
    """A self-contained page whose button POSTs `manifest` as the `manifest` field to `action`."""
    name = html.escape(str(manifest.get("name", "")))
    field_value = html.escape(json.dumps(manifest, separators=(",", ":")), quote=True)
    shown = html.escape(json.dumps(manifest, indent=2))
    return f"""<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Register {name} on GitHub</title></head>
<body>
<h1>Register the {name} GitHub App</h1>
<p>The button sends the manifest below to GitHub, which shows what the App may do and asks
you to confirm. GitHub then redirects with <code>?code=…</code> in the address: within an hour,
run <code>teaparty app-manifest --convert CODE</code> with that code.</p>
<form action="{html.escape(action, quote=True)}" method="post">
<input type="hidden" name="manifest" value="{field_value}">
<button type="submit">Register {name} on GitHub</button>
</form>
<details><summary>Manifest</summary><pre>{shown}</pre></details>
</body>
</html>
"""


def app_manifest_command(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """Print the manifest (and write its page), or turn a code into the server's settings."""
    if stray := _stray_option(args):
        return _fail(stray, EXIT_USAGE)
    if args.convert is not None:
        return convert_command(args.convert, key_file=args.key_file, env=env)
    try:
        manifest = build_manifest(
            webhook_url=args.webhook_url,
            name=DEFAULT_NAME if args.name is None else args.name,
            homepage=args.url or DEFAULT_HOMEPAGE,
            public=args.public,
            redirect_url=args.redirect_url,
        )
    except ManifestError as exc:
        return _fail(str(exc), EXIT_USAGE)
    if args.html is not None:
        server_url = env.get("GITHUB_SERVER_URL") or DEFAULT_SERVER_URL
        if status := _write_page(args.html, manifest, server_url=server_url, org=args.org):
            return status
    sys.stdout.write(json.dumps(manifest, indent=2) + "\n")
    return EXIT_OK


def _write_page(
    path: Path, manifest: Mapping[str, object], *, server_url: str, org: str | None
) -> int:
    state = secrets.token_urlsafe(16)
    try:
        action = form_action(server_url, org=org, state=state)
    except ManifestError as exc:
        return _fail(str(exc), EXIT_USAGE)
    try:
        path.write_text(form_html(manifest, action=action), encoding="utf-8")
    except OSError as exc:
        return _fail(f"--html {path}: cannot write: {exc.strerror}", EXIT_FAILED)
    sys.stderr.write(
        f"Open {path} in a browser and click the button, then run "
        "`teaparty app-manifest --convert CODE` with the code from the redirect "
        f"(its state should be {state}).\n"
    )
    return EXIT_OK


def _stray_option(args: argparse.Namespace) -> str | None:
    """An option given where it has no effect, named, so that nothing is silently ignored."""
    if args.convert is not None:
        for option in ("name", "url", "public", "redirect_url", "html", "org"):
            if getattr(args, option) not in (None, False):
                return f"--{option.replace('_', '-')} does not apply to --convert"
        return None
    if args.key_file is not None:
        return "--key-file only applies to --convert"
    if args.org is not None and args.html is None:
        return "--org only applies to --html (it picks where the page registers the App)"
    return None


def _check_webhook_url(url: str) -> None:
    parts = _split("--webhook-url", url)
    local = parts.scheme == "http" and parts.hostname in LOCAL_HOSTS
    if parts.scheme != "https" and not local:
        raise ManifestError(
            f"--webhook-url {url!r}: must be https (plain http only for localhost or 127.0.0.1)"
        )
    if not parts.hostname:
        raise ManifestError(f"--webhook-url {url!r}: has no host")
    if not parts.path.endswith("/webhook"):
        raise ManifestError(
            f"--webhook-url {url!r}: must end in /webhook, the path `teaparty serve` listens on"
        )


def _check_http_url(option: str, url: str) -> None:
    parts = _split(option, url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ManifestError(f"{option} {url!r}: not a full http(s) URL")


def _split(option: str, url: str) -> SplitResult:
    try:
        return urlsplit(url)
    except ValueError as exc:  # e.g. an unclosed IPv6 bracket
        raise ManifestError(f"{option} {url!r}: {exc}") from None


def _fail(message: str, status: int) -> int:
    sys.stderr.write(f"teaparty app-manifest: {message}\n")
    return status
