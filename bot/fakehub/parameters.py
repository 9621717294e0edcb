"""Check a request's path and query parameters against its operation's description.

Each documented `in: path` and `in: query` parameter is read per its schema's type (values
arrive as strings: "30" is the integer 30, "abc" is no integer), then checked for type,
`enum`, `minimum`/`maximum` and `format: date-time`, which GitHub documents as ISO 8601
(`YYYY-MM-DDTHH:MM:SSZ`; RFC 3339, so an offset or a fraction is fine, a space is not).

What GitHub would refuse is answered as it answers: a path parameter that does not fit finds
no route (404), a query value that does not fit is 422 "Validation Failed". A query
parameter the description does not name is only recorded: GitHub ignores it, so the request
goes on, but the caller believes it matters and GitHub will not honour it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

from bot.fakehub.openapi import OpenAPI, Operation, Schema
from bot.fakehub.routes import Call
from bot.fakehub.state import not_found, validation_failed

_DATE_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")
_INTEGER = re.compile(r"[+-]?\d+")
_BOOLEANS = {"true": True, "false": False}
_CHECKED = ("path", "query")  # header and cookie parameters are left unchecked


class _Unreadable(ValueError):
    """A value that cannot be read as its schema's type."""


def check_parameters(
    operation: Operation, call: Call, *, spec: OpenAPI, on_violation: Callable[[str], None]
) -> None:
    """Report each parameter of `call` that departs from the description to `on_violation`;
    raise HubError as GitHub answers when it would refuse the request."""
    query = call.query
    given = {"path": call.params, "query": query}
    wrong: dict[str, list[tuple[str, str]]] = {"path": [], "query": []}
    for place, name, message in _departures(spec, operation, given):
        on_violation(f"{operation.operation_id} {place} parameter {name}: {message}")
        if place in wrong:
            wrong[place].append((name, message))
    if wrong["path"]:
        raise not_found()
    if wrong["query"]:
        raise validation_failed(*(_error(name, query, m) for name, m in wrong["query"]))


def _departures(
    spec: OpenAPI, operation: Operation, given: Mapping[str, Mapping[str, str]]
) -> Iterator[tuple[str, str, str]]:
    """(where, name, what is wrong) for every parameter that does not fit; `where` is
    `undocumented query` for a query parameter the description does not name."""
    documented = {(p["in"], p["name"]) for p in operation.parameters}
    for parameter in operation.parameters:
        place, name = parameter["in"], parameter["name"]
        if place not in _CHECKED:
            continue
        if name not in given[place]:
            if parameter.get("required"):
                yield place, name, "required, not given"
            continue
        for message in value_errors(spec, parameter.get("schema", {}), given[place][name]):
            yield place, name, message
    for name in given["query"]:
        if ("query", name) not in documented:
            yield "undocumented query", name, "not in the description (GitHub ignores it)"


def value_errors(spec: OpenAPI, schema: Schema, raw: str) -> list[str]:
    """Every way the parameter value `raw` departs from `schema`, once read as its type."""
    schema = spec.resolve(schema)
    try:
        value = _read(schema.get("type"), raw)
    except _Unreadable:
        return [f"{raw!r} is not {_a(schema['type'])}"]
    errors = [e.removeprefix("value: ") for e in spec.validate(schema, value, where="value")]
    return errors + _bounds(schema, value) + _format(schema, value)


def _read(kind: object, raw: str) -> Any:
    """`raw` as a value of JSON type `kind` (strings for other types, or none)."""
    if kind == "integer" and _INTEGER.fullmatch(raw):
        return int(raw)
    if kind == "number":
        try:
            number = float(raw)
        except ValueError:
            raise _Unreadable(raw) from None
        if math.isfinite(number):
            return number
    if kind == "boolean" and raw in _BOOLEANS:
        return _BOOLEANS[raw]
    if kind in ("integer", "number", "boolean"):
        raise _Unreadable(raw)
    return raw


def _bounds(schema: Schema, value: object) -> list[str]:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return []
    errors = []
    if "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{value} is less than the minimum {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        errors.append(f"{value} is more than the maximum {schema['maximum']}")
    return errors


def _format(schema: Schema, value: object) -> list[str]:
    if schema.get("format") != "date-time" or not isinstance(value, str):
        return []
    if _DATE_TIME.fullmatch(value):
        try:
            datetime.fromisoformat(value)  # a month 13 matches the pattern
            return []
        except ValueError:
            pass
    return [f"{value!r} is not an ISO 8601 time (YYYY-MM-DDTHH:MM:SSZ)"]


def _error(name: str, query: Mapping[str, str], message: str) -> dict[str, Any]:
    """One entry of a `validation-error` body, as GitHub words a bad field."""
    entry: dict[str, Any] = {"field": name, "code": "invalid", "message": message}
    if name in query:
        entry["value"] = query[name]
    else:
        entry["code"] = "missing_field"
    return entry


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"
