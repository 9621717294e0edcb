"""A tool's input model gives both the schema the model sees and the check of its calls."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import Field

from orchestrator.core.errors import ToolError
from orchestrator.core.tools import ToolInput, choice, enum, no_nul, parser, spec


class Example(ToolInput):
    path: Annotated[str, no_nul] = Field(description="where")
    kind: Annotated[str, choice(("a", "b"))] | None = Field(
        None, json_schema_extra=enum(("a", "b"))
    )
    numbers: list[int] | None = None
    depth: int | None = Field(None, ge=1)


def test_the_schema_is_as_compact_as_a_hand_written_one() -> None:
    assert spec("example", "An example.", Example).input_schema == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "where"},
            "kind": {"type": "string", "enum": ["a", "b"]},
            "numbers": {"type": "array", "items": {"type": "integer"}},
            "depth": {"type": "integer", "minimum": 1},
        },
        "required": ["path"],
        "additionalProperties": False,
    }


def test_a_call_is_checked_and_null_counts_as_absent() -> None:
    parse = parser(Example)
    assert parse("example", {"path": "x", "kind": None, "numbers": [1, 2]}) == {
        "path": "x",
        "numbers": [1, 2],
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "example: missing required arguments ['path']"),
        ({"path": "x", "mode": 1}, "example: unknown arguments ['mode']; it takes ['depth', "),
        ({"path": 3}, "example: path: must be a string, not int"),
        ({"path": "a\0b"}, "example: path: contains a NUL character, not 'a\\x00b'"),
        ({"path": "x", "kind": "c"}, "example: kind: must be one of ['a', 'b'], not 'c'"),
        ({"path": "x", "numbers": [1, True]}, "example: numbers[1]: must be an integer, not bool"),
        ({"path": "x", "depth": 0}, "example: depth: must be at least 1, not 0"),
    ],
)
def test_a_bad_call_names_the_tool_and_the_field(args: dict[str, object], message: str) -> None:
    with pytest.raises(ToolError) as caught:
        parser(Example)("example", args)
    assert str(caught.value).startswith(message)
