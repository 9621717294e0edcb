"""Deterministic models for tests and the offline demo: scripted turns, or a function."""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping

from orchestrator.bus.routing import short_name
from orchestrator.core.errors import ModelError
from orchestrator.core.messages import AssistantTurn
from orchestrator.core.model import ModelRequest

ReplyFn = Callable[[ModelRequest], AssistantTurn | Awaitable[AssistantTurn]]


class ScriptError(ModelError):
    """The scripted model was called for a turn nobody scripted, or left turns unplayed."""


class ScriptedModel:
    """Plays declared turns per role, in order; any call it was not scripted for fails loudly.

    A role is an agent's short name (`implementer`) or its full address; the address wins.
    """

    def __init__(self, script: Mapping[str, Iterable[AssistantTurn]]) -> None:
        self.turns: dict[str, deque[AssistantTurn]] = {
            role: deque(turns) for role, turns in script.items()
        }
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        """Return the next scripted turn of the requesting agent's role."""
        self.requests.append(request)
        for role in (request.agent, short_name(request.agent)):
            if self.turns.get(role):
                return self.turns[role].popleft()
        last = request.messages[-1].text[:200] if request.messages else ""
        raise ScriptError(
            f"no scripted turn left for {request.agent!r} "
            f"(call {len(self.requests)}; last message: {last!r})"
        )

    def assert_done(self) -> None:
        """Fail if any scripted turn was never played."""
        left = {role: len(turns) for role, turns in self.turns.items() if turns}
        if left:
            raise ScriptError(f"scripted turns never played: {left}")


class FunctionModel:
    """Computes each reply from the request (sync or async); records every request."""

    def __init__(self, fn: ReplyFn) -> None:
        self.fn = fn
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        """Return fn(request)."""
        self.requests.append(request)
        reply = self.fn(request)
        if inspect.isawaitable(reply):
            reply = await reply
        if not isinstance(reply, AssistantTurn):
            raise ScriptError(f"function model returned {type(reply).__name__}, not a turn")
        return reply

    def requests_of(self, agent: str) -> list[ModelRequest]:
        """The requests one agent made."""
        return [r for r in self.requests if r.agent == agent]
