"""The expression evaluator of tests/actions_expressions.py: GitHub's rules for the subset,
and a refusal for everything outside it."""

from __future__ import annotations

import math
from typing import Any

import pytest
from actions_expressions import ExpressionError, equal, evaluate, job_runs, truthy

EVENT: dict[str, Any] = {
    "action": "labeled",
    "label": {"name": "TeaParty"},
    "issue": {"number": 7, "locked": False, "labels": [{"name": "bug"}, {"name": "teaparty"}]},
    "sender": {"login": "octocat", "type": "User"},
    "comment": None,
}


def value(expression: str, event: dict[str, Any] | None = None) -> Any:
    return evaluate(expression, event_name="issues", event=EVENT if event is None else event)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # precedence: ! over ==, == over &&, && over ||
        ("'a' == 'b' || 'c' == 'c'", True),
        ("'x' || 'y' && ''", "x"),
        ("('x' || 'y') && ''", ""),
        ("!'' == !''", True),
        ("!('a' == 'a')", False),
        ("!github.event.missing", True),
        # && and || return an operand, as in `x || 'default'`
        ("github.event.missing || 'default'", "default"),
        ("github.event.label.name && 'then'", "then"),
        ("github.event.missing && 'then'", None),
        # strings compare ignoring case; a literal's '' is a quote
        ("github.event.label.name == 'teaparty'", True),
        ("github.event.label.name != 'TEAPARTY'", False),
        ("'it''s' == 'IT''S'", True),
        # missing properties, and properties of null, are null; null != a string
        ("github.event.comment.user.login == 'x'", False),
        ("github.event.comment.user.login != 'x'", True),
        ("github.event.nothing.at.all == github.event.missing", True),
        ("github.event_name == 'ISSUES'", True),
        # the object filter maps property access over its items
        ("contains(github.event.issue.labels.*.name, 'TEAPARTY')", True),
        ("contains(github.event.issue.labels.*.name, 'tea')", False),  # elements, not text
        ("contains(github.event.pull_request.labels.*.name, 'teaparty')", False),  # of null
        ("contains(github.event.issue.*.*.name, 'bug')", True),  # filters flatten
        ("contains(github.event.sender.*, 'USER')", True),  # an object's values
        # string functions cast to strings and ignore case
        ("contains('Please /TeaParty fix it', '/teaparty')", True),
        ("contains(github.event.comment.body, '/teaparty')", False),  # null is ''
        ("startsWith('TeaParty/job-1-x', 'teaparty/')", True),
        ("startsWith(github.event.missing, 'teaparty/')", False),
        ("contains(github.event.issue.locked, 'FALSE')", True),
        ("contains(github.event.issue.number, '7')", True),
        # loose equality across types goes through numbers
        ("github.event.issue.locked == github.event.missing", True),  # false == null: 0 == 0
        ("github.event.issue.labels == github.event.issue.labels", True),  # same instance
    ],
)
def test_the_subset_evaluates_as_github_does(expression: str, expected: Any) -> None:
    assert value(expression) == expected


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (None, None, True),
        (True, 1, True),  # mismatched types compare as numbers
        ("1.5", 1.5, True),
        ("", 0, True),  # the empty string is 0
        ("teaparty", None, False),  # NaN against 0
        ("0x1", 1, False),  # only JSON's number syntax
        (math.nan, math.nan, False),
        ({"a": 1}, {"a": 1}, False),  # objects and arrays: the same instance only
        ([], [], False),
    ],
)
def test_equality_follows_githubs_conversions(left: Any, right: Any, expected: bool) -> None:
    assert equal(left, right) is expected


def test_truthiness_follows_github() -> None:
    values = (None, False, 0, -0.0, math.nan, "", [], {}, "0", "false")
    assert [truthy(v) for v in values] == [*[False] * 6, *[True] * 4]


@pytest.mark.parametrize(
    "expression",
    [
        "github.event.issue.number == 7",  # numbers
        "github.event.issue.locked == false",  # booleans
        "github.event.label.name == null",
        "github.actor == 'octocat'",  # a github property this evaluator is not given
        "secrets.TOKEN != ''",  # other contexts
        "inputs.label == 'teaparty'",
        "format('{0}', 'a') == 'a'",  # other functions
        "always()",
        "endsWith('a', 'a')",
        "contains('a')",  # wrong arity
        "github.event['label'] == 'x'",  # index syntax
        "github.event.issue.labels[0].name == 'bug'",
        "'a' < 'b'",
        "'a' == 'a' == 'a'",  # chained comparison
        "'unterminated",
        "'a' 'b'",  # trailing tokens
        "github.event.'label'",
        "github.event.(label)",
        "(github.event_name == 'issues'",
        "contains(github.event.issue, 'x')",  # casting an object to a string
        "",
    ],
)
def test_anything_outside_the_subset_is_refused(expression: str) -> None:
    with pytest.raises(ExpressionError):
        value(expression)


def test_a_job_condition_may_be_wrapped_whole_but_not_in_pieces() -> None:
    assert job_runs("${{ github.event_name == 'issues' }}", event_name="issues", event=EVENT)
    assert not job_runs("github.event.missing", event_name="issues", event=EVENT)
    with pytest.raises(ExpressionError):
        job_runs("${{ 'a' }} == ${{ 'a' }}", event_name="issues", event=EVENT)
