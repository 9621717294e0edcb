"""The tool registry: every tool an agent can declare, its spec, and who runs it."""

from __future__ import annotations

from collections.abc import Mapping

from orchestrator.agents.ports import ToolRunner
from orchestrator.agents.tools import BUS_SPECS
from orchestrator.core.messages import ToolCall, ToolResult
from orchestrator.core.tools import ToolSpec
from orchestrator.teams import board_tools, review_tools
from orchestrator.workspace import file_tools as worktree_tools

ALL_SPECS: Mapping[str, ToolSpec] = {
    **BUS_SPECS,
    **worktree_tools.SPECS,
    **board_tools.SPECS,
    **review_tools.SPECS,
}


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
