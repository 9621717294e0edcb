"""The App's settings, read once from the environment in `main` and passed down."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bot.errors import SettingsError

DEFAULT_API_URL = "https://api.github.com"
DEFAULT_SERVER_URL = "https://github.com"
INSECURE_FLAG = "TEAPARTY_INSECURE_NO_SIGNATURE"


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
    progress_interval_s: float = 60.0  # the least time between edits for progress alone
    body_timeout_s: float = 10.0
    max_connections: int = 128  # about 0.55 MB each while a body streams in: RSS stays < 200 MB

    @classmethod
    def from_env(cls, environ: Mapping[str, str], *, home: Path | None = None) -> Settings:
        """Settings from the environment; a missing or unreadable value is named."""
        insecure = environ.get(INSECURE_FLAG, "") == "1"
        secret = environ.get("GITHUB_WEBHOOK_SECRET", "")
        if not secret and not insecure:
            raise SettingsError(
                f"GITHUB_WEBHOOK_SECRET is not set (set {INSECURE_FLAG}=1 to accept unsigned "
                "deliveries, for local development only)"
            )
        app_id = environ.get("GITHUB_APP_ID", "")
        if not app_id:
            raise SettingsError("GITHUB_APP_ID is not set")
        config = environ.get("TEAPARTY_CONFIG", "")
        return cls(
            app_id=app_id,
            private_key=_private_key(environ),
            webhook_secret=secret,
            home=home or Path(environ.get("TEAPARTY_HOME") or Path.home() / ".teaparty"),
            config_dir=Path(config) if config else None,
            api_url=environ.get("GITHUB_API_URL") or DEFAULT_API_URL,
            server_url=environ.get("GITHUB_SERVER_URL") or DEFAULT_SERVER_URL,
            allowed_bots=frozenset(
                login.strip()
                for login in environ.get("TEAPARTY_ALLOWED_BOTS", "").split(",")
                if login.strip()
            ),
            insecure_no_signature=insecure,
            write_interval_s=_seconds(environ, "TEAPARTY_GITHUB_WRITE_INTERVAL", 1.0),
            status_interval_s=_seconds(environ, "TEAPARTY_STATUS_INTERVAL", 10.0),
            progress_interval_s=_seconds(environ, "TEAPARTY_PROGRESS_INTERVAL", 60.0),
            body_timeout_s=_seconds(environ, "TEAPARTY_BODY_TIMEOUT", 10.0, low=0.1),
            max_connections=_count(environ, "TEAPARTY_MAX_CONNECTIONS", 128),
        )


def _seconds(environ: Mapping[str, str], name: str, default: float, *, low: float = 0.0) -> float:
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


def _count(environ: Mapping[str, str], name: str, default: int) -> int:
    text = environ.get(name, "")
    if not text:
        return default
    if not text.isdigit() or not 1 <= int(text) <= 100_000:
        raise SettingsError(f"{name}={text!r}: must be a whole number from 1 to 100000")
    return int(text)


def _private_key(environ: Mapping[str, str]) -> str:
    text = environ.get("GITHUB_APP_PRIVATE_KEY", "")
    path = environ.get("GITHUB_APP_PRIVATE_KEY_PATH", "")
    if not text and path:
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise SettingsError(
                f"GITHUB_APP_PRIVATE_KEY_PATH={path}: cannot read: {exc.strerror}"
            ) from None
    if not text:
        raise SettingsError("set GITHUB_APP_PRIVATE_KEY (PEM text) or GITHUB_APP_PRIVATE_KEY_PATH")
    text = text.replace("\\n", "\n")  # keys pasted into one-line env files keep literal \n
    if "PRIVATE KEY-----" not in text:
        source = "GITHUB_APP_PRIVATE_KEY_PATH" if path else "GITHUB_APP_PRIVATE_KEY"
        raise SettingsError(f"{source}: not a PEM private key (no 'PRIVATE KEY' header)")
    return text
