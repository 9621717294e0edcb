"""What the hub's helpers (the people and CI that act on the stand-in) need of it."""

from __future__ import annotations

from bot.fakehub import webhooks
from bot.fakehub.shapes import Json, Urls
from bot.fakehub.state import HubState


class HubRole:
    """A FakeGitHub helper: the hub's state, its links and its deliveries, which FakeGitHub
    provides (these stand for them where a helper is read alone)."""

    state: HubState

    @property
    def urls(self) -> Urls:
        """Where API and web links point (FakeGitHub provides it)."""
        raise NotImplementedError

    async def _deliver(self, event: str, payload: Json) -> webhooks.SentDelivery:
        raise NotImplementedError

    async def _deliver_all(self, deliveries: list[webhooks.Outgoing]) -> None:
        raise NotImplementedError
