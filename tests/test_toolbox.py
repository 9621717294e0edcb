"""The registry knows every tool the configuration allows, and routes calls to their runner."""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.agents.toolbox import Toolbox
from orchestrator.config import KNOWN_TOOLS
from orchestrator.core.messages import ToolCall, ToolResult
from orchestrator.core.tools import ToolSpec
from orchestrator.jobs.assembly import ALL_SPECS


def test_every_tool_the_configuration_allows_has_a_spec_and_no_more() -> None:
    assert set(ALL_SPECS) == set(KNOWN_TOOLS)
    for name, spec in ALL_SPECS.items():
        assert spec.name == name
        assert spec.input_schema.get("type") == "object"


@dataclass
class Echo:
    label: str
    seen: list[str] = field(default_factory=list)

    async def run(self, agent: str, conversation_id: str, call: ToolCall) -> ToolResult:
        self.seen.append(call.name)
        return ToolResult(call.call_id, f"{self.label}:{call.name}")


async def test_calls_go_to_the_runner_of_their_tool() -> None:
    files, board = Echo("files"), Echo("board")
    toolbox = Toolbox.of(
        (files, {"read_file": ToolSpec("read_file", "")}),
        (board, {"task_get": ToolSpec("task_get", "")}),
    )
    assert (await toolbox.run("a", "c", ToolCall("1", "read_file"))).output == "files:read_file"
    assert (await toolbox.run("a", "c", ToolCall("2", "task_get"))).output == "board:task_get"
    unknown = await toolbox.run("a", "c", ToolCall("3", "rm_rf"))
    assert unknown.is_error
    assert unknown.output == "unknown tool 'rm_rf'"
