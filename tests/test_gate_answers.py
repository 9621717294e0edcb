"""Answers at gates, from real `issue_comment` payloads: who may move a gate, how a reply
names it (a quote, a hash, the only open question), stale approvals, advice, refusals.

Pure decisions (`decide_comment`) and the comment reader (`parse_reply`); GitHub and the
store are not involved.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Load
from test_handler_decisions import COMMENT_ID, commented, gate, job, subject

from bot.github.tracking import clarify_body
from bot.handlers.actions import (
    Advise,
    AnswerGate,
    Control,
    Ignore,
    Override,
    PostOnce,
    React,
    Reassign,
)
from bot.handlers.commands import Command, parse_reply
from bot.handlers.deliveries import CommentAdded
from bot.handlers.issue_comment import CommentFacts, comment_ref, decide_comment
from bot.handlers.payloads import Ignored, parse_command

DECIDER = "octocat"
PLAN = gate(3, digest="3a" * 32)
OTHER = gate(5, digest="5b" * 32)
TAKEN = React("+1", comment_id=COMMENT_ID)
REFUSED = React("confused", comment_id=COMMENT_ID)


def facts(*gates: Any, access: str | None = "write", **more: Any) -> CommentFacts:
    return CommentFacts(
        job("active"), subject(DECIDER), gates=gates or (PLAN,), author_access=access, **more
    )


def by(payload: Load, body: str, login: str = DECIDER) -> CommentAdded:
    return commented(payload, body, login=login)


def answered(gate_id: int, text: str, login: str = DECIDER) -> AnswerGate:
    return AnswerGate(7, gate_id, text, answered_by=login, ref=comment_ref(COMMENT_ID))


def clarified(text: str) -> PostOnce:
    key = f"clarify:{COMMENT_ID}"
    return PostOnce(key, clarify_body(key, text))


# Naming the gate


def test_approve_as_the_only_open_question(payload: Load) -> None:
    assert decide_comment(by(payload, "/approve"), facts()) == (answered(3, "yes"), TAKEN)


def test_approve_by_quoting_the_question(payload: Load) -> None:
    body = "> **Question 5** from lead (`plan 5b5b5b5`):\n> Go?\n\n/approve"
    assert decide_comment(by(payload, body), facts(PLAN, OTHER)) == (answered(5, "yes"), TAKEN)


def test_approve_by_hash(payload: Load) -> None:
    assert decide_comment(by(payload, "/approve 3a3a3a3"), facts(PLAN, OTHER)) == (
        answered(3, "yes"),
        TAKEN,
    )


def test_a_quote_of_the_hash_alone_names_the_gate(payload: Load) -> None:
    body = "> (`plan 5b5b5b5`)\nyes, but keep it short"
    assert decide_comment(by(payload, body), facts(PLAN, OTHER)) == (
        answered(5, "yes, but keep it short"),
        TAKEN,
    )


def test_an_ambiguous_reply_gets_a_question_not_a_guess(payload: Load) -> None:
    actions = decide_comment(by(payload, "/approve"), facts(PLAN, OTHER))
    why = "more than one question is open, and this reply does not say which it answers."
    text = (
        f"@{DECIDER}, {why}\n\nOpen questions:\n- Question 3: `/approve 3a3a3a3`\n"
        "- Question 5: `/approve 5b5b5b5`\n\nQuote the question you answer, or name it by its hash."
    )
    assert actions == (clarified(text), Ignore(f"comment {COMMENT_ID}: {why}", 7))
    assert not any(isinstance(a, AnswerGate) for a in actions)


# Stale approvals


def test_an_approval_of_a_hash_no_open_question_has_is_stale(payload: Load) -> None:
    actions = decide_comment(by(payload, "/approve 9c9c9c9"), facts(PLAN))
    assert not any(isinstance(a, AnswerGate) for a in actions)
    post = actions[0]
    assert isinstance(post, PostOnce)
    assert "`9c9c9c9` is not the hash of an open question" in post.body
    assert "`/approve 3a3a3a3`" in post.body


def test_a_bare_approve_written_before_the_content_changed_is_stale(payload: Load) -> None:
    command = by(payload, "/approve")
    assert command.created_at is not None
    changed = gate(3, digest="3a" * 32, hashed_at=command.created_at + 60)
    actions = decide_comment(command, facts(changed))
    assert not any(isinstance(a, AnswerGate) for a in actions)
    post = actions[0]
    assert isinstance(post, PostOnce)
    assert "changed after your approval was written, so it is stale" in post.body
    assert "`/approve 3a3a3a3`" in post.body


# The other commands


@pytest.mark.parametrize(
    ("body", "answer"),
    [
        ("/reject", "no"),
        ("/reject too risky for a Friday", "no (too risky for a Friday)"),
        ("/revise split the migration out", "revise: split the migration out"),
        ("  /APPROVE  ", "yes"),
    ],
)
def test_reject_and_revise_carry_their_reason(payload: Load, body: str, answer: str) -> None:
    assert decide_comment(by(payload, body), facts()) == (answered(3, answer), TAKEN)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("/revise", "`/revise` needs what to change: `/revise <what>`."),
        ("/approve later", "`later` is not a question's hash."),
        ("/decider", "`/decider` needs a login: `/decider @someone`."),
        ("/frobnicate now", "/frobnicate: no such command"),
        ("/approve cancel", "there is none to cancel"),
    ],
)
def test_a_command_that_cannot_be_taken_says_why(payload: Load, body: str, why: str) -> None:
    actions = decide_comment(by(payload, body), facts())
    post = actions[0]
    assert isinstance(post, PostOnce)
    assert why in post.body
    assert not any(isinstance(a, AnswerGate) for a in actions)


def test_words_echoed_back_cannot_mention_or_format(payload: Load) -> None:
    post = decide_comment(by(payload, "/approve @everyone **now** `x`"), facts())[0]
    assert isinstance(post, PostOnce)
    assert "`` @everyone **now** `x` `` is not a question's hash." in post.body


def test_the_decider_hands_a_gate_to_another_writer(payload: Load) -> None:
    assert decide_comment(by(payload, "/decider @hubot"), facts()) == (
        Reassign(7, 3, "hubot", by=DECIDER),
        TAKEN,
    )


def test_a_handed_gate_is_answered_by_its_new_decider_only(payload: Load) -> None:
    handed = gate(3, digest="3a" * 32)
    handed = type(handed)(**{**handed.__dict__, "decider": "hubot"})
    assert decide_comment(by(payload, "/approve", login="hubot"), facts(handed)) == (
        answered(3, "yes", "hubot"),
        TAKEN,
    )
    assert decide_comment(by(payload, "/approve"), facts(handed, access="admin")) == (
        REFUSED,
        Ignore(f"{DECIDER} may not answer gate 3", 7),
    )


# Who may answer


def test_a_strangers_command_gets_confused_and_moves_nothing(payload: Load) -> None:
    actions = decide_comment(by(payload, "/approve", login="mallory"), facts(access="read"))
    assert actions == (REFUSED, Ignore("mallory may not answer gate 3", 7))


def test_a_strangers_words_are_not_heard(payload: Load) -> None:
    actions = decide_comment(by(payload, "LGTM!", login="mallory"), facts(access=None))
    assert actions == (Ignore("mallory is not the decider", 7),)


def test_an_advisors_reply_is_advice_and_moves_nothing(payload: Load) -> None:
    command = by(payload, "Careful: the API is public.", login="hubot")
    actions = decide_comment(command, facts(advisors=frozenset({"hubot"}), access=None))
    assert actions == (
        Advise(7, 3, "Careful: the API is public.", advisor="hubot"),
        React("eyes", comment_id=COMMENT_ID),
    )


def test_an_advisors_approve_is_refused(payload: Load) -> None:
    command = by(payload, "/approve", login="hubot")
    actions = decide_comment(command, facts(advisors=frozenset({"hubot"}), access="write"))
    assert actions == (REFUSED, Ignore("hubot may not answer gate 3", 7))


def test_a_decider_without_write_access_is_told_once_and_admins_may_answer(
    payload: Load,
) -> None:
    actions = decide_comment(by(payload, "/approve"), facts(access="read"))
    key = "lost-access:3"
    body = (
        f"@{DECIDER} no longer has write access to this repository, so their reply does not "
        "answer question 3. A repository admin may answer it."
    )
    assert actions == (
        PostOnce(key, clarify_body(key, body)),
        REFUSED,
        Ignore(f"{DECIDER} no longer has write access", 7),
    )
    admin = facts(access="admin", decider_access="read")
    assert decide_comment(by(payload, "/approve", login="hubot"), admin) == (
        answered(3, "yes", "hubot"),
        TAKEN,
    )
    still = facts(access="admin", decider_access="write")
    assert decide_comment(by(payload, "/approve", login="hubot"), still)[0] == REFUSED


def test_the_apps_own_comment_and_edits_are_not_answers(payload: Load) -> None:
    data = payload("issue_comment.created.with-installation")
    data["comment"]["user"] |= {"login": "teaparty[bot]", "type": "Bot"}
    data["comment"]["body"] = "/approve"
    assert isinstance(parse_command("issue_comment", data, app_login="teaparty[bot]"), Ignored)
    data = payload("issue_comment.created.with-installation")
    data["action"] = "edited"
    data["comment"]["body"] = "/reject changed my mind"
    assert isinstance(parse_command("issue_comment", data, app_login="teaparty[bot]"), Ignored)


def test_a_person_quoting_the_gate_marker_is_still_that_person(payload: Load) -> None:
    body = "> <!-- teaparty:gate:3 -->\n> **Question 3** from lead (`plan 3a3a3a3`):\n/approve"
    assert decide_comment(by(payload, body), facts(PLAN, OTHER)) == (answered(3, "yes"), TAKEN)


# Reading a comment


def test_commands_are_whole_lines_outside_quotes_and_code() -> None:
    reply = parse_reply(
        "I think /approve is right\n> /reject\n```\n/reject\n```\n/approve 3a3a3a3\n"
        "/revise  keep the tests  \n/nope\n"
    )
    assert reply.commands == (Command("approve", "3a3a3a3"), Command("revise", "keep the tests"))
    assert reply.commands[0].hash == "3a3a3a3"
    assert reply.unknown == ("/nope",)
    assert reply.text == "I think /approve is right\n```\n/reject\n```"


def test_quotes_name_gates_by_number_and_hash() -> None:
    reply = parse_reply("> **Question 12** from lead (`question 0123abc`):\n> Go?\nsure")
    assert reply.quoted_gates == frozenset({12})
    assert reply.quoted_hashes == frozenset({"0123abc"})
    assert reply.text == "sure"
    assert Command("decider", "@Hubot-2").login == "Hubot-2"
    assert Command("decider", "two words").login is None


# Orders to the job


@pytest.mark.parametrize(
    ("body", "order", "text"),
    [
        ("/pause", "pause", ""),
        ("/hold", "pause", ""),
        ("/unhold", "resume", ""),
        ("/resume", "resume", ""),
        ("/status", "status", ""),
        ("/steer keep the diff small", "steer", "keep the diff small"),
        ("/withdraw", "withdraw", ""),
    ],
)
def test_the_decider_orders_the_job(payload: Load, body: str, order: str, text: str) -> None:
    for gates in ((PLAN,), ()):  # with a question open or none
        actions = decide_comment(by(payload, body), facts(*gates) if gates else no_gates())
        assert actions == (Control(7, order, text, by=DECIDER, ref=comment_ref(COMMENT_ID)), TAKEN)


def no_gates(**more: Any) -> CommentFacts:
    return CommentFacts(job("active"), subject(DECIDER), gates=(), author_access="write", **more)


def test_orders_from_others_are_refused(payload: Load) -> None:
    stranger = CommentFacts(job("active"), subject(DECIDER), author_access="read")
    assert decide_comment(by(payload, "/pause", login="mallory"), stranger) == (
        REFUSED,
        Ignore("mallory may not /pause job 7", 7),
    )
    lost = no_gates(decider_access="read")
    admin = CommentFacts(lost.job, lost.subject, author_access="admin", decider_access="read")
    assert decide_comment(by(payload, "/resume", login="hubot"), admin)[0] == Control(
        7, "resume", "", by="hubot", ref=comment_ref(COMMENT_ID)
    )


def test_steer_needs_its_direction(payload: Load) -> None:
    post = decide_comment(by(payload, "/steer"), no_gates())[0]
    assert isinstance(post, PostOnce)
    assert "`/steer` needs the direction" in post.body


@pytest.mark.parametrize(
    ("body", "order", "text"),
    [
        ("/budget 25", "budget", "25.0"),
        ("/budget $12.50", "budget", "12.5"),
        ("/remember we use pytest, never unittest", "remember", "we use pytest, never unittest"),
    ],
)
def test_budget_and_remember(payload: Load, body: str, order: str, text: str) -> None:
    assert decide_comment(by(payload, body), no_gates()) == (
        Control(7, order, text, by=DECIDER, ref=comment_ref(COMMENT_ID)),
        TAKEN,
    )


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("/budget", "`/budget` needs an amount of dollars"),
        ("/budget lots", "`/budget` needs an amount of dollars"),
        ("/budget 0", "`/budget` needs an amount of dollars"),
        ("/remember", "`/remember` needs what to remember"),
    ],
)
def test_budget_and_remember_say_what_they_need(payload: Load, body: str, why: str) -> None:
    post = decide_comment(by(payload, body), no_gates())[0]
    assert isinstance(post, PostOnce)
    assert why in post.body


def test_override_corrects_the_proxys_latest_or_quoted_answer(payload: Load) -> None:
    proxied = no_gates(proxied=(4, 6))
    ref = comment_ref(COMMENT_ID)
    assert decide_comment(by(payload, "/override no"), proxied) == (
        Override(7, 6, "no", by=DECIDER, ref=ref),
        TAKEN,
    )
    quoted = "> 🤖 **The proxy answered question 4** for @octocat: `yes`\n/override no, wait"
    assert decide_comment(by(payload, quoted), proxied)[0] == Override(
        7, 4, "no, wait", by=DECIDER, ref=ref
    )


@pytest.mark.parametrize(
    ("body", "login", "facts_", "first"),
    [
        ("/override no", "mallory", {"proxied": (6,)}, "confused"),
        ("/override", DECIDER, {"proxied": (6,)}, "needs your answer"),
        ("/override no", DECIDER, {}, "the proxy has answered no question of this job alone"),
    ],
)
def test_override_refused_or_explained(
    payload: Load, body: str, login: str, facts_: dict[str, Any], first: str
) -> None:
    actions = decide_comment(by(payload, body, login=login), no_gates(**facts_))
    if first == "confused":
        assert actions[0] == REFUSED
    else:
        post = actions[0]
        assert isinstance(post, PostOnce)
        assert first in post.body
    assert not any(isinstance(a, Override) for a in actions)
