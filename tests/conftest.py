"""Suite-wide fixtures: no test reaches a real model; the host's sandbox, probed once; real
webhook payloads from tests/payloads/."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.core.errors import SandboxError
from orchestrator.models import anthropic as anthropic_model
from orchestrator.sandbox.confine import Sandbox
from orchestrator.sandbox.probe import probe

# Fixtures of the GitHub stand-in's tests (hub, pem, base_url, gh, http), the egress proxy's
# (origin, echo_port), the configuration tests' (org_dir, org), the launcher's (box) and the
# job lifecycle's on GitHub (lifecycle).
pytest_plugins = [
    "fakehub_support",
    "launch_support",
    "netproxy_support",
    "orgfiles",
    "lifecycle_support",
]

PAYLOADS = Path(__file__).parent / "payloads"
Load = Callable[[str], dict[str, Any]]  # the payload fixture: a fresh copy of one, by name


@pytest.fixture
def payload() -> Load:
    """Load tests/payloads/<name>.json, a fresh copy each call."""

    def load(name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((PAYLOADS / f"{name}.json").read_text(encoding="utf-8"))
        return data

    return load


@pytest.fixture(autouse=True)
def _no_model_requests() -> Iterator[None]:
    """Make an AnthropicModel without an injected client fail instead of calling the API."""
    allowed = anthropic_model.ALLOW_REQUESTS
    anthropic_model.ALLOW_REQUESTS = False
    yield
    anthropic_model.ALLOW_REQUESTS = allowed


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    """This host's sandbox, as `teaparty serve` would find it (TEAPARTY_SANDBOX respected)."""
    home = tmp_path_factory.mktemp("sandbox-home")
    env = {k: v for k, v in os.environ.items() if k.startswith("TEAPARTY_SANDBOX")}
    return asyncio.run(probe(env, home=home))


def hand_to_agents(path: Path, sandbox: Sandbox) -> Path:
    """Give a directory to the agents' user, as the workspace does for a worker's slot."""
    if sandbox.run_as is not None and sandbox.confined:
        for folder, dirs, files in os.walk(path):
            for name in [*dirs, *files, ""]:
                os.lchown(os.path.join(folder, name) if name else folder, *sandbox.run_as)
    return path


def survivors(marker: str) -> list[int]:
    """Host pids of processes whose command line holds `marker` (pids inside a sandbox differ)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def confined(mode: str, name: str) -> Iterator[tuple[Sandbox, Path]]:
    """A `mode` sandbox and a worktree the agents' user owns, or a skip naming why not.

    Under /tmp with searchable parents: Landlock as root needs the agents' user to reach it.
    """
    home = Path(tempfile.mkdtemp(dir="/tmp", prefix=f"teaparty-{name}-"))  # its own per session
    home.chmod(0o711)
    try:
        try:
            found = asyncio.run(probe({"TEAPARTY_SANDBOX": mode}, home=home))
        except SandboxError as exc:
            pytest.skip(f"TEAPARTY_SANDBOX={mode}: {exc}")
        work = home / "wt"
        work.mkdir(exist_ok=True)
        work.chmod(0o755)
        yield found, hand_to_agents(work, found)
    finally:
        shutil.rmtree(home, ignore_errors=True)
