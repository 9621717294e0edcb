"""The engine assembled: store, event bus, conversation bus, runner and scheduler."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchestrator.agents.loop import Checkpoint, Runner
from orchestrator.agents.ports import Agents, Budget, ToolRunner
from orchestrator.agents.scheduler import Scheduler
from orchestrator.bus.conversations import ConversationBus
from orchestrator.bus.events import EventBus
from orchestrator.bus.extensions import Extensions
from orchestrator.bus.routing import Router
from orchestrator.store.sqlite import Store, Synchronous


@dataclass
class Engine:
    """One engine over one store file."""

    store: Store
    events: EventBus
    bus: ConversationBus
    scheduler: Scheduler

    @classmethod
    async def open(
        cls,
        path: Path,
        *,
        agents: Agents,
        router: Router,
        tools: ToolRunner | None = None,
        budget: Budget | None = None,
        concurrency: int = 8,
        synchronous: Synchronous = "FULL",
        extensions: Extensions | None = None,
    ) -> Engine:
        """Open the store at `path` and wire the engine around it."""
        store = await Store.open(path, synchronous=synchronous)
        return cls.over(
            store,
            agents=agents,
            router=router,
            tools=tools,
            budget=budget,
            concurrency=concurrency,
            extensions=extensions,
        )

    @classmethod
    def over(
        cls,
        store: Store,
        *,
        agents: Agents,
        router: Router,
        tools: ToolRunner | None = None,
        budget: Budget | None = None,
        checkpoint: Checkpoint | None = None,
        concurrency: int = 8,
        extensions: Extensions | None = None,
    ) -> Engine:
        """The engine over an open store, with everything its runner needs (`extensions`:
        what features add to the bus's steps; none without)."""
        events = EventBus()
        bus = ConversationBus(store, events, extensions)
        runner = Runner(bus, agents, router, tools=tools, budget=budget, checkpoint=checkpoint)
        return cls(store, events, bus, Scheduler(bus, runner, concurrency=concurrency))

    async def close(self) -> None:
        """Stop event subscribers and close the store."""
        await self.events.close()
        await self.store.close()
