"""One engine process whose agents fill what they share, for tests/security/test_limits.py.

Run as `python limits_harness.py CONFIG_JSON`; the sandbox and its limits come from the
environment (TEAPARTY_SANDBOX, _UIDS, _UID, _PROCESSES, _DISK_MB), as `teaparty serve`
reads them. It opens an Office, starts a job with two tasks and leases each its slot, then
plays one scenario through the real shell tool of those slots:

- `fork`: agent 1 forks until its process limit refuses, and holds what it forked (it
  waits on a FIFO) while agent 2, in the other slot, runs a command that forks once;
  then agent 1 is let go. Nothing here waits on time: each step waits on the one before.
- `disk`: agent 1's conversation (a scripted lead sends the implementer to work; the
  implementer writes 12 MB in its slot with one shell call, then says it is done) runs
  through the real turn loop, and the lead's reply says what it read; with `endless`,
  agent 2 also runs a shell call that writes until something stops it.

It writes what it saw to the report file; the test inspects that.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent), str(HERE)]

from fakes import CODING_LEAD, calls, org_router, say, send  # noqa: E402
from harness import make_origin, open_office, start_job, workspace_tools  # noqa: E402

from orchestrator.agents.engine import Engine  # noqa: E402
from orchestrator.agents.ports import AgentSpec  # noqa: E402
from orchestrator.agents.tools import BUS_SPECS  # noqa: E402
from orchestrator.core.messages import AssistantTurn, ToolCall, ToolResult  # noqa: E402
from orchestrator.core.model import ModelRequest  # noqa: E402
from orchestrator.models.scripted import FunctionModel  # noqa: E402
from orchestrator.sandbox.probe import probe  # noqa: E402
from orchestrator.teams.board import create_task  # noqa: E402
from orchestrator.workspace.file_tools import SPECS, WorktreeTools  # noqa: E402

# Forks until refused, says so on the FIFO `full` (opening it waits for the engine to read),
# then holds its children until the engine writes `go`.
BOMB = """exec python3 -c '
import os, signal
forked, refused = 0, "never refused"
try:
    while forked < 100000:
        if os.fork() == 0:
            signal.pause()
            os._exit(0)
        forked += 1
except OSError as exc:
    refused = str(exc)
report = f"uid {os.getuid()} forked {forked}: {refused}"
with open("full", "w") as fifo:
    fifo.write(report)
with open("go") as fifo:
    fifo.read()
print(report)
'"""
# Forks once (exec: the shell itself forks nothing first, so only this fork is measured).
FORK_ONCE = (
    "exec python3 -c 'import os, subprocess; "
    'print(f"uid {os.getuid()}:", subprocess.run(["echo", "the second agent ran"], '
    "capture_output=True, text=True).stdout.strip())'"
)
WRITE_12_MB = "for i in $(seq 12); do head -c 1048576 /dev/zero > junk-$i; done; echo wrote"
WRITE_ENDLESSLY = "i=0; while :; do head -c 1048576 /dev/zero > more-$i || exit; i=$((i+1)); done"


@dataclass
class Agents:
    """The turn loop's agents: every one the scripted model, with the bus's and file tools."""

    model: FunctionModel

    def spec(self, address: str) -> AgentSpec:
        tools = (*BUS_SPECS.values(), SPECS["shell"])
        return AgentSpec(address, f"You are {address}.", tools, self.model, 10)


@dataclass
class InSlot:
    """Runs every tool call of the conversation in one slot's tools (the worker's place)."""

    tools: WorktreeTools

    async def run(self, agent: str, conversation_id: str, call: ToolCall) -> ToolResult:
        return await self.tools.run(agent, conversation_id, call)


def scripted(request: ModelRequest) -> AssistantTurn:
    """The lead sends the implementer to write, then says what came back; the implementer
    writes 12 MB and, if its turn goes on, says it is done."""
    if request.agent == CODING_LEAD:
        if len(request.messages) == 1:
            return calls(send("s", "implementer", "write the files"))
        reply = request.messages[-1]
        return say(f"lead saw error={reply.content['is_error']}: {reply.text}")
    if len(request.messages) == 1:
        return calls(ToolCall("w", "shell", {"command": WRITE_12_MB}))
    return say("done: wrote 12 MB")


async def disk(tools: Callable[[int], WorktreeTools], base: Path, endless: bool) -> dict[str, Any]:
    engine = await Engine.open(
        base / "turns.db",
        agents=Agents(FunctionModel(scripted)),
        router=org_router(),
        tools=InSlot(tools(1)),
    )
    try:
        await engine.bus.start_job(
            job_key="k", project="w", title="t", agent=CODING_LEAD, brief="b"
        )
        await engine.scheduler.run_until_idle()
        lead = await engine.bus.snapshot("job:1")
        worker = [m for m in lead.transcript if m.role == "tool"]
        found: dict[str, Any] = {
            "lead": lead.conversation.result,
            "failures": [str(f) for f in await engine.scheduler.failures()],
            "worker_reply_is_error": bool(worker and worker[-1].content.get("is_error")),
            "slot_files": sorted(p.name for p in tools(1).root.iterdir()),
        }
    finally:
        await engine.close()
    if endless:
        call = ToolCall("e", "shell", {"command": WRITE_ENDLESSLY, "timeout_s": 60})
        result = await tools(2).run("worker", "task:2", call)
        found["endless"] = {"output": result.output, "stop": result.stop}
    return found


async def fork(tools: Callable[[int], WorktreeTools]) -> dict[str, Any]:
    first, second = tools(1), tools(2)
    await first.run("worker", "task:1", ToolCall("m", "shell", {"command": "mkfifo full go"}))
    bomb = asyncio.ensure_future(
        first.run("worker", "task:1", ToolCall("b", "shell", {"command": BOMB, "timeout_s": 60}))
    )
    full = asyncio.ensure_future(asyncio.to_thread((first.root / "full").read_text))
    await asyncio.wait((bomb, full), return_when=asyncio.FIRST_COMPLETED)
    if not full.done():  # the bomb ended without saying it was full: let the reader go
        (first.root / "full").write_text("")
        raise SystemExit(f"the fork bomb ended early: {(await bomb).output}")
    ran = await second.run("worker", "task:2", ToolCall("s", "shell", {"command": FORK_ONCE}))
    await asyncio.to_thread((first.root / "go").write_text, "go")
    return {"full": await full, "bomb": (await bomb).output, "second": ran.output}


async def main(config: dict[str, Any]) -> dict[str, Any]:
    base = Path(config["base"])
    home = base / "home"
    origin = make_origin(base / "origin.git", "README.md", "widgets\n", "init")
    env = dict(os.environ)
    sandbox = await probe(env, home=home)
    office = await open_office(home, env, sandbox)
    report: dict[str, Any] = {"mode": sandbox.mode, "reason": sandbox.reason}
    try:
        job = await start_job(office, origin, 1, "t")
        files = workspace_tools(office, env, sandbox)
        slots = {}
        for number in (1, 2):
            await office.engine.store.write(
                partial(
                    create_task, job_id=job.job_id, title=f"t{number}", spec="s", created_by="l"
                )
            )
            space = await office.workspace.lease(job.space, number)
            slots[number] = files.tools_for(job.space, space.path, writable=True, project="w")
            status = os.stat(space.path)
            report[f"slot_{number}_owner"] = [status.st_uid, status.st_gid]

        def tools(number: int) -> WorktreeTools:
            return slots[number]

        if config["scenario"] == "fork":
            report |= await fork(tools)
        else:
            report |= await disk(tools, base, config.get("endless", False))
    finally:
        await office.close()
    return report


if __name__ == "__main__":
    settings = json.loads(sys.argv[1])
    found = asyncio.run(main(settings))
    Path(settings["report"]).write_text(json.dumps(found, indent=1))
