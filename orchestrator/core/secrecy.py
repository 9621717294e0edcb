"""What the engine's process environment keeps, what agents' processes get, which values
are secrets, and which variables a repository's setup may be given.

Allowlists, not a pattern of secret names: `DATABASE_URL`, `SENTRY_DSN` or `SMTP_PW` name
no TOKEN or KEY, yet hold credentials. The `teaparty` command keeps in its own environment
only what `engine_keeps` names (bot/secrets.py hands everything else to a fresh image of
itself); agents' processes get only what `agent_gets` names, with the values the engine
sets itself (workspace/shell.py, sandbox/confine.py). docs/configuration.md lists both.

`SECRET_NAME` no longer decides what leaves an environment: it says which values the engine
treats as secrets to find (in what it pushes, jobs/secret_check.py) and to mask. Kept tiny
and stdlib-only: the command line reads it before anything else is imported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Protocol

# PASS covers PASSWORD; AUTH(?!OR) so that GIT_AUTHOR_NAME is not taken for a secret.
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASS|CREDENTIAL|AUTH(?!OR)|PRIVATE", re.IGNORECASE)

# The engine process's own environment: what the interpreter, its libraries (the HTTP
# clients read the proxy and CA variables, tempfile TMPDIR) and the locale need. Everything
# else the engine reads from the mapping it was handed, never from its environment.
ENGINE_KEEPS = frozenset(
    {
        *("PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "LANG", "LANGUAGE", "TZ"),
        *("TERM", "COLORTERM", "COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR"),
        *("TMPDIR", "TEMP", "TMP", "VIRTUAL_ENV"),
        *("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"),
        *("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"),
        *("http_proxy", "https_proxy", "all_proxy", "no_proxy"),
    }
)
ENGINE_KEEPS_PREFIXES = ("LC_", "PYTHON")
# Agents' processes: the locale and terminal, and the commit identity the engine sets
# (jobs/model_choice.py AGENT_IDENTITY). PATH, HOME, TMPDIR, git's switches and the egress
# proxy's variables are the engine's own values, set where the process starts.
AGENT_GETS = frozenset(
    {
        *("LANG", "LANGUAGE", "TERM", "TZ"),
        *("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"),
    }
)
AGENT_GETS_PREFIXES = ("LC_",)
# Never given to a repository's setup, whatever the operator names: the App's own
# credentials, the model's key, and the tokens of a GitHub Actions run.
NEVER_FOR_SETUP = frozenset(
    {
        *("GITHUB_APP_PRIVATE_KEY", "GITHUB_APP_PRIVATE_KEY_PATH", "GITHUB_WEBHOOK_SECRET"),
        *("ANTHROPIC_API_KEY", "GITHUB_TOKEN", "GH_TOKEN", "GITHUB_APP_ID"),
        *("ACTIONS_RUNTIME_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN", "TEAPARTY_SECRETS_FD"),
    }
)
MIN_SECRET_CHARS = 8  # a shorter value would be found everywhere; it is not looked for
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def engine_keeps(name: str) -> bool:
    """Whether the engine's process environment keeps `name` (never a secret-named one)."""
    allowed = name in ENGINE_KEEPS or name.startswith(ENGINE_KEEPS_PREFIXES)
    return allowed and not SECRET_NAME.search(name)


def agent_gets(name: str) -> bool:
    """Whether agents' processes may get `name` from the engine's environment."""
    allowed = name in AGENT_GETS or name.startswith(AGENT_GETS_PREFIXES)
    return allowed and not SECRET_NAME.search(name)


def setup_refusal(name: str) -> str | None:
    """Why `name` may not be given to a repository's setup, or None when it may."""
    if not _ENV_NAME.fullmatch(name):
        return f"{name!r} is not a variable name"
    if name in NEVER_FOR_SETUP or name.startswith("TEAPARTY_"):
        return f"{name} is one of the App's own credentials or settings"
    return None


class SecretValues(Protocol):
    """The port through which the engine learns every secret value it holds."""

    def values(self) -> Mapping[str, str]:
        """Each secret value (or a line of a multi-line one) and what it is, by name."""
        ...


class KnownSecrets:
    """Secret values the engine holds: its environment's secret-named variables, the
    operator's setup secrets, and what the edge adds (the App's key read from a file,
    installation tokens as they are minted)."""

    def __init__(self, setup: tuple[str, ...] = ()) -> None:
        self.setup = setup  # the variables a repository's setup may be given
        self._values: dict[str, str] = {}

    @classmethod
    def of(cls, env: Mapping[str, str], *, setup: Iterable[str] = ()) -> KnownSecrets:
        """The secrets of `env`: secret-named variables and the setup secrets it holds."""
        known = cls(tuple(setup))
        for name, value in env.items():
            if SECRET_NAME.search(name) or name in known.setup:
                known.add(value, name)
        return known

    def add(self, value: str, what: str) -> None:
        """Know `value` (`what`: a name for people); each line of a multi-line one (a PEM
        key) on its own, as a diff shows lines. Too short a value or line is left out."""
        for line in value.splitlines() or [value]:
            line = line.strip()
            if len(line) >= MIN_SECRET_CHARS and not line.startswith("-----"):
                self._values.setdefault(line, what)

    def values(self) -> Mapping[str, str]:
        """Each known value and its name."""
        return dict(self._values)


def mask(text: str, *, prefix: bool = True) -> str:
    """`text` as it may be shown: its length, after a short prefix that names its kind
    (`ghp_`, `AKIA`) when `prefix` and it is long enough to spare four characters."""
    shown = text[:4] if prefix and len(text) >= 16 else ""
    return f"{shown}…({len(text)} characters)"
