"""An Office running the demo model on a real repository, for the intent gate's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import demo_office
from demo_office import start_job
from fakes import FakeForge
from local_repo import make_repo

from orchestrator.bus import gates
from orchestrator.bus.gates import Gate
from orchestrator.core.messages import AssistantTurn, Message, job_conversation_id
from orchestrator.core.model import ModelRequest
from orchestrator.jobs import revisions
from orchestrator.jobs.driver import JobDriver
from orchestrator.jobs.office import Office
from orchestrator.jobs.offline import DemoModel
from orchestrator.jobs.ports import Forge
from orchestrator.store.sqlite import Tx

TITLE = "Add a changelog"
BODY = "We need one."
ASKS_INTENT = "humans: {decider: carol}\ngates: {intent: always, plan: always}\n"
DEFAULTS = "humans: {decider: carol}\ngates: {plan: always}\n"


class CountingDemo(DemoModel):
    """The demo model, recording which agent each call was for (the proxy's too)."""

    def __init__(self) -> None:
        super().__init__(title=TITLE, body=BODY, path="docs/requests/changelog.md")
        self.agents: list[str] = []

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        self.agents.append(request.agent)
        return await super().complete(request)

    def agent_calls(self) -> int:
        """Calls made for the job's agents (not the proxy's predictions)."""
        return sum(1 for agent in self.agents if "proxy" not in agent)


async def open_office(home: Path, project_text: str, model: DemoModel) -> Office:
    return await demo_office.open_office(home, project_text, model)


async def start(office: Office, repo: Path, project_text: str) -> int:
    return await start_job(office, repo, project_text, title=TITLE, body=BODY)


@asynccontextmanager
async def driving(
    tmp_path: Path, project_text: str, model: DemoModel | None = None
) -> AsyncIterator[tuple[Office, Drive]]:
    """An office under `tmp_path`/home and a job started on a fresh repository there, with
    its Drive; the office is closed after."""
    office = await open_office(tmp_path / "home", project_text, model or CountingDemo())
    try:
        job_id = await start(office, make_repo(tmp_path / "widgets"), project_text)
        yield office, Drive(office, job_id)
    finally:
        await office.close()


async def pinned_hash(
    office: Office, gate: Gate, *, pinned: dict[str, object] | None = None
) -> str:
    """The hash `gate` has when it pins the job's content as it now stands (and `pinned`)."""
    assert gate.job_id is not None
    title, brief, base = await office.engine.store.read(
        lambda tx: revisions.job_content(tx, gate.job_id)
    )
    return gates.content_hash(
        kind=gate.kind,
        question=gate.question,
        options=gate.options,
        title=title,
        brief=brief,
        base=base,
        pinned=pinned,
    )


class Drive:
    """Sync and run a job until it waits for a person (a FakeForge that answers nothing)."""

    def __init__(self, office: Office, job_id: int) -> None:
        self.office = office
        self.job_id = job_id
        self.forge = FakeForge(office, leave_open=True)
        self.driver = JobDriver(office, self._forge)

    async def _forge(self, _: int) -> Forge:
        return self.forge

    async def until_waiting(self) -> list[Gate]:
        """Run until the job waits on its open gates (or is done); those gates."""
        for _ in range(50):
            state = await self.driver.sync(self.job_id)
            await self.office.run_until_idle()
            if state in ("done", "failed") or (
                state == "waiting" and not await self.office.engine.bus.runnable(self.job_id)
            ):
                return await self.office.open_gates(self.job_id)
        raise AssertionError("the job never settled")

    async def answer(self, gate: Gate, text: str) -> Gate:
        return await self.office.answer_gate(gate.gate_id, text=text, answered_by="carol")

    async def to_the_end(self) -> str:
        """Approve every gate until the job is done; its state."""
        for _ in range(20):
            open_now = await self.until_waiting()
            if not open_now:
                return await self.driver.sync(self.job_id)
            for gate in open_now:
                await self.answer(gate, "yes")
        raise AssertionError("the job never ended")

    async def every_gate(self) -> list[Gate]:
        """Every gate of the job, oldest first, answered or not."""

        def read(tx: Tx) -> list[Gate]:
            rows = tx.execute(
                "SELECT gate_id FROM gates WHERE job_id = ? ORDER BY gate_id", (self.job_id,)
            ).fetchall()
            return [gates.get(tx, gate_id) for (gate_id,) in rows]

        return await self.office.engine.store.read(read)

    async def transcript(self, conversation_id: str | None = None) -> tuple[Message, ...]:
        cid = conversation_id or job_conversation_id(self.job_id)
        return await self.office.engine.bus.transcript(cid)
