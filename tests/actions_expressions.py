"""A GitHub Actions expression evaluator for exactly the subset the example caller's `if:` uses.

The subset: `==`, `!=`, `&&`, `||`, `!`, parentheses, single-quoted string literals,
`contains()`, `startsWith()`, and property access (with the `.*` object filter) under
`github.event_name` and `github.event`. Anything else (numbers, booleans, `<`, indexes,
other functions or contexts, `${{ }}` in the middle) raises ExpressionError, so a test fails
when someone writes an `if:` this file does not understand, instead of passing wrongly.

Semantics follow GitHub's documentation ("Evaluate expressions in workflows and actions"):
`!` binds tighter than `==`/`!=`, which bind tighter than `&&`, then `||`; `&&` and `||` return
an operand, not a boolean; equality is loose (mismatched types are compared as numbers: null
is 0, a string is its JSON number or NaN, an object or array is NaN) and strings compare
ignoring case; `contains` and `startsWith` ignore case and cast their arguments to strings
(`contains` on an array looks for an element). A missing property is null, and so is a
property of null. The implicit `success() &&` GitHub puts before a job's `if:` is true for a
job that needs nothing, which is the only kind this is used for.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Value = Any  # JSON values: None, bool, int, float, str, list, dict
_TOKEN = re.compile(
    r"\s*(?:(?P<string>'(?:[^']|'')*')|(?P<op>==|!=|&&|\|\||[!().,*])|(?P<name>[A-Za-z_][\w-]*))"
)
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_CONTEXT_KEYS = frozenset({"event_name", "event"})


class ExpressionError(ValueError):
    """The expression uses syntax, a function or a context this evaluator does not know."""


class Filtered(list[Value]):
    """The result of an object filter (`.*`): property access maps over its items."""


@dataclass(frozen=True)
class _Tok:
    kind: str  # "string", "op" or "name"
    text: str


def tokenize(source: str) -> list[_Tok]:
    """Split an expression into tokens, refusing any character outside the subset."""
    tokens: list[_Tok] = []
    at = 0
    while at < len(source):
        if source[at:].strip() == "":
            break
        match = _TOKEN.match(source, at)
        if match is None:
            raise ExpressionError(f"not understood at {source[at : at + 20]!r}")
        kind = match.lastgroup
        assert kind is not None
        tokens.append(_Tok(kind, match.group(kind)))
        at = match.end()
    return tokens


class _Parser:
    """Recursive descent over the subset; evaluates as it parses (no short-circuit needed:
    evaluating both sides has no side effects here)."""

    def __init__(self, tokens: list[_Tok], github: Mapping[str, Value]) -> None:
        self.tokens, self.at, self.github = tokens, 0, github

    def peek(self) -> _Tok | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, text: str | None = None) -> _Tok:
        token = self.peek()
        if token is None or (text is not None and token.text != text):
            raise ExpressionError(f"expected {text or 'more'}, found {token and token.text!r}")
        self.at += 1
        return token

    def accept(self, text: str) -> bool:
        token = self.peek()
        if token is not None and token.kind == "op" and token.text == text:
            self.at += 1
            return True
        return False

    def either(self) -> Value:
        value = self.both()
        while self.accept("||"):
            right = self.both()
            value = value if truthy(value) else right
        return value

    def both(self) -> Value:
        value = self.compare()
        while self.accept("&&"):
            right = self.compare()
            value = right if truthy(value) else value
        return value

    def compare(self) -> Value:
        left = self.unary()
        for op in ("==", "!="):
            if self.accept(op):
                right = self.unary()
                if (token := self.peek()) is not None and token.text in ("==", "!="):
                    raise ExpressionError("chained comparisons are not in the subset")
                return equal(left, right) == (op == "==")
        return left

    def unary(self) -> Value:
        if self.accept("!"):
            return not truthy(self.unary())
        return self.primary()

    def primary(self) -> Value:
        token = self.take()
        if token.kind == "string":
            return token.text[1:-1].replace("''", "'")
        if token.kind == "op" and token.text == "(":
            value = self.either()
            self.take(")")
            return value
        if token.kind == "name" and self.accept("("):
            return self.call(token.text)
        if token.kind == "name" and token.text == "github":
            return self.path()
        raise ExpressionError(f"{token.text!r} is not in the subset")

    def call(self, name: str) -> Value:
        function = _FUNCTIONS.get(name)
        if function is None:
            raise ExpressionError(f"function {name}() is not in the subset")
        args = [self.either()]
        while self.accept(","):
            args.append(self.either())
        self.take(")")
        if len(args) != 2:
            raise ExpressionError(f"{name}() takes two arguments, got {len(args)}")
        return function(args[0], args[1])

    def path(self) -> Value:
        self.take(".")
        key = self.take().text
        if key not in _CONTEXT_KEYS:
            raise ExpressionError(f"github.{key} is not in the subset")
        value: Value = self.github.get(key)
        while self.accept("."):
            if self.accept("*"):
                value = _filter(value)
                continue
            token = self.take()
            if token.kind != "name":
                raise ExpressionError(f"expected a property name, found {token.text!r}")
            value = _property(value, token.text)
        return value


def _filter(value: Value) -> Filtered:
    if isinstance(value, Filtered):  # `a.*.*`: the items of every item, one level flatter
        return Filtered(inner for item in value for inner in _filter(item))
    if isinstance(value, dict):
        return Filtered(value.values())
    return Filtered(value if isinstance(value, list) else [])  # null (or a scalar): nothing


def _property(value: Value, name: str) -> Value:
    if isinstance(value, Filtered):
        return Filtered(item[name] for item in value if isinstance(item, dict) and name in item)
    return value.get(name) if isinstance(value, dict) else None


def truthy(value: Value) -> bool:
    """GitHub's truthiness: false, 0, -0, NaN, '' and null are falsy; objects are truthy."""
    if isinstance(value, float) and math.isnan(value):
        return False
    return isinstance(value, (list, dict)) or value not in (None, False, 0, "")


def _number(value: Value) -> float:
    """GitHub's cast to a number, used when the two sides of `==` differ in type."""
    if value is None:
        return 0.0
    if isinstance(value, (bool, int, float)):
        return float(value)
    if isinstance(value, str):
        if value == "":
            return 0.0
        return float(value) if _JSON_NUMBER.fullmatch(value) else math.nan
    return math.nan  # objects and arrays


def equal(left: Value, right: Value) -> bool:
    """Loose equality: strings ignore case, mismatched types compare as numbers."""
    if isinstance(left, str) and isinstance(right, str):
        return left.casefold() == right.casefold()
    if isinstance(left, (list, dict)) or isinstance(right, (list, dict)):
        return left is right  # only the same instance
    if type(left) is type(right):
        return bool(left == right)
    return _number(left) == _number(right)


def text(value: Value) -> str:
    """GitHub's cast to a string, for the scalars this subset meets (null is '')."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, str)):
        return str(value)
    raise ExpressionError(f"casting a {type(value).__name__} to a string is not in the subset")


def _contains(search: Value, item: Value) -> bool:
    if isinstance(search, list):
        return any(equal(element, item) for element in search)
    return text(item).casefold() in text(search).casefold()


def _starts_with(search: Value, prefix: Value) -> bool:
    return text(search).casefold().startswith(text(prefix).casefold())


_FUNCTIONS: dict[str, Callable[[Value, Value], Value]] = {
    "contains": _contains,
    "startsWith": _starts_with,
}


def evaluate(expression: str, *, event_name: str, event: Mapping[str, Value]) -> Value:
    """The value of an expression in the subset, for one event's `github` context."""
    parser = _Parser(tokenize(expression), {"event_name": event_name, "event": event})
    value = parser.either()
    if (token := parser.peek()) is not None:
        raise ExpressionError(f"unexpected {token.text!r} after the expression")
    return value


def job_runs(condition: str, *, event_name: str, event: Mapping[str, Value]) -> bool:
    """Whether a job with this `if:` runs for the event (`${{ }}` around all of it allowed)."""
    body = condition.strip()
    if body.startswith("${{") and body.endswith("}}"):
        body = body[3:-2]
    if "${{" in body or "}}" in body:
        raise ExpressionError("${{ }} inside a job's if: is not in the subset")
    return truthy(evaluate(body, event_name=event_name, event=event))
