"""The toolbox: one ToolRunner over several, each call handed to the runner of its tool."""

from __future__ import annotations

from collections.abc import Mapping

from orchestrator.agents.ports import ToolRunner
from orchestrator.core.messages import ToolCall, ToolResult
from orchestrator.core.tools import ToolSpec


class Toolbox:
    """A ToolRunner that hands each call to the runner of its tool."""

    def __init__(self, runners: Mapping[str, ToolRunner]) -> None:
        self.runners = dict(runners)

    @classmethod
    def of(cls, *groups: tuple[ToolRunner, Mapping[str, ToolSpec]]) -> Toolbox:
        """One toolbox from (runner, the specs it implements) pairs."""
        return cls({name: runner for runner, specs in groups for name in specs})

    async def run(self, agent: str, conversation_id: str, call: ToolCall) -> ToolResult:
        """Run `call` with its tool's runner; an unknown tool is an error the model reads."""
        runner = self.runners.get(call.name)
        if runner is None:
            return ToolResult(call.call_id, f"unknown tool {call.name!r}", is_error=True)
        return await runner.run(agent, conversation_id, call)
