"""The handlers' tables: one parser per webhook event and action the App acts on, keyed by
both (bot/handlers/payloads.py), so no delivery is read by two parsers or by none."""

from __future__ import annotations

from bot.handlers.payloads import HANDLED_EVENTS, PARSERS
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
