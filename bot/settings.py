"""The App's settings, read once from the environment in `main` and passed down."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bot.errors import SettingsError
from orchestrator.core.secrecy import setup_refusal

DEFAULT_API_URL = "https://api.github.com"
DEFAULT_SERVER_URL = "https://github.com"
CALLBACK_PATH = "/auth/callback"  # where GitHub's sign-in comes back to (bot/job_pages.py)
INSECURE_FLAG = "TEAPARTY_INSECURE_NO_SIGNATURE"
SETUP_SECRETS = "TEAPARTY_SETUP_SECRETS"
_USERINFO = re.compile(r"//[^/@]*@")
T = TypeVar("T")


@dataclass(frozen=True)
class Settings:
    """Everything `teaparty serve` needs to know; secrets never appear in repr."""

    app_id: str
    private_key: str = field(repr=False)
    webhook_secret: str = field(repr=False)
    home: Path
    config_dir: Path | None = None
    api_url: str = DEFAULT_API_URL
    server_url: str = DEFAULT_SERVER_URL
    allowed_bots: frozenset[str] = frozenset()
    insecure_no_signature: bool = False
    write_interval_s: float = 1.0
    status_interval_s: float = 10.0  # how often the App looks at its active jobs
    ci_start_s: float = 900.0  # a resting job's head with no CI this long is said to have none
    progress_interval_s: float = 60.0  # the least time between edits for progress alone
    body_timeout_s: float = 10.0
    max_connections: int = 128  # about 0.55 MB each while a body streams in: RSS stays < 200 MB
    max_connections_per_client: int = 16  # below max_connections: one address leaves room
    trusted_proxies: tuple[str, ...] = ()  # addresses or networks whose X-Forwarded-For is believed
    setup_secrets: tuple[str, ...] = ()  # variables a repository's setup may be given
    # The job pages (bot/server/pages.py): served at public_url, people signed in with the
    # App's OAuth client; off without a public URL.
    public_url: str | None = None
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    page_streams: int = 32  # live job pages open at once, beside the webhook's connections

    @classmethod
    def from_env(cls, environ: Mapping[str, str], *, home: Path | None = None) -> Settings:
        """Settings from the environment; SettingsError lists every unusable value at once."""
        check = _Checks(environ)
        insecure = check(_insecure, False)
        config = environ.get("TEAPARTY_CONFIG", "")
        settings = cls(
            app_id=check(_app_id, ""),
            private_key=check(_private_key, ""),
            webhook_secret=check(partial(_webhook_secret, insecure=insecure), ""),
            home=home or Path(environ.get("TEAPARTY_HOME") or Path.home() / ".teaparty"),
            config_dir=Path(config) if config else None,
            api_url=check(partial(_url, "GITHUB_API_URL", DEFAULT_API_URL), ""),
            server_url=check(partial(_url, "GITHUB_SERVER_URL", DEFAULT_SERVER_URL), ""),
            allowed_bots=frozenset(
                login.strip()
                for login in environ.get("TEAPARTY_ALLOWED_BOTS", "").split(",")
                if login.strip()
            ),
            insecure_no_signature=insecure,
            write_interval_s=check(partial(_seconds, "TEAPARTY_GITHUB_WRITE_INTERVAL", 1.0), 0.0),
            status_interval_s=check(partial(_seconds, "TEAPARTY_STATUS_INTERVAL", 10.0), 0.0),
            ci_start_s=check(partial(_seconds, "TEAPARTY_CI_START", 900.0), 0.0),
            progress_interval_s=check(partial(_seconds, "TEAPARTY_PROGRESS_INTERVAL", 60.0), 0.0),
            body_timeout_s=check(partial(_seconds, "TEAPARTY_BODY_TIMEOUT", 10.0, low=0.1), 0.0),
            max_connections=check(partial(_count, "TEAPARTY_MAX_CONNECTIONS", 128), 0),
            max_connections_per_client=check(_per_client, 0),
            trusted_proxies=check(_trusted_proxies, ()),
            setup_secrets=check(setup_secret_names, ()),
            public_url=check(_public_url, None),
            client_id=environ.get("GITHUB_CLIENT_ID") or None,
            client_secret=environ.get("GITHUB_CLIENT_SECRET") or None,
            page_streams=check(partial(_count, "TEAPARTY_PAGE_STREAMS", 32), 0),
        )
        if check.problems:
            raise SettingsError(*check.problems)
        return settings


class _Checks:
    """Runs each check on the environment, keeping every problem instead of stopping at one."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.problems: list[str] = []

    def __call__(self, check: Callable[[Mapping[str, str]], T], failed: T) -> T:
        try:
            return check(self.environ)
        except SettingsError as exc:
            self.problems.extend(exc.problems)
            return failed


def setup_secret_names(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The variables `TEAPARTY_SETUP_SECRETS` names (comma-separated) for a repository's
    setup step; SettingsError naming each the engine never gives one (its own credentials
    and settings, the model's key, a run's token). Only the operator names them: nothing a
    repository or its project file says adds one."""
    names = tuple(dict.fromkeys(name.strip() for name in environ.get(SETUP_SECRETS, "").split(",")))
    names = tuple(name for name in names if name)
    problems = [f"{SETUP_SECRETS}: {why}" for name in names if (why := setup_refusal(name))]
    if problems:
        raise SettingsError(*problems)
    return names


def _public_url(environ: Mapping[str, str]) -> str | None:
    """TEAPARTY_PUBLIC_URL: where people reach `teaparty serve` (the job pages, and GitHub's
    sign-in sends them back there); it needs the App's OAuth client to sign them in."""
    if not environ.get("TEAPARTY_PUBLIC_URL"):
        return None
    url = _url("TEAPARTY_PUBLIC_URL", "", environ).rstrip("/")
    missing = [n for n in ("GITHUB_CLIENT_ID", "GITHUB_CLIENT_SECRET") if not environ.get(n)]
    if missing:
        raise SettingsError(
            f"TEAPARTY_PUBLIC_URL is set but {' and '.join(missing)} not: job pages sign people "
            "in with the App's client id and secret (its settings page, 'Client secrets')"
        )
    return url


def _insecure(environ: Mapping[str, str]) -> bool:
    text = environ.get(INSECURE_FLAG, "")
    if text not in ("", "0", "1"):
        raise SettingsError(
            f"{INSECURE_FLAG}={text!r}: must be 1 (accept unsigned deliveries) or 0"
        )
    return text == "1"


def _webhook_secret(environ: Mapping[str, str], *, insecure: bool) -> str:
    secret = environ.get("GITHUB_WEBHOOK_SECRET", "")
    if not secret and not insecure:
        raise SettingsError(
            f"GITHUB_WEBHOOK_SECRET is not set (set {INSECURE_FLAG}=1 to accept unsigned "
            "deliveries, for local development only)"
        )
    return secret


def _app_id(environ: Mapping[str, str]) -> str:
    text = environ.get("GITHUB_APP_ID", "")
    if not text:
        raise SettingsError("GITHUB_APP_ID is not set")
    if not (text.isascii() and text.isdigit() and int(text) > 0):
        raise SettingsError(
            f"GITHUB_APP_ID={text!r}: not an App id (a number: 'App ID' on the App's settings page)"
        )
    return text


def _url(name: str, default: str, environ: Mapping[str, str]) -> str:
    """An http(s) URL with a host; GITHUB_SERVER_URL may also be file:///PATH (local remotes)."""
    text = environ.get(name) or default
    try:
        parts = urlsplit(text)
        _ = parts.port  # raises ValueError on a port that is not one
    except ValueError:
        parts = None
    if parts is not None and parts.scheme in ("http", "https") and parts.hostname:
        return text
    local = name == "GITHUB_SERVER_URL"
    if local and parts is not None and parts.scheme == "file" and parts.path.startswith("/"):
        return text
    shown = _USERINFO.sub("//…@", text)  # a password in a URL is a secret
    kinds = "an http(s) URL with a host, or file:///PATH" if local else "an http(s) URL with a host"
    raise SettingsError(f"{name}={shown!r}: not {kinds}")


def _seconds(name: str, default: float, environ: Mapping[str, str], *, low: float = 0.0) -> float:
    text = environ.get(name, "")
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise SettingsError(f"{name}={text!r}: not a number of seconds") from None
    if not low <= value <= 3600:
        raise SettingsError(f"{name}={text!r}: must be between {low:g} and 3600 seconds")
    return value


def _count(name: str, default: int, environ: Mapping[str, str]) -> int:
    text = environ.get(name, "")
    if not text:
        return default
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 100_000:
        raise SettingsError(f"{name}={text!r}: must be a whole number from 1 to 100000")
    return int(text)


def _per_client(environ: Mapping[str, str]) -> int:
    """TEAPARTY_MAX_CONNECTIONS_PER_CLIENT: below TEAPARTY_MAX_CONNECTIONS, so that one
    address always leaves room for the rest; 16 by default, or half the overall bound when
    that is lower."""
    name = "TEAPARTY_MAX_CONNECTIONS_PER_CLIENT"
    try:
        overall = _count("TEAPARTY_MAX_CONNECTIONS", 128, environ)
    except SettingsError:
        overall = 100_000  # reported on its own
    if overall < 2:
        raise SettingsError(
            f"TEAPARTY_MAX_CONNECTIONS={overall}: one client would hold every connection; "
            "at least 2 leave room for another"
        )
    if not environ.get(name, ""):
        return min(16, overall // 2)
    bound = _count(name, 16, environ)
    if bound >= overall:
        raise SettingsError(
            f"{name}={bound}: must be below TEAPARTY_MAX_CONNECTIONS ({overall}), or one "
            "address could hold every connection and keep GitHub's deliveries out"
        )
    return bound


def _trusted_proxies(environ: Mapping[str, str]) -> tuple[str, ...]:
    """TEAPARTY_TRUSTED_PROXIES: comma-separated addresses or networks (CIDR) of reverse
    proxies in front of the App; nothing is trusted unless named."""
    name = "TEAPARTY_TRUSTED_PROXIES"
    found = []
    for item in environ.get(name, "").split(","):
        if not (text := item.strip()):
            continue
        try:
            found.append(str(ipaddress.ip_network(text, strict=False)))
        except ValueError:
            raise SettingsError(
                f"{name}: {text!r} is not an IP address or network (a name is not trusted: "
                "give the proxy's address, e.g. 10.0.0.5 or 10.0.0.0/24)"
            ) from None
    return tuple(found)


def _private_key(environ: Mapping[str, str]) -> str:
    """The App's key as PEM text; a problem names the variable and never shows the key."""
    text = environ.get("GITHUB_APP_PRIVATE_KEY", "")
    path = environ.get("GITHUB_APP_PRIVATE_KEY_PATH", "")
    source = "GITHUB_APP_PRIVATE_KEY" if text else "GITHUB_APP_PRIVATE_KEY_PATH"
    if not text and path:
        try:
            text = Path(path).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not a text file"
            raise SettingsError(f"GITHUB_APP_PRIVATE_KEY_PATH={path}: cannot read: {why}") from None
        source = f"GITHUB_APP_PRIVATE_KEY_PATH={path}"
    if not text:
        raise SettingsError("set GITHUB_APP_PRIVATE_KEY (PEM text) or GITHUB_APP_PRIVATE_KEY_PATH")
    text = text.replace("\\n", "\n")  # keys pasted into one-line env files keep literal \n
    _check_rsa_key(text, source=source)
    return text


def _check_rsa_key(text: str, *, source: str) -> None:
    try:
        key = serialization.load_pem_private_key(text.encode(), password=None)
    except TypeError:  # cryptography: "Password was not given but private key is encrypted"
        raise SettingsError(
            f"{source}: the key is encrypted; give it as GitHub issued it (unencrypted)"
        ) from None
    except (ValueError, UnsupportedAlgorithm):  # the message could quote the key: not kept
        raise SettingsError(
            f"{source}: not a PEM private key that parses (truncated or damaged?)"
        ) from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise SettingsError(f"{source}: not an RSA private key (GitHub Apps sign with RSA)")
