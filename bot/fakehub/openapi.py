"""Validate JSON values against the JSON-schema subset GitHub's OpenAPI 3.0.3 description uses.

Supported: `$ref` (to `#/components/...`), `type` with `nullable`, `required`, `properties`,
`items`, `enum`, `oneOf`/`anyOf`/`allOf` (with `discriminator`), `minItems`, `maxItems`,
`maxLength` (in characters, as GitHub counts a check run's output) and `additionalProperties`
when it is a schema. `format`, `pattern` and the documentation keywords
are ignored. Errors name the JSON path: `response.user.login: expected string, got null`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

Schema = Mapping[str, Any]

_METHODS = ("get", "put", "post", "patch", "delete", "head", "options")
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


def type_name(value: object) -> str:
    """The JSON type name of a decoded value, as used in error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    for name in ("integer", "number", "string", "object", "array"):
        if isinstance(value, _TYPES[name]):
            return name
    return type(value).__name__


def _has_type(value: object, expected: str) -> bool:
    if isinstance(value, bool):
        return expected == "boolean"
    return isinstance(value, _TYPES.get(expected, (object,)))


@dataclass(frozen=True)
class Operation:
    """One documented operation: where it lives and the schemas of its bodies."""

    operation_id: str
    method: str
    template: str
    pattern: re.Pattern[str]
    request_schema: Schema | None
    request_required: bool
    responses: Mapping[str, Schema | None]
    docs_url: str | None = None
    parameters: tuple[Schema, ...] = ()  # resolved; an operation's own replace its path's

    def response_schema(self, status: int) -> Schema | None:
        """The JSON schema documented for `status`, or None when the body is undocumented."""
        return self.responses.get(str(status))

    def documents(self, status: int) -> bool:
        """Whether the description lists `status` for this operation."""
        return str(status) in self.responses


@dataclass
class OpenAPI:
    """A loaded OpenAPI description: finds operations and validates values against schemas."""

    document: Mapping[str, Any]
    operations: list[Operation] = field(init=False)

    def __post_init__(self) -> None:
        self.operations = sorted(self._build_operations(), key=_specificity)

    @classmethod
    def bundled(cls) -> OpenAPI:
        """The trimmed description shipped in bot/fakehub/data/github-openapi.json."""
        data = resources.files("bot.fakehub").joinpath("data/github-openapi.json")
        text = data.read_text("utf-8")
        return cls(json.loads(text))

    def resolve(self, node: Schema) -> Schema:
        """Follow `$ref` chains to the referenced component."""
        while "$ref" in node:
            node = self._target(node["$ref"])
        return node

    def _target(self, ref: object) -> Schema:
        if not isinstance(ref, str) or not ref.startswith("#/components/"):
            raise ValueError(f"unsupported $ref {ref!r}")
        _, _, section, name = ref.split("/", 3)
        found: Schema = self.document["components"][section][name]
        return found

    def match(self, method: str, path: str) -> tuple[Operation, dict[str, str]] | None:
        """The operation serving `method path`, with its path parameters."""
        for operation in self.operations:
            if operation.method == method.lower() and (found := operation.pattern.fullmatch(path)):
                return operation, found.groupdict()
        return None

    def operation(self, operation_id: str) -> Operation:
        """The operation with this operationId; KeyError when it is not in the description."""
        for operation in self.operations:
            if operation.operation_id == operation_id:
                return operation
        raise KeyError(operation_id)

    def validate(self, schema: Schema, value: object, *, where: str) -> list[str]:
        """Every way `value` departs from `schema`; an empty list means it conforms."""
        return list(self._errors(schema, value, where))

    def _build_operations(self) -> Iterator[Operation]:
        for template, item in self.document["paths"].items():
            for method in _METHODS:
                if (op := item.get(method)) is None:
                    continue
                declared = [*item.get("parameters", []), *op.get("parameters", [])]
                by_place = {(p["in"], p["name"]): p for p in map(self.resolve, declared)}
                parameters = list(by_place.values())
                body = self.resolve(op["requestBody"]) if "requestBody" in op else None
                yield Operation(
                    operation_id=op["operationId"],
                    method=method,
                    template=template,
                    pattern=_compile(template, parameters),
                    request_schema=_json_schema(body) if body else None,
                    request_required=bool(body and body.get("required")),
                    responses={
                        status: _json_schema(self.resolve(response))
                        for status, response in op.get("responses", {}).items()
                    },
                    docs_url=op.get("externalDocs", {}).get("url"),
                    parameters=tuple(parameters),
                )

    def _errors(self, schema: Schema, value: object, where: str) -> Iterator[str]:
        if "$ref" in schema:
            if value is None and schema.get("nullable"):
                return
            yield from self._errors(self._target(schema["$ref"]), value, where)
            return
        if value is None and schema.get("nullable"):
            return
        if (expected := schema.get("type")) is not None and not _has_type(value, expected):
            yield f"{where}: expected {expected}, got {type_name(value)}"
            return
        if "enum" in schema and value not in schema["enum"]:
            yield f"{where}: {value!r} is not one of {schema['enum']!r}"
        if isinstance(value, str) and len(value) > schema.get("maxLength", len(value)):
            yield f"{where}: {len(value)} characters, at most {schema['maxLength']} allowed"
        yield from self._combinators(schema, value, where)
        if isinstance(value, dict):
            yield from self._object_errors(schema, value, where)
        if isinstance(value, list):
            yield from self._array_errors(schema, value, where)

    def _combinators(self, schema: Schema, value: object, where: str) -> Iterator[str]:
        for sub in schema.get("allOf", []):
            yield from self._errors(sub, value, where)
        if "anyOf" in schema:
            results = [self.validate(sub, value, where=where) for sub in schema["anyOf"]]
            if all(results):
                yield f"{where}: matches none of anyOf ({_closest(results)})"
        if "oneOf" in schema:
            yield from self._one_of(schema, value, where)

    def _one_of(self, schema: Schema, value: object, where: str) -> Iterator[str]:
        discriminator = schema.get("discriminator")
        if discriminator and isinstance(value, dict):
            tag = value.get(discriminator["propertyName"])
            if (ref := discriminator.get("mapping", {}).get(tag)) is not None:
                yield from self._errors({"$ref": ref}, value, where)
                return
        results = [self.validate(sub, value, where=where) for sub in schema["oneOf"]]
        matched = sum(not errors for errors in results)
        if matched == 0:
            yield f"{where}: matches none of oneOf ({_closest(results)})"
        elif matched > 1:
            yield f"{where}: matches {matched} alternatives of oneOf, expected exactly one"

    def _object_errors(self, schema: Schema, value: dict[str, Any], where: str) -> Iterator[str]:
        properties: Mapping[str, Schema] = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                yield f"{where}.{name}: required property is missing"
        extra = schema.get("additionalProperties")
        for name, item in value.items():
            if name in properties:
                yield from self._errors(properties[name], item, f"{where}.{name}")
            elif isinstance(extra, Mapping):
                yield from self._errors(extra, item, f"{where}.{name}")

    def _array_errors(self, schema: Schema, value: list[Any], where: str) -> Iterator[str]:
        if len(value) < schema.get("minItems", 0):
            yield f"{where}: expected at least {schema['minItems']} items, got {len(value)}"
        if len(value) > schema.get("maxItems", len(value)):
            yield f"{where}: expected at most {schema['maxItems']} items, got {len(value)}"
        if (items := schema.get("items")) is not None:
            for index, item in enumerate(value):
                yield from self._errors(items, item, f"{where}[{index}]")


def _closest(results: list[list[str]]) -> str:
    best = min(results, key=len)
    return "; ".join(best[:3]) + (" …" if len(best) > 3 else "")


def _json_schema(container: Schema) -> Schema | None:
    content = container.get("content", {})
    media = content.get("application/json")
    if media is None:
        media = next((m for t, m in content.items() if t.endswith("json")), None)
    return None if media is None else media.get("schema")


def _compile(template: str, parameters: list[Schema]) -> re.Pattern[str]:
    multi = {p["name"] for p in parameters if p.get("in") == "path" and p.get("x-multi-segment")}

    def group(found: re.Match[str]) -> str:
        name = found.group(1)
        return f"(?P<{name}>.+)" if name in multi else f"(?P<{name}>[^/]+)"

    return re.compile(re.sub(r"\\\{(\w+)\\\}", group, re.escape(template)))


def _specificity(operation: Operation) -> tuple[int, str]:
    # Literal segments win over parameters: /issues/comments/{id} before /issues/{number}.
    literal = sum(1 for part in operation.template.split("/") if part and "{" not in part)
    return (-literal, operation.template)
