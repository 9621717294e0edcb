"""Secrets leave the process environment: the engine's /proc/<pid>/environ holds none."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bot.secrets import HANDOVER, secret_names

PROGRAM = """
import json, os
from bot.secrets import take_secrets
env = take_secrets(os.environ)
with open("/proc/self/environ", "rb") as f:
    block = f.read().decode()
print(json.dumps({"env": {k: env[k] for k in sorted(env) if k.startswith("CANARY")},
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


def test_secrets_reach_the_program_but_not_its_environment_block() -> None:
    canaries = {
        "CANARY_GITHUB_TOKEN": "canary-token-1",
        "CANARY_WEBHOOK_SECRET": "canary-secret-2",
        "CANARY_API_KEY": "canary-key-3",
        "CANARY_PLAIN": "not-a-secret",
    }
    out = run(canaries)
    assert out["env"] == canaries, "the program still has every value"
    block = str(out["block"])
    for name in ("CANARY_GITHUB_TOKEN", "CANARY_WEBHOOK_SECRET", "CANARY_API_KEY"):
        assert canaries[name] not in block, f"{name} is readable in /proc/<pid>/environ"
        assert name not in out["os_environ"]  # type: ignore[operator]
    assert "CANARY_PLAIN=not-a-secret" in block
    assert HANDOVER not in out["os_environ"]  # type: ignore[operator]


def test_without_secrets_nothing_is_re_executed() -> None:
    out = run({"CANARY_PLAIN": "x"})
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


def test_secret_names_go_by_name_and_skip_empty_values() -> None:
    env = {"GITHUB_APP_PRIVATE_KEY": "k", "GIT_AUTHOR_NAME": "a", "X_PASSWORD": "", "PATH": "/"}
    assert secret_names(env) == ["GITHUB_APP_PRIVATE_KEY"]
