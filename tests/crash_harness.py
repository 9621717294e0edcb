"""Runs one deterministic job to completion in this process, dying by SIGKILL where told.

Used by test_crash.py as a real subprocess:
    python tests/crash_harness.py STORE [--kill METHOD:AGENT:N:WHEN]
METHOD is consume | record_turn | record_results | finish | model; AGENT a short agent
name; N the N-th such call in this process; WHEN is `inside` (the transaction ran but did
not commit), `mid` (between its second and third write statement) or `after` (it
committed). `model` kills inside the N-th model call of AGENT. Every real run of the
workers' tool is logged to STORE.tools.log.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fakes import OM, FunctionModel, StaticAgents, calls, org_router, replies, say, send

from orchestrator.agents.loop import Runner
from orchestrator.agents.scheduler import Scheduler
from orchestrator.bus.conversations import ConversationBus, Step
from orchestrator.bus.dispatch import BusCalls
from orchestrator.bus.events import EventBus
from orchestrator.core.messages import AssistantTurn, ToolCall, ToolResult
from orchestrator.core.model import ModelRequest
from orchestrator.store.sqlite import Store, Tx

JOB_KEY = "widgets#7"
WORKERS = 5


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@dataclass(frozen=True)
class KillPlan:
    method: str
    agent: str
    occurrence: int
    when: str

    @classmethod
    def parse(cls, text: str) -> KillPlan:
        method, agent, n, when = text.split(":")
        return cls(method, agent, int(n), when)


class CrashingStore(Store):
    """A store that can die inside its next transaction: after it all, or between statements."""

    kill_inside_next: str | None = None

    async def write(self, fn: Callable[[Tx], Any]) -> Any:
        mode, self.kill_inside_next = self.kill_inside_next, None
        if mode is None:
            return await super().write(fn)

        def dying(tx: Tx) -> Any:
            if mode == "mid":
                statements = Counter[str]()

                def count(sql: str) -> None:
                    if sql.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
                        statements["writes"] += 1
                        if statements["writes"] == 3:
                            die()  # two writes done, the third under way

                tx.set_trace_callback(count)
            fn(tx)
            die()

        return await super().write(dying)


class CrashingBus(ConversationBus):
    """A bus that dies at the planned step."""

    def __init__(self, store: CrashingStore, events: EventBus, plan: KillPlan | None) -> None:
        super().__init__(store, events)
        self.crashing_store = store
        self.plan = plan
        self.seen: Counter[tuple[str, str]] = Counter()

    async def _step(self, method: str, conversation_id: str, run: Any) -> Step:
        agent = (await self.snapshot(conversation_id)).conversation.agent.rsplit("/", 1)[-1]
        self.seen[method, agent] += 1
        plan = self.plan
        hit = plan is not None and (plan.method, plan.agent, plan.occurrence) == (
            method,
            agent,
            self.seen[method, agent],
        )
        if hit and plan is not None and plan.when in ("inside", "mid"):
            self.crashing_store.kill_inside_next = plan.when
        step: Step = await run()
        if hit:
            die()
        return step

    async def consume(self, conversation_id: str) -> Step:
        return await self._step(
            "consume", conversation_id, lambda: super(CrashingBus, self).consume(conversation_id)
        )

    async def record_turn(self, conversation_id: str, turn: AssistantTurn, calls: BusCalls) -> Step:
        return await self._step(
            "record_turn",
            conversation_id,
            lambda: super(CrashingBus, self).record_turn(conversation_id, turn, calls),
        )

    async def finish(
        self, conversation_id: str, turn: AssistantTurn, *, error: bool = False
    ) -> Step:
        return await self._step(
            "finish",
            conversation_id,
            lambda: super(CrashingBus, self).finish(conversation_id, turn, error=error),
        )

    async def record_results(
        self, conversation_id: str, sender: str, results: list[ToolResult]
    ) -> Step:
        return await self._step(
            "record_results",
            conversation_id,
            lambda: super(CrashingBus, self).record_results(conversation_id, sender, results),
        )


class LoggingTools:
    """A tool that leaves a durable trace each time it really runs."""

    def __init__(self, log: Path) -> None:
        self.log = log

    async def run(self, agent: str, conversation_id: str, call: ToolCall) -> ToolResult:
        with self.log.open("a") as out:
            out.write(f"{conversation_id} {call.call_id}\n")
            out.flush()
            os.fsync(out.fileno())
        return ToolResult(call.call_id, f"recorded {call.args['part']}")


def agent_fn(plan: KillPlan | None) -> Callable[[ModelRequest], AssistantTurn]:
    """A deterministic organisation: the reply depends on the request alone."""
    model_calls: Counter[str] = Counter()

    def fn(request: ModelRequest) -> AssistantTurn:
        name = request.agent.rsplit("/", 1)[-1]
        model_calls[name] += 1
        if (
            plan
            and plan.method == "model"
            and (plan.agent, plan.occurrence) == (name, model_calls[name])
        ):
            die()
        first = request.messages[0].text
        got = replies(request.messages)
        if name == "office-manager":
            if len(request.messages) == 1:
                return calls(send("om1", "widgets", f"plan and ship: {first}"))
            return say(f"job done: {got[0].text}")
        if name == "project-lead":
            if len(request.messages) == 1:
                return calls(send("pl1", "coding", "build it"), send("pl2", "research", "study it"))
            return say("project: " + " + ".join(m.text for m in got))
        if name == "coding-lead":
            return coding_lead(request, got)
        if name == "research-lead":
            if len(request.messages) == 1:
                return calls(send("rl1", "researcher", "find prior art"))
            return say(f"research: {got[0].text}")
        return worker(name, request)

    return fn


def worker(name: str, request: ModelRequest) -> AssistantTurn:
    """Runs the logging tool once per request, then answers."""
    if name == "implementer" and request.messages[-1].role == "user":
        part = request.messages[-1].text
        return calls(ToolCall(f"t-{part}", "record", {"part": part}))
    brief = [m for m in request.messages if m.role == "user"][-1].text
    return say(f"{name} did [{brief}]")


def coding_lead(request: ModelRequest, got: list[Any]) -> AssistantTurn:
    if len(request.messages) == 1:
        return calls(*(send(f"w{i}", "implementer", f"part {i}") for i in range(WORKERS)))
    if got and got[0].call_id == "w0":
        first_worker = got[0].content["conversation_id"]
        summary = "; ".join(m.text for m in got)
        return calls(send("polish", "implementer", "polish part 0", first_worker), text=summary)
    return say("coding: merged and polished: " + got[0].text)


async def main(store_path: Path, plan: KillPlan | None) -> None:
    store = await CrashingStore.open(store_path)
    events = EventBus()
    bus = CrashingBus(store, events, plan)
    model = FunctionModel(agent_fn(plan))
    tools = LoggingTools(store_path.with_name(store_path.name + ".tools.log"))
    runner = Runner(bus, StaticAgents(model), org_router(), tools=tools)
    scheduler = Scheduler(bus, runner, concurrency=4)
    await bus.start_job(job_key=JOB_KEY, project="widgets", title="t", agent=OM, brief="issue 7")
    await scheduler.run_until_idle()
    if failed := await scheduler.failures():
        raise SystemExit(f"failures: {failed}")
    await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("store", type=Path)
    parser.add_argument("--kill", type=KillPlan.parse)
    args = parser.parse_args()
    asyncio.run(main(args.store, args.kill))
    sys.stdout.write("done\n")
