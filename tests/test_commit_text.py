"""The engine's commit message from a worker's reply: printable, bounded, closing nothing."""

from __future__ import annotations

import pytest

from orchestrator.teams.tools import _commit_text


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("Fixes #12.", "Fixes (reference only) #12."),
        ("closes: octo/widgets#3", "closes (reference only): octo/widgets#3"),
        (
            "Resolved https://github.com/o/r/issues/4",
            "Resolved (reference only) https://github.com/o/r/issues/4",
        ),
        ("This fixes a crash in #5's parser", "This fixes a crash in #5's parser"),
        ("bell\x07 and \x1b[31mred", "bell and [31mred"),
        ("", "(the worker gave no summary)"),
    ],
)
def test_a_reply_becomes_a_message_that_closes_no_issue(reply: str, message: str) -> None:
    assert _commit_text(reply) == message
