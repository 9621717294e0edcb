"""Read configuration YAML keeping a line for every key, and report problems as ConfigIssues."""

from __future__ import annotations

import difflib
import importlib.resources
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from orchestrator.core.errors import ConfigError, ConfigIssue

KeyPath = tuple[str | int, ...]
ModelT = TypeVar("ModelT", bound=BaseModel)

_MAX_DEPTH = 32  # deeper than any config we define; also stops self-referencing aliases
_FIXED = {
    "missing": "missing required key",
    "string_too_short": "must not be empty",
    "too_short": "needs at least one entry",
}
_TEMPLATES = {
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be at least {ge}",
    "less_than_equal": "must be at most {le}",
    "string_too_long": "must be at most {max_length} characters",
    "literal_error": "must be {expected}",
    "string_pattern_mismatch": "must match {pattern}",
}
_EXPECTED = {
    "string_type": "a string",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def dotted(path: KeyPath) -> str:
    """Spell a key path the way messages show it, e.g. ``workgroups[1].ref``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else part
    return out or "(top level)"


@dataclass(frozen=True)
class Document:
    """One parsed YAML file: its value and the line on which each key path starts."""

    source: str
    data: object
    lines: Mapping[KeyPath, int]

    def line(self, path: KeyPath) -> int | None:
        """Return the line of ``path``, or of its nearest ancestor present in the file."""
        for end in range(len(path), -1, -1):
            if (found := self.lines.get(path[:end])) is not None:
                return found
        return None

    def issue(self, path: KeyPath, message: str) -> ConfigIssue:
        """Make an issue located at ``path`` in this file."""
        return ConfigIssue(self.source, self.line(path), dotted(path), message)


def config_error(issues: Iterable[ConfigIssue]) -> ConfigError:
    """A ConfigError with ``issues`` in file and line order."""
    return ConfigError(tuple(sorted(issues, key=lambda issue: (issue.file, issue.line or 0))))


def parse_yaml(text: str, *, source: str) -> Document:
    """Parse YAML text whose top level must be a mapping; raise ConfigError otherwise."""
    try:
        lines, data = _compose_and_construct(text, source)
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, source, text) from exc
    doc = Document(source, data, lines)
    if not isinstance(data, dict):
        raise ConfigError((doc.issue((), f"expected a mapping of keys, got {describe(data)}"),))
    return doc


def _compose_and_construct(text: str, source: str) -> tuple[dict[KeyPath, int], object]:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:  # an empty file reads as an empty mapping
            return {}, {}
        # Map the lines before constructing: construction flattens `<<` merges in place.
        lines = _line_map(node, source)
        return lines, loader.construct_document(node)
    finally:
        loader.dispose()


def _syntax_error(exc: yaml.YAMLError, source: str, text: str) -> ConfigError:
    line, problem = None, str(exc)
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line = None if mark is None else mark.line + 1
        problem = exc.problem or exc.context or problem
    elif isinstance(exc, yaml.reader.ReaderError):
        line, problem = text[: exc.position].count("\n") + 1, exc.reason
    message = "invalid YAML: " + " ".join(problem.split())
    return ConfigError((ConfigIssue(source, line, "(syntax)", message),))


def _line_map(node: yaml.Node, source: str) -> dict[KeyPath, int]:
    lines: dict[KeyPath, int] = {}
    duplicates: list[ConfigIssue] = []
    _walk(node, (), lines, duplicates, source)
    if duplicates:
        raise ConfigError(tuple(duplicates))
    return lines


def read_text(path: Path, *, source: str | None = None) -> str:
    """Read a configuration file; an unreadable file is a ConfigError."""
    name = str(path) if source is None else source
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError((ConfigIssue(name, None, "", "file not found"),)) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError((ConfigIssue(name, None, "", f"cannot read: {exc}"),)) from exc


def read_yaml(path: Path, *, source: str | None = None) -> Document:
    """Read and parse one YAML file whose top level is a mapping."""
    name = str(path) if source is None else source
    return parse_yaml(read_text(path, source=name), source=name)


def _walk(
    node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int], dupes: list[ConfigIssue], src: str
) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if len(path) > _MAX_DEPTH:
        return
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            child = (*path, str(key_node.value))
            line = key_node.start_mark.line + 1
            if child in lines:
                dupes.append(ConfigIssue(src, line, dotted(child), "key appears twice"))
            lines[child] = line
            _walk(value_node, child, lines, dupes, src)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*path, index), lines, dupes, src)


def validate(
    model: type[ModelT], value: object, doc: Document, *, at: KeyPath = ()
) -> tuple[ModelT | None, list[ConfigIssue]]:
    """Validate ``value`` (found at ``at`` in ``doc``) as ``model``; return it or its issues."""
    try:
        return model.model_validate(value), []
    except ValidationError as exc:
        return None, [_issue(error, model, doc, at) for error in exc.errors()]


def _issue(error: ErrorDetails, model: type[BaseModel], doc: Document, at: KeyPath) -> ConfigIssue:
    loc = tuple(part for part in error["loc"] if part != "[key]")
    kind = error["type"]
    if kind in _FIXED:
        message = _FIXED[kind]
    elif kind == "extra_forbidden":
        message = _unknown_key(str(loc[-1]), _fields_at(model, loc))
    elif kind in _EXPECTED:
        message = f"expected {_EXPECTED[kind]}, got {describe(error['input'])}"
    elif kind in _TEMPLATES:
        message = (
            f"{_TEMPLATES[kind].format(**error.get('ctx', {}))}, got {describe(error['input'])}"
        )
    elif kind == "value_error":
        message = error["msg"].removeprefix("Value error, ")
    else:
        message = f"{error['msg'][:1].lower()}{error['msg'][1:]} (got {describe(error['input'])})"
    return doc.issue((*at, *loc), message)


def _unknown_key(key: str, allowed: tuple[str, ...]) -> str:
    return unknown(key, allowed, "key")


def unknown(name: str, allowed: tuple[str, ...], what: str) -> str:
    """`name` is no known `what`: the message, with the closest known one and every one."""
    close = difflib.get_close_matches(name, allowed, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown {what}; {hint}allowed {what}s: {', '.join(allowed)}"


def _fields_at(model: type[BaseModel], loc: KeyPath) -> tuple[str, ...]:
    """Names the model accepts at the mapping that holds ``loc[-1]``."""
    current = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(part)
        inner = None if field is None else _model_in(field.annotation)
        if inner is None:
            return ()
        current = inner
    return tuple(f.alias or name for name, f in current.model_fields.items())


def _model_in(annotation: object) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        if (found := _model_in(arg)) is not None:
            return found
    return None


def describe(value: object) -> str:
    """Name a YAML value briefly for a message: its kind, or the value when short."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return str(value).lower()
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def shipped_org_dir() -> Path:
    """The default organisation shipped inside the distribution as ``teaparty_config``."""
    root = importlib.resources.files("teaparty_config")
    if not isinstance(root, Path):  # a zipped install; we only ship wheels that unpack
        raise ConfigError((ConfigIssue(str(root), None, "", "not installed as plain files"),))
    return root
