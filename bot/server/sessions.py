"""Who is signed in to the job pages: sealed, expiring cookies and the keys that seal them.

A session is a cookie sealed with Fernet (AES-128-CBC and an HMAC-SHA256 over it and its
time): nobody can read the user's GitHub token in it or forge one, and it is refused
SESSION_TTL after it was sealed. A sign-in carries its OAuth `state` in a cookie of the same
kind (SIGNIN_TTL), so the state is bound to the browser that began it, and each state is
taken once.

The keys live in `{TEAPARTY_HOME}/session-keys` (0600), one `created-at key` a line, newest
first, made at the first start. The newest seals; every key in the file opens. When the
newest is older than ROTATE_S, the next start retires it by a new one put in front; a retired
key stays for SESSION_TTL more (what it sealed expires meanwhile), then goes. Deleting the
file signs everyone out.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from bot.errors import SettingsError

SESSION_COOKIE = "teaparty_session"
SIGNIN_COOKIE = "teaparty_signin"
SESSION_TTL = 8 * 3600  # as long as GitHub's user token it carries
SIGNIN_TTL = 600  # as long as GitHub's code
ROTATE_S = 7 * 86400
KEY_FILE = "session-keys"


def load_keys(home: Path, *, now: float) -> MultiFernet:
    """The session keys of `home`, rotated when the newest is older than ROTATE_S; a key is
    dropped SESSION_TTL after the one that retired it was made."""
    path = home / KEY_FILE
    found: list[tuple[float, str]] = []
    if path.exists():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            found.append(_key_line(path, number, line))
    kept = list(found)
    if not kept or now - kept[0][0] >= ROTATE_S:
        kept.insert(0, (now, Fernet.generate_key().decode()))
    kept = kept[:1] + [
        key
        for successor, key in zip(kept, kept[1:], strict=False)
        if now - successor[0] < SESSION_TTL
    ]
    if kept != found:
        _write(path, "".join(f"{made:.0f} {key}\n" for made, key in kept))
    return MultiFernet([Fernet(key.encode()) for _, key in kept])


def _key_line(path: Path, number: int, line: str) -> tuple[float, str]:
    """One `created-at key` line of the key file; SettingsError naming the file and line."""
    made, _, key = line.partition(" ")
    try:
        Fernet(key.encode())
        return float(made), key
    except ValueError:
        raise SettingsError(
            f"{path}:{number}: not a session key line (`created-at key`, as the server "
            "writes them): fix the line, or delete the file to sign everyone out"
        ) from None


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(text)
    os.replace(fresh, path)


@dataclass(frozen=True)
class Session:
    """A signed-in person: their login and their user token (never shown)."""

    login: str
    token: str = field(repr=False)


class Sessions:
    """Seals and opens session and sign-in cookies; takes each sign-in state once."""

    def __init__(self, keys: MultiFernet, *, clock: Callable[[], float] = time.time) -> None:
        self.keys, self.clock = keys, clock
        self._taken: dict[str, float] = {}  # states used, until they would have expired

    def seal(self, session: Session) -> str:
        """The cookie value for `session`."""
        text = json.dumps({"login": session.login, "token": session.token})
        return self.keys.encrypt_at_time(text.encode(), int(self.clock())).decode()

    def open(self, cookie: str) -> Session | None:
        """The session a cookie holds; None when it is forged, damaged or expired."""
        found = self._open(cookie, SESSION_TTL)
        if found is None:
            return None
        login, token = found.get("login"), found.get("token")
        if not isinstance(login, str) or not isinstance(token, str):
            return None
        return Session(login, token)

    def begin(self, after: str) -> tuple[str, str]:
        """A new sign-in: its `state` and the cookie that binds it to this browser."""
        state = secrets.token_urlsafe(24)
        text = json.dumps({"state": state, "next": after})
        return state, self.keys.encrypt_at_time(text.encode(), int(self.clock())).decode()

    def finish(self, cookie: str, state: str) -> str | None:
        """Where to go after a sign-in whose callback brought `state`, if the browser's
        cookie began it and it was not used before; None otherwise."""
        found = self._open(cookie, SIGNIN_TTL)
        if found is None or not isinstance(want := found.get("state"), str):
            return None
        if not secrets.compare_digest(want.encode(), state.encode()):
            return None
        now = self.clock()
        self._taken = {s: until for s, until in self._taken.items() if until > now}
        if want in self._taken:
            return None
        self._taken[want] = now + SIGNIN_TTL
        after = found.get("next")
        return after if isinstance(after, str) and _local(after) else "/jobs"

    def _open(self, cookie: str, ttl: int) -> dict[str, object] | None:
        try:
            text = self.keys.decrypt_at_time(cookie.encode(), ttl, int(self.clock()))
            found = json.loads(text)
        except (InvalidToken, ValueError):
            return None
        return found if isinstance(found, dict) else None


def _local(path: str) -> bool:
    """A path on this server (never `//host` or a scheme: no open redirect). A browser
    drops tabs and newlines from a URL, so `/<tab>/host` would be `//host`: no control
    character or space passes either."""
    if not path.startswith("/") or path.startswith("//") or "\\" in path:
        return False
    return path.isprintable() and not any(c.isspace() for c in path)
