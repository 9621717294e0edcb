"""The tool kit: a tool as the model sees it (`ToolSpec`), and tool inputs as pydantic
models: the schema the model sees and the check of a call, in one.

A tool declares its arguments once (`ToolInput` subclass, fields with descriptions); `spec`
derives the JSON schema sent to the model from it (titles and null branches dropped, so it
stays as compact as a hand-written one), and `parse` checks a call against the same class
(strict types, no unknown arguments; null counts as absent). A call that fails comes back
to the model as a ToolError naming the tool and the field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from orchestrator.core.errors import ToolError


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model sees it: a name, what it does, and a JSON schema for its input."""

    name: str
    description: str
    input_schema: Mapping[str, Any] = field(default_factory=dict)


def object_spec(
    name: str, description: str, required: list[str], **props: Mapping[str, Any]
) -> ToolSpec:
    """A tool whose input is an object with these properties and nothing else."""
    schema = {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }
    return ToolSpec(name, description, schema)


class ToolInput(BaseModel):
    """A tool's arguments."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def choice(options: Sequence[str]) -> AfterValidator:
    """Limit a string field to `options` (give its Field `json_schema_extra=enum(options)`)."""

    def check(value: str) -> str:
        if value not in options:
            raise ValueError(f"must be one of {list(options)}")
        return value

    return AfterValidator(check)


def _no_nul(value: str) -> str:
    if "\0" in value:
        raise ValueError("contains a NUL character")
    return value


no_nul = AfterValidator(_no_nul)
"""For a string that names something (a path, a pattern): a NUL in it is refused."""


def enum(options: Sequence[str]) -> dict[str, Any]:
    """The schema's `enum` for a `choice` field."""
    return {"enum": list(options)}


def spec(name: str, description: str, model: type[ToolInput]) -> ToolSpec:
    """The tool as the model sees it, its input schema derived from `model`."""
    schema = _compact(model.model_json_schema())
    schema["additionalProperties"] = False
    schema.setdefault("required", [])
    return ToolSpec(name, description, schema)


def parser(model: type[ToolInput]) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    """A function that checks a call's arguments against `model`: the given ones, checked."""

    def parse(tool: str, args: dict[str, Any]) -> dict[str, Any]:
        given = {key: value for key, value in args.items() if value is not None}
        try:
            return model.model_validate(given).model_dump(exclude_unset=True)
        except ValidationError as exc:
            raise ToolError(explain(tool, exc, given, sorted(model.model_fields))) from None

    return parse


_WANTS = {
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "bool_type": "must be true or false",
    "float_type": "must be a number",
    "list_type": "must be a list",
}


def explain(tool: str, exc: ValidationError, given: dict[str, Any], fields: list[str]) -> str:
    """One line for the model: the tool, the field, what it must be and what it was."""
    errors = exc.errors()
    tool = f"{tool}: " if tool else ""
    if extra := sorted(str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden"):
        return f"{tool}unknown arguments {extra}; it takes {fields}"
    if missing := [str(e["loc"][0]) for e in errors if e["type"] == "missing"]:
        return f"{tool}missing required arguments {missing}"
    error = errors[0]
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"])
    value = error.get("input")
    if error["type"] in _WANTS:
        return f"{tool}{where[1:]}: {_WANTS[error['type']]}, not {type(value).__name__}"
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "greater_than_equal":
        message = f"must be at least {error.get('ctx', {}).get('ge', 0):g}"
    elif error["type"] == "greater_than":
        message = f"must be greater than {error.get('ctx', {}).get('gt', 0):g}"
    return f"{tool}{where[1:]}: {message}, not {value!r}"


def _compact(node: Any) -> Any:
    """The schema without pydantic's titles, null branches and null defaults."""
    if isinstance(node, list):
        return [_compact(item) for item in node]
    if not isinstance(node, dict):
        return node
    branches = node.get("anyOf")
    if isinstance(branches, list):
        kept = [b for b in branches if b != {"type": "null"}]
        if len(kept) == 1:
            rest = {k: v for k, v in node.items() if k != "anyOf"}
            return _compact({**kept[0], **rest})
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" or (key == "default" and value is None):
            continue
        if key == "properties" and isinstance(value, dict):  # field names, kept as they are
            out[key] = {name: _compact(prop) for name, prop in value.items()}
        else:
            out[key] = _compact(value)
    return out
