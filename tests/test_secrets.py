"""Secrets leave the process environment: the engine's /proc/<pid>/environ holds only the
variables it names for itself, so no credential, whatever its name."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bot.secrets import HANDOVER, handed_names
from orchestrator.core.secrecy import SECRET_NAME

PROGRAM = """
import json, os
from bot.secrets import take_secrets
env = take_secrets(os.environ)
with open("/proc/self/environ", "rb") as f:
    block = f.read().decode()
print(json.dumps({"env": {k: env[k] for k in sorted(env) if k.startswith(("CANARY", "X_"))},
                  "block": block, "os_environ": sorted(os.environ), "pid": os.getpid()}))
"""


def run(env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_only_what_the_engine_names_stays_in_its_environment_block() -> None:
    canaries = {
        "CANARY_GITHUB_TOKEN": "canary-token-1",
        "CANARY_WEBHOOK_SECRET": "canary-secret-2",
        "CANARY_API_KEY": "canary-key-3",
        # Credentials no name pattern finds: an allowlist leaves them out all the same.
        "CANARY_DATABASE_URL": "postgres://u:canary-db@h/d",
        "CANARY_SENTRY_DSN": "https://canary-dsn@o1.ingest.sentry.io/2",
        "CANARY_SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/canary-hook",
        "X_PW": "canary-pw",
    }
    assert not any(SECRET_NAME.search(name) for name in list(canaries)[3:]), "the old rule"
    out = run({**canaries, "LANG": "C.UTF-8", "LC_TIME": "C"})
    assert out["env"] == canaries, "the program still has every value"
    block = str(out["block"])
    for name, value in canaries.items():
        assert value not in block, f"{name} is readable in /proc/<pid>/environ"
        assert name not in out["os_environ"]  # type: ignore[operator]
    assert "LANG=C.UTF-8" in block
    assert "LC_TIME=C" in block
    assert HANDOVER not in out["os_environ"]  # type: ignore[operator]


def test_with_only_kept_variables_nothing_is_re_executed() -> None:
    out = run({"LANG": "C"})
    assert HANDOVER not in str(out["block"])


def test_a_forged_handover_is_refused_with_its_name() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "config", "check"],
        env={"PATH": os.environ["PATH"], HANDOVER: "not-a-number"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert f"{HANDOVER}='not-a-number' is not a file descriptor" in done.stderr


def test_everything_but_the_engines_own_variables_is_handed_over() -> None:
    env = {"GITHUB_APP_PRIVATE_KEY": "k", "DATABASE_URL": "d", "X_PASSWORD": "", "PATH": "/"}
    env |= {"LC_ALL": "C", "PYTHONPATH": "/p", "HTTPS_PROXY": "http://p", "PYTHON_TOKEN": "t"}
    assert handed_names(env) == ["DATABASE_URL", "GITHUB_APP_PRIVATE_KEY", "PYTHON_TOKEN"] + [
        "X_PASSWORD"
    ]


def test_the_handover_reads_back_in_this_process_either_way(monkeypatch: object) -> None:
    """The two ways a descriptor is made (memfd, else an unlinked file) read back whole,
    however large; a bad descriptor or text is refused by name (in-process: coverage)."""
    import pytest

    from bot.errors import SettingsError
    from bot.secrets import _anonymous_file, _receive, take_secrets

    secrets = {"ANTHROPIC_API_KEY": "k" * 100_000, "DATABASE_URL": "postgres://u:p@h/db"}
    payload = json.dumps(secrets).encode()
    kept = {"PATH": "/usr/bin"}
    fd = _anonymous_file(payload)
    assert take_secrets({**kept, HANDOVER: str(fd)}) == {**kept, **secrets}
    patch = pytest.MonkeyPatch()
    try:
        patch.delattr(os, "memfd_create")
        fd = _anonymous_file(payload)
    finally:
        patch.undo()
    assert _receive({HANDOVER: str(fd)}) == secrets
    assert take_secrets(kept) == kept  # nothing to hand over: no exec
    with pytest.raises(SettingsError, match="is not a file descriptor"):
        _receive({HANDOVER: "x"})
    with pytest.raises(SettingsError, match="cannot read the secrets handed over"):
        _receive({HANDOVER: "987654"})
    with pytest.raises(SettingsError, match="are not JSON"):
        _receive({HANDOVER: str(_anonymous_file(b"not json"))})
