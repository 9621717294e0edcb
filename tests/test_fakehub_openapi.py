"""The stand-in checks requests and responses against GitHub's trimmed OpenAPI description."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from bot.fakehub.openapi import OpenAPI
from bot.fakehub.parameters import check_parameters, value_errors
from bot.fakehub.routes import Call
from bot.fakehub.shapes import Urls
from bot.fakehub.state import HubError

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
            {"type": "array", "maxItems": 1, "items": {"type": "string"}},
            ["a", "b"],
            ["response: expected at most 1 items, got 2"],
        ),
        ({"type": "string", "maxLength": 3}, "abc", []),
        ({"type": "string", "maxLength": 3}, "abcd", ["response: 4 characters, at most 3 allowed"]),
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


# -- path and query parameters ----------------------------------------------------------

WHEN = {"type": "string", "format": "date-time"}
NOTHING_GIVEN = Call(params={}, query={}, body=None, token=None, urls=Urls("http://hub/", ""))


@pytest.mark.parametrize(
    ("schema", "raw", "errors"),
    [
        ({"type": "integer", "minimum": 1, "maximum": 100}, "100", []),
        ({"type": "integer", "minimum": 1}, "0", ["0 is less than the minimum 1"]),
        ({"type": "integer", "maximum": 100}, "101", ["101 is more than the maximum 100"]),
        ({"type": "integer"}, "3.5", ["'3.5' is not an integer"]),
        ({"type": "number", "maximum": 1.5}, "2.5", ["2.5 is more than the maximum 1.5"]),
        ({"type": "number"}, "nan", ["'nan' is not a number"]),
        ({"type": "number"}, "many", ["'many' is not a number"]),
        ({"type": "boolean"}, "true", []),
        ({"type": "boolean"}, "yes", ["'yes' is not a boolean"]),
        ({"oneOf": [{"type": "integer"}, {"type": "string"}]}, "ci.yml", []),
        ({"$ref": "#/components/schemas/user"}, "x", ["expected object, got string"]),
        (WHEN, "2026-11-27T23:30:59Z", []),
        (WHEN, "2026-11-27T23:30:59.507251-05:00", []),
        (WHEN, "2026-13-27T23:30:59Z", ["'2026-13-27T23:30:59Z' is not an ISO 8601 time"]),
        (WHEN, "2026-11-27T23:30Z", ["'2026-11-27T23:30Z' is not an ISO 8601 time"]),
        (WHEN, "2026-11-27", ["'2026-11-27' is not an ISO 8601 time"]),
        ({"type": "string", "format": "uri"}, "not a uri", []),
    ],
)
def test_a_parameter_value_is_read_as_its_type_then_checked(
    schema: dict[str, Any], raw: str, errors: list[str]
) -> None:
    found = value_errors(OpenAPI(DOC), schema, raw)
    assert [e.removesuffix(" (YYYY-MM-DDTHH:MM:SSZ)") for e in found] == errors


def test_a_required_query_parameter_left_out_is_a_missing_field() -> None:
    required = {"name": "q", "in": "query", "required": True, "schema": {"type": "string"}}
    header = {"name": "accept", "in": "header", "required": True, "schema": {"type": "string"}}
    doc = {
        "paths": {"/search": {"get": {"operationId": "search", "parameters": [required, header]}}},
        "components": {},
    }
    operation = OpenAPI(doc).operation("search")
    seen: list[str] = []
    with pytest.raises(HubError) as refused:
        check_parameters(operation, NOTHING_GIVEN, spec=OpenAPI(doc), on_violation=seen.append)
    assert refused.value.status == 422
    assert refused.value.body["errors"] == [
        {"field": "q", "code": "missing_field", "message": "required, not given"}
    ]
    assert seen == ["search query parameter q: required, not given"]


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
    assert len(spec.operations) == 42


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
