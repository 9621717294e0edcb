"""The Model port: messages and tools in, one assistant turn (with token usage) out.

What the world implements: the Anthropic adapter and the scripted models.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from orchestrator.core.messages import AssistantTurn, Message
from orchestrator.core.tools import ToolSpec


@dataclass(frozen=True)
class ModelRequest:
    """One model call: who is asking, its standing instructions, its transcript, its tools."""

    agent: str
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]


class Model(Protocol):
    """Messages and tools in, one assistant turn (with token usage) out."""

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        """Return the assistant's next turn."""
        ...
