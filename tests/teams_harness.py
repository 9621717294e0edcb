"""Runs the scripted teams job (teams_script.py) in this process, dying by SIGKILL where told.

Used by test_teams_crash.py as a real subprocess:
    python tests/teams_harness.py HOME REPO [--kill model:AGENT:N | --kill step:TOOL:N]
`model:AGENT:N` dies inside the N-th model call of AGENT (a short name); `step:TOOL:N`
dies after the N-th run of a mini-team step (team_prepare, team_merge, ...) did its
work and before its result was committed. Prints the job's final reply when it ends.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections import Counter
from pathlib import Path

import teams_script as script

from orchestrator.core.messages import AssistantTurn, ToolCall, ToolResult
from orchestrator.core.model import ModelRequest
from orchestrator.models.scripted import FunctionModel
from orchestrator.teams.tools import TeamTools

SEEN: Counter[str] = Counter()


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def killing_model(kind: str, target: str, nth: int) -> FunctionModel:
    def reply(request: ModelRequest) -> AssistantTurn:
        role = request.agent.rsplit("/", 1)[-1]
        SEEN[role] += 1
        if kind == "model" and role == target and SEEN[role] == nth:
            die()
        return script.ROLES[role](request)

    return FunctionModel(reply)


def kill_after_step(target: str, nth: int) -> None:
    original = TeamTools.run

    async def run(self: TeamTools, agent: str, conversation_id: str, call: ToolCall) -> ToolResult:
        result = await original(self, agent, conversation_id, call)
        SEEN[call.name] += 1
        if call.name == target and SEEN[call.name] == nth:
            die()
        return result

    TeamTools.run = run  # type: ignore[method-assign]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("home", type=Path)
    parser.add_argument("repo", type=Path)
    parser.add_argument("--kill", default="none:none:0")
    args = parser.parse_args()
    kind, target, n = args.kill.split(":")
    if kind == "step":
        kill_after_step(target, int(n))
    office = await script.open_office(args.home, killing_model(kind, target, int(n)))
    try:
        job = await script.start(office, args.repo)
        sys.stdout.write(f"{await office.run(job, script.never)}\n")
    finally:
        await office.close()


if __name__ == "__main__":
    asyncio.run(main())
