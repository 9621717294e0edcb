"""Suite-wide fixtures: no test reaches a real model; the host's sandbox, probed once."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator import anthropic_model
from orchestrator.sandbox import Sandbox
from orchestrator.sandbox_probe import probe


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
