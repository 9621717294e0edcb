"""Which reviews start a round, and what a round takes from the review threads: pure
decisions on the real `pull_request_review.submitted` payload (octokit's example) and on
threads as bot.github.reviews reads them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from conftest import Load

from bot.github.reviews import ReviewThread, ThreadComment
from bot.handlers.actions import Ignore, Later
from bot.handlers.deliveries import CommentAdded, ReviewSubmitted
from bot.handlers.payloads import Ignored, parse_command
from bot.handlers.review import (
    ReviewFacts,
    decide_pull_comment,
    decide_review,
    gather,
    rest_threads,
)
from orchestrator.api import Point

APP = "teaparty[bot]"
NOW = 1_700_000_000.0


def review(payload: Load, state: str, body: str | None = None, login: str = "alice") -> Any:
    data = payload("pull_request_review.submitted")
    data["review"].update(state=state, body=body)
    data["review"]["user"].update(login=login, type="User")
    return parse_command("pull_request_review", data, app_login=APP)


def facts(**more: Any) -> ReviewFacts:
    return replace(ReviewFacts(7, "write", 0, APP, 90.0, NOW), **more)


def test_the_payload_is_read_with_its_pull_request_and_review(payload: Load) -> None:
    command = review(payload, "changes_requested", "Please fix.")
    assert isinstance(command, ReviewSubmitted)
    assert (command.pull_number, command.review_id, command.head_ref) == (2, 237895671, "changes")
    assert (command.state, command.body, command.author.login) == (
        "changes_requested",
        "Please fix.",
        "alice",
    )


def test_changes_requested_by_a_writer_starts_a_round(payload: Load) -> None:
    assert decide_review(review(payload, "changes_requested"), facts()) is None


@pytest.mark.parametrize("state", ["approved", "dismissed"])
def test_approved_and_dismissed_reviews_start_nothing(payload: Load, state: str) -> None:
    decided = decide_review(review(payload, state, "LGTM"), facts(comments=2))
    assert isinstance(decided, Ignore)
    assert state in decided.reason


def test_a_reader_starts_nothing(payload: Load) -> None:
    decided = decide_review(
        review(payload, "changes_requested", login="mallory"), facts(permission="read")
    )
    assert isinstance(decided, Ignore)
    assert "no write access" in decided.reason


def test_bots_and_the_app_itself_start_nothing(payload: Load) -> None:
    data = payload("pull_request_review.submitted")
    data["review"]["user"].update(login="dependabot[bot]", type="Bot")
    assert isinstance(parse_command("pull_request_review", data, app_login=APP), Ignored)
    data["review"]["user"].update(login=APP, type="Bot")
    assert isinstance(parse_command("pull_request_review", data, app_login=APP), Ignored)


def test_a_pull_request_of_no_job_starts_nothing(payload: Load) -> None:
    decided = decide_review(review(payload, "changes_requested"), facts(job_id=None))
    assert isinstance(decided, Ignore)


def test_a_comment_review_starts_a_round_with_inline_comments_or_a_mention(payload: Load) -> None:
    assert isinstance(decide_review(review(payload, "commented", "Nice."), facts()), Ignore)
    assert decide_review(review(payload, "commented", "Two things."), facts(comments=2)) is None
    assert decide_review(review(payload, "commented", "@TeaParty please"), facts()) is None


def test_a_lone_comment_waits_out_the_window_then_starts_a_round(payload: Load) -> None:
    lone = replace(review(payload, "commented"), submitted_at=NOW - 30)
    decided = decide_review(lone, facts(comments=1))
    assert isinstance(decided, Later)
    assert decided.after_s == pytest.approx(60.0)
    assert decide_review(lone, facts(comments=1, now=NOW + 61)) is None


def comment(
    cid: int, author: str | None, body: str = "text", hunk: str = "@@ -1 +1 @@"
) -> ThreadComment:
    return ThreadComment(cid, author, body, "2026-01-01T00:00:00Z", None, hunk)


def thread(tid: str, *comments: ThreadComment, resolved: bool = False) -> ReviewThread:
    return ReviewThread(tid, resolved, False, "app.py", 3, 3, comments)


def test_only_open_threads_a_writer_wrote_in_since_they_were_handled_are_taken(
    payload: Load,
) -> None:
    command = review(payload, "changes_requested", "Body.")
    threads = [
        thread("T1", comment(1, "alice"), resolved=True),  # resolved: the reviewer's act
        thread("T2", comment(2, "alice"), comment(5, APP)),  # answered, nobody wrote since
        thread("T3", comment(3, "alice"), comment(6, APP), comment(8, "alice", "Not yet.")),
        thread("T4", comment(4, "alice")),  # handled by a round (the store says 4)
        thread("T5", comment(7, "mallory")),  # not a writer
        thread("T6", comment(9, "bob", "Also this.")),
    ]
    said = Point(f"review:{command.review_id}", "alice", command.body)
    points = gather(said, threads, {"T4": 4}, app_login=APP, writers={"alice", "bob"})
    assert [p.source for p in points] == [
        f"review:{command.review_id}",
        "thread:T3:8",
        "thread:T6:9",
    ]
    assert points[1].body == "Not yet."
    assert (points[1].thread_id, points[1].comment_id, points[1].path) == ("T3", 8, "app.py")


def test_rest_threads_are_all_open_and_grouped_by_their_first_comment() -> None:
    rest = [
        {
            "id": 1,
            "user": {"login": "alice"},
            "body": "a",
            "path": "x.py",
            "line": 2,
            "original_line": 2,
            "diff_hunk": "@@",
        },
        {
            "id": 2,
            "user": {"login": "bob"},
            "body": "b",
            "path": "y.py",
            "line": None,
            "original_line": 9,
            "diff_hunk": "@@",
        },
        {
            "id": 3,
            "user": {"login": APP},
            "body": "c",
            "in_reply_to_id": 1,
            "path": "x.py",
            "line": 2,
            "diff_hunk": "@@",
        },
    ]
    found = rest_threads(rest)
    assert [(t.thread_id, t.resolved, t.outdated) for t in found] == [
        ("rest:1", False, False),
        ("rest:2", False, True),
    ]
    assert [c.comment_id for c in found[0].comments] == [1, 3]


def pull_comment(payload: Load, body: str, *, login: str = "alice") -> CommentAdded:
    data = payload("issue_comment.created.on-pull-request")
    data["comment"].update(body=body, created_at="2023-11-14T22:13:20Z")
    data["comment"]["user"].update(login=login, type="User")
    command = parse_command("issue_comment", data, app_login=APP)
    assert isinstance(command, CommentAdded)
    return command


def test_a_pull_request_comment_asks_for_a_round_with_teaparty_or_a_mention(
    payload: Load,
) -> None:
    due = facts(now=1_700_000_000.0 + 91)  # the comment was written at 1_700_000_000
    assert decide_pull_comment(pull_comment(payload, "/teaparty also fix the docs"), due) is None
    assert decide_pull_comment(pull_comment(payload, "@TeaParty, the docs?"), due) is None
    quiet = decide_pull_comment(pull_comment(payload, "Looks good to me"), due)
    assert isinstance(quiet, Ignore)
    assert "neither says /teaparty" in quiet.reason


def test_a_pull_request_comment_waits_out_the_window_and_needs_write_access(
    payload: Load,
) -> None:
    early = decide_pull_comment(
        pull_comment(payload, "/teaparty fix it"), facts(now=1_700_000_000.0 + 30)
    )
    assert isinstance(early, Later)
    assert early.after_s == pytest.approx(60.0)
    reader = decide_pull_comment(
        pull_comment(payload, "/teaparty fix it", login="mallory"),
        facts(permission="read", now=1_700_000_000.0 + 91),
    )
    assert isinstance(reader, Ignore)
    assert "no write access" in reader.reason
