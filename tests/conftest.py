"""Suite-wide fixtures: no test reaches a real model."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from orchestrator import anthropic_model


@pytest.fixture(autouse=True)
def _no_model_requests() -> Iterator[None]:
    """Make an AnthropicModel without an injected client fail instead of calling the API."""
    allowed = anthropic_model.ALLOW_REQUESTS
    anthropic_model.ALLOW_REQUESTS = False
    yield
    anthropic_model.ALLOW_REQUESTS = allowed
