"""The stand-in checks requests and responses against GitHub's trimmed OpenAPI description."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from bot.fakehub.openapi import OpenAPI

# -- the schema checker -----------------------------------------------------------------


DOC = {
    "paths": {},
    "components": {
        "schemas": {
            "user": {
                "type": "object",
                "required": ["login"],
                "properties": {"login": {"type": "string"}, "id": {"type": "integer"}},
            },
            "nullable-user": {"$ref": "#/components/schemas/user", "nullable": True},
        }
    },
}


@pytest.mark.parametrize(
    ("schema", "value", "errors"),
    [
        (
            {"type": "object", "properties": {"user": {"$ref": "#/components/schemas/user"}}},
            {"user": {"login": None}},
            ["response.user.login: expected string, got null"],
        ),
        (
            {"$ref": "#/components/schemas/user"},
            {},
            ["response.login: required property is missing"],
        ),
        ({"$ref": "#/components/schemas/nullable-user"}, None, []),
        ({"type": "string", "nullable": True}, None, []),
        ({"type": "integer"}, True, ["response: expected integer, got boolean"]),
        (
            {"type": "array", "minItems": 1, "items": {"type": "string"}},
            [],
            ["response: expected at least 1 items, got 0"],
        ),
        (
            {"type": "array", "items": {"type": "string"}},
            ["a", 1],
            ["response[1]: expected string, got integer"],
        ),
        (
            {"type": "object", "additionalProperties": {"type": "string"}},
            {"a": "x", "b": 2},
            ["response.b: expected string, got integer"],
        ),
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, 3, []),
        (
            {"oneOf": [{"type": "number"}, {"type": "integer"}]},
            3,
            ["response: matches 2 alternatives of oneOf, expected exactly one"],
        ),
        ({"anyOf": [{"type": "number"}, {"type": "integer"}]}, 3, []),
        (
            {"anyOf": [{"type": "string"}]},
            3,
            ["response: matches none of anyOf (response: expected string, got integer)"],
        ),
        (
            {"allOf": [{"$ref": "#/components/schemas/user"}, {"required": ["id"]}]},
            {"login": "a"},
            ["response.id: required property is missing"],
        ),
        ({"enum": ["a", "b"]}, "c", ["response: 'c' is not one of ['a', 'b']"]),
        ({"type": "string", "format": "uri", "pattern": "^x$"}, "anything", []),
    ],
)
def test_schema_checker(schema: dict[str, Any], value: object, errors: list[str]) -> None:
    assert OpenAPI(DOC).validate(schema, value, where="response") == errors


def test_bundled_description_matches_paths_to_operations() -> None:
    spec = OpenAPI.bundled()
    matched = spec.match("PATCH", "/repos/o/r/issues/comments/5")
    assert matched
    assert matched[0].operation_id == "issues/update-comment"
    matched = spec.match("GET", "/repos/o/r/contents/a/b/c.md")
    assert matched
    assert (matched[0].operation_id, matched[1]["path"]) == (
        "repos/get-content",
        "a/b/c.md",
    )
    assert spec.match("GET", "/repos/o/r/issues/comments/5") is None
    matched = spec.match("GET", "/repos/o/r/branches/teaparty/job-1-fix")  # a name with a `/`
    assert matched
    assert (matched[0].operation_id, matched[1]["branch"]) == (
        "repos/get-branch",
        "teaparty/job-1-fix",
    )
    assert len(spec.operations) == 32


def test_trim_keeps_referenced_components_and_drops_documentation() -> None:
    loader = importlib.util.spec_from_file_location(
        "trim_openapi", Path(__file__).parent.parent / "tools" / "trim_openapi.py"
    )
    assert loader
    assert loader.loader
    trim_openapi = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(trim_openapi)
    ok = {"$ref": "#/components/schemas/thing"}
    full = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1.2.3"},
        "paths": {
            f"/{op}": {
                "get": {
                    "operationId": op,
                    "description": "d",
                    "responses": {
                        "200": {"description": "x", "content": {"application/json": {"schema": ok}}}
                    },
                }
            }
            for op in trim_openapi.OPERATIONS
        }
        | {"/other": {"get": {"operationId": "other", "responses": {}}}},
        "components": {
            "schemas": {
                "thing": {
                    "description": "doc",
                    "example": 1,
                    "properties": {"description": {"$ref": "#/components/schemas/leaf"}},
                },
                "leaf": {"type": "string"},
                "unused": {"type": "string"},
            },
            "examples": {"thing": {"value": 1}},
        },
    }
    trimmed = trim_openapi.trim(full, source_name="full.json")
    assert set(trimmed["components"]["schemas"]) == {"thing", "leaf"}
    assert trimmed["components"]["schemas"]["thing"] == {
        "properties": {"description": {"$ref": "#/components/schemas/leaf"}}
    }
    assert "/other" not in trimmed["paths"]
    assert "examples" not in trimmed["components"]
    assert trimmed["info"]["version"] == "1.2.3"
    assert trimmed["x-trimmed-from"].startswith("full.json")
