"""The handlers' tables: one parser per webhook event and action the App acts on, keyed by
both (bot/handlers/payloads.py), so no delivery is read by two parsers or by none; one
performer per action type (bot/handlers/perform.py), so every decision can be carried out."""

from __future__ import annotations

from typing import get_args

import pytest

from bot.handlers.actions import Action, Ignore, Later, PostOnce, Report
from bot.handlers.app_context import AppContext
from bot.handlers.payloads import HANDLED_EVENTS, PARSERS
from bot.handlers.perform import PERFORMERS, perform
from bot.manifest import DEFAULT_EVENTS

INSTALLATION_EVENTS = ("installation", "installation_repositories")  # every App gets these
ACTED_ON = {
    ("issues", "labeled"),
    ("issues", "edited"),
    ("issues", "closed"),
    ("issues", "unlabeled"),
    ("issue_comment", "created"),
    ("pull_request", "closed"),
    ("pull_request", "converted_to_draft"),
    ("pull_request", "ready_for_review"),
    ("pull_request", "reopened"),
    ("pull_request_review", "submitted"),
    ("check_suite", "completed"),
    ("workflow_run", "completed"),
    ("installation", "deleted"),
    ("installation_repositories", "removed"),
}


def test_each_event_and_action_acted_on_has_one_parser() -> None:
    assert set(PARSERS) == ACTED_ON


def test_every_event_the_app_subscribes_to_is_handled_and_every_parsed_one_subscribed() -> None:
    subscribed = {*DEFAULT_EVENTS, *INSTALLATION_EVENTS, "workflow_run"}  # runner mode's
    assert subscribed <= HANDLED_EVENTS
    assert {event for event, _ in PARSERS} <= HANDLED_EVENTS
    # a review's inline comments are read with their review; a ping has no action
    unparsed = HANDLED_EVENTS - {event for event, _ in PARSERS}
    assert unparsed == {"ping", "pull_request_review_comment"}


def test_each_action_type_has_one_performer() -> None:
    assert set(PERFORMERS) == set(get_args(Action))


async def test_a_decision_about_no_issue_only_says_what_came_of_it() -> None:
    nothing: AppContext = None  # type: ignore[assignment]  # neither action reaches it
    said = await perform(nothing, (Ignore("why", 3), Report("done")), repo=None, number=None)
    assert said == ("done", None)
    for action in (PostOnce("k", "body"), Later("not yet")):
        with pytest.raises(AssertionError, match="needs an issue"):
            await perform(nothing, (action,), repo=None, number=None)
