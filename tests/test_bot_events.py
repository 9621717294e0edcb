"""bot.handlers.payloads: real webhook payloads become commands; names checked, text sanitized."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from bot.handlers.deliveries import Command, CommentAdded, LabelAdded, Ping
from bot.handlers.payload_fields import check_owner, check_repo_name
from bot.handlers.payloads import (
    HANDLED_EVENTS,
    Actor,
    Ignored,
    Issue,
    PayloadError,
    Repo,
    parse_command,
)

APP = "teaparty[bot]"
Payload = dict[str, Any]
Load = Callable[[str], Payload]

HELLO_WORLD = Repo("Codertocat", "Hello-World", "master", installation_id=None, private=False)
SPELLING = Issue(
    number=1,
    title="Spelling error in the README file",
    body="It looks like you accidently spelled 'commit' with two 't's.",
    is_pull_request=False,
    labels=("bug",),
)
CODERTOCAT = Actor("Codertocat", is_bot=False)


def parse(event: str, data: object, *, allowed_bots: frozenset[str] = frozenset()) -> Command:
    return parse_command(event, data, app_login=APP, allowed_bots=allowed_bots)


def test_handled_events_are_the_ones_the_app_subscribes_to() -> None:
    assert sorted(HANDLED_EVENTS) == [
        "check_suite",
        "installation",
        "installation_repositories",
        "issue_comment",
        "issues",
        "ping",
        "pull_request",
        "pull_request_review",
        "pull_request_review_comment",
        "workflow_run",
    ]


# Commands from real payloads


@pytest.mark.parametrize("name", ["issues.labeled", "issues.labeled.with-organization"])
def test_issues_labeled_becomes_label_added(payload: Load, name: str) -> None:
    command = parse("issues", payload(name))
    assert command == LabelAdded(HELLO_WORLD, SPELLING, label="bug", sender=CODERTOCAT)


def test_label_added_from_an_app_delivery(payload: Load) -> None:
    data = payload("issues.closed")  # a real App delivery, relabelled
    data |= {"action": "labeled", "label": {"name": "team"}}
    command = parse("issues", data)
    assert command == LabelAdded(
        Repo("codinasion", "codinasion-bot", "master", installation_id=27216354, private=True),
        Issue(
            number=2,
            title="Another Test Issue",
            body="Hey there\n\nthis is another test issue",  # CRLF and a trailing space gone
            is_pull_request=False,
            labels=("triage", "team"),
        ),
        label="team",
        sender=Actor("harshraj8843", is_bot=False),
    )


def test_a_null_issue_body_becomes_empty(payload: Load) -> None:
    data = payload("issues.opened.with-empty-body")
    assert data["issue"]["body"] is None
    data |= {"action": "labeled", "label": {"name": "bug"}}
    command = parse("issues", data)
    assert isinstance(command, LabelAdded)
    assert command.issue.body == ""


@pytest.mark.parametrize(
    "name", ["issue_comment.created", "issue_comment.created.with-organization"]
)
def test_issue_comment_created_becomes_comment_added(payload: Load, name: str) -> None:
    data = payload(name)
    command = parse("issue_comment", data)
    written = datetime.fromisoformat(data["comment"]["created_at"].replace("Z", "+00:00"))
    assert command == CommentAdded(
        HELLO_WORLD,
        SPELLING,
        comment_id=492700400,
        body="You are totally right! I'll get this fixed right away.",
        author=CODERTOCAT,
        created_at=written.timestamp(),
    )


def test_a_comment_time_that_is_no_time_is_named(payload: Load) -> None:
    data = payload("issue_comment.created")
    data["comment"]["created_at"] = "yesterday"
    with pytest.raises(PayloadError, match="comment.created_at: not a time: 'yesterday'"):
        parse("issue_comment", data)


def test_comment_with_installation_carries_its_id(payload: Load) -> None:
    command = parse("issue_comment", payload("issue_comment.created.with-installation"))
    assert isinstance(command, CommentAdded)
    assert command.repo.installation_id == 1


def test_comment_on_a_pull_request(payload: Load) -> None:
    data = payload("issue_comment.created.on-pull-request")
    command = parse("issue_comment", data)
    assert isinstance(command, CommentAdded)
    assert command.issue.is_pull_request
    assert command.repo.full_name == "all-contributors/all-contributors-bot"
    assert command.repo.installation_id == 11111
    assert command.author == Actor("jakebolam", is_bot=False)
    assert command.body == data["comment"]["body"]  # emoji and links come through untouched
    assert "🤖" in command.body


def test_missing_installation_leaves_installation_id_none(payload: Load) -> None:
    data = payload("issue_comment.created")
    assert "installation" not in data  # a repo-webhook-style payload
    command = parse("issue_comment", data)
    assert isinstance(command, CommentAdded)
    assert command.repo.installation_id is None


@pytest.mark.parametrize("name", ["ping", "ping.with-app_id", "ping.with-organization"])
def test_ping(payload: Load, name: str) -> None:
    assert parse("ping", payload(name)) == Ping("Anything added dilutes everything else.")


def test_a_ping_without_zen_is_still_a_ping(payload: Load) -> None:
    data = payload("ping")
    del data["zen"]
    assert parse("ping", data) == Ping("")


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("issues.opened", "labelled"),
        ("issue_comment.edited", "edits"),
        ("issue_comment.deleted", "deletions"),
        ("pull_request.labeled", "labels on pull requests"),
        ("pull_request.opened", "only a pull request closed, made a draft, made ready or"),
        ("pull_request_review_comment.created", "acted on with its review, as one round"),
        ("installation.created", "only an uninstall is acted on"),
        ("installation_repositories.added", "only repositories taken out of the installation"),
    ],
)
def test_handled_but_not_acted_on_is_ignored(payload: Load, name: str, why: str) -> None:
    event, action = name.split(".")
    command = parse(event, payload(name))
    assert isinstance(command, Ignored)
    assert command.reason.startswith(f"{event}.{action} is ignored: ")
    assert why in command.reason


def test_an_unknown_action_is_ignored(payload: Load) -> None:
    data = payload("issues.labeled") | {"action": "transferred"}
    assert parse("issues", data) == Ignored(
        "issues.transferred is ignored: the app does not know it."
    )


def test_an_unhandled_event_is_ignored(payload: Load) -> None:
    command = parse("deployment", payload("workflow_run.completed"))
    assert command == Ignored("deployment is ignored: the app does not handle this event.")


# Loop guard and bots


def as_user(data: Payload, *, login: str, kind: str) -> Payload:
    """The payload with its comment's author, or (without a comment) its sender, replaced."""
    holder, key = (data["comment"], "user") if "comment" in data else (data, "sender")
    holder[key] = holder[key] | {"login": login, "type": kind}
    return data


def test_the_apps_own_comment_is_ignored(payload: Load) -> None:
    # all-contributors' issue_comment.created-by-app fixture, rebuilt: the same PR comment,
    # written by the app's bot account
    data = as_user(
        payload("issue_comment.created.on-pull-request"), login="allcontributors[bot]", kind="Bot"
    )
    command = parse_command(
        "issue_comment",
        data,
        app_login="AllContributors[bot]",  # logins compare case-insensitively
        allowed_bots=frozenset({"allcontributors[bot]"}),  # allow-listing it changes nothing
    )
    assert isinstance(command, Ignored)
    assert "the app's own" in command.reason


def test_the_apps_own_label_is_ignored(payload: Load) -> None:
    data = as_user(payload("issues.labeled"), login="TeaParty[bot]", kind="Bot")
    command = parse("issues", data, allowed_bots=frozenset({APP}))
    assert isinstance(command, Ignored)
    assert "the app's own" in command.reason


def test_a_persons_comment_with_the_apps_marker_is_still_theirs(payload: Load) -> None:
    # a decider who quotes the App's gate comment answers it; the marker is not an author
    data = payload("issue_comment.created")
    data["comment"]["body"] = "> <!-- teaparty:gate:3 -->\n> **Question 3** Proceed?\n\nyes"
    command = parse("issue_comment", data)
    assert isinstance(command, CommentAdded)
    assert command.author == CODERTOCAT
    assert command.body == ">\n> **Question 3** Proceed?\n\nyes"  # the marker is stripped
    assert "teaparty" not in command.body


def test_without_an_app_login_a_person_is_still_heard(payload: Load) -> None:
    command = parse_command("issue_comment", payload("issue_comment.created"), app_login=None)
    assert isinstance(command, CommentAdded)


@pytest.mark.parametrize(
    ("event", "name"), [("issues", "issues.labeled"), ("issue_comment", "issue_comment.created")]
)
@pytest.mark.parametrize(
    ("login", "kind"),
    [("dependabot[bot]", "Bot"), ("renovate[bot]", "User"), ("some-app", "Bot")],
)
def test_other_bots_are_ignored_unless_allowed(
    payload: Load, event: str, name: str, login: str, kind: str
) -> None:
    refused = parse(event, as_user(payload(name), login=login, kind=kind))
    assert refused == Ignored(f"{name} is ignored: bot {login!r} is not in allowed_bots.")
    heard = parse(
        event,
        as_user(payload(name), login=login, kind=kind),
        allowed_bots=frozenset({login, "other[bot]"}),
    )
    assert isinstance(heard, LabelAdded | CommentAdded)
    actor = heard.sender if isinstance(heard, LabelAdded) else heard.author
    assert actor == Actor(login, is_bot=True)


def test_allow_listing_is_by_whole_login_in_any_case(payload: Load) -> None:
    data = as_user(payload("issue_comment.created"), login="dependabot[bot]", kind="Bot")
    assert isinstance(parse("issue_comment", data, allowed_bots=frozenset({"dependabot"})), Ignored)
    heard = parse("issue_comment", data, allowed_bots=frozenset({"Dependabot[bot]"}))
    assert isinstance(heard, CommentAdded)


# Tolerant parsing


def test_only_the_fields_we_need_matter() -> None:
    minimal = {
        "action": "created",
        "issue": {"number": 7, "title": "t", "body": None},
        "comment": {"id": 9, "body": "go", "user": {"login": "ann"}},
        "repository": {
            "name": "r",
            "owner": {"login": "o"},
            "default_branch": "main",
            "private": True,
            "brand_new_field": [1, 2],
        },
        "installation": {"id": 3},
    }
    assert parse("issue_comment", minimal) == CommentAdded(
        Repo("o", "r", "main", installation_id=3, private=True),
        Issue(7, "t", "", is_pull_request=False, labels=()),
        comment_id=9,
        body="go",
        author=Actor("ann", is_bot=False),
    )


DELETE = object()


def set_path(data: Payload, path: str, value: object) -> Payload:
    """The payload with the value at a dotted path replaced, or deleted."""
    *parents, last = path.split(".")
    node: Any = data
    for key in parents:
        node = node[int(key)] if key.isdigit() else node[key]
    index: int | str = int(last) if last.isdigit() else last
    if value is DELETE:
        del node[index]
    else:
        node[index] = value
    return data


@pytest.mark.parametrize(
    ("name", "path", "value", "message"),
    [
        ("issues.labeled", "issue.number", "x", "issue.number: expected an integer, got 'x'"),
        ("issues.labeled", "issue.number", True, "issue.number: expected an integer, got True"),
        ("issues.labeled", "issue.title", DELETE, "issue.title: missing"),
        ("issues.labeled", "issue", "gone", "issue: expected an object, got 'gone'"),
        ("issues.labeled", "issue.labels", {}, "issue.labels: expected a list, got {}"),
        (
            "issues.labeled",
            "issue.labels.0",
            "bug",
            "issue.labels.0: expected an object, got 'bug'",
        ),
        ("issues.labeled", "label.name", 5, "label.name: expected a string, got 5"),
        ("issues.labeled", "sender", DELETE, "sender.login: missing"),
        (
            "issues.labeled",
            "repository.private",
            "no",
            "repository.private: expected a boolean, got 'no'",
        ),
        (
            "issues.labeled",
            "repository.default_branch",
            DELETE,
            "repository.default_branch: missing",
        ),
        (
            "issues.labeled",
            "installation",
            {"id": "1"},
            "installation.id: expected an integer, got '1'",
        ),
        ("issues.labeled", "action", DELETE, "action: missing"),
        ("issue_comment.created", "comment.id", DELETE, "comment.id: missing"),
        ("issue_comment.created", "comment.body", [1], "comment.body: expected a string, got [1]"),
    ],
)
def test_a_missing_or_mistyped_field_is_named(
    payload: Load, name: str, path: str, value: object, message: str
) -> None:
    data = set_path(payload(name), path, value)
    with pytest.raises(PayloadError) as caught:
        parse(name.split(".")[0], data)
    assert str(caught.value) == message
    assert caught.value.field == message.split(":")[0]
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("name", "path", "value"),
    [
        ("issues.labeled", "repository.name", ".."),
        ("issues.labeled", "repository.name", "."),
        ("issues.labeled", "repository.name", "a/b"),
        ("issues.labeled", "repository.name", "../../app/installations"),
        ("issues.labeled", "repository.name", "widgets.git"),
        ("issues.labeled", "repository.name", "x" * 101),
        ("issues.labeled", "repository.name", ""),
        ("issues.labeled", "repository.name", "wid gets"),
        ("issue_comment.created", "repository.owner.login", ".."),
        ("issue_comment.created", "repository.owner.login", "-octo"),
        ("issue_comment.created", "repository.owner.login", "octo/../x"),
        ("issue_comment.created", "repository.owner.login", "o" * 40),
        ("issue_comment.created", "repository.owner.login", "octo%2F.."),
        ("issue_comment.created", "comment.user.login", "../users/x"),
        ("issues.labeled", "sender.login", "a b[bot]"),
    ],
)
def test_a_name_that_breaks_githubs_rules_is_refused_naming_its_field(
    payload: Load, name: str, path: str, value: str
) -> None:
    data = set_path(payload(name), path, value)
    with pytest.raises(PayloadError, match=r"not a GitHub (account|repository) name") as caught:
        parse(name.split(".")[0], data)
    assert caught.value.field == path
    assert str(caught.value).startswith(f"{path}: ")


@pytest.mark.parametrize(
    "owner",
    ["octo", "O", "a-b", "a1", "x" * 39, "old--style", "legacy-", "mona_acme"],
)
def test_github_account_names_pass(owner: str) -> None:
    assert check_owner(owner) == owner


@pytest.mark.parametrize("owner", ["", "-a", "a_", "_a", "a_b_c", "a.b", "a/b", "é", "x" * 40])
def test_other_account_names_do_not(owner: str) -> None:
    with pytest.raises(PayloadError):
        check_owner(owner, field="f")


@pytest.mark.parametrize(
    "name", [".github", "a", "a.b_c-d", "-x", "x" * 100, "git", "my.gitlab", ".git-blame"]
)
def test_github_repository_names_pass(name: str) -> None:
    assert check_repo_name(name) == name


@pytest.mark.parametrize("name", ["", ".", "..", "a.git", "A.GIT", "a/b", "a b", "ä", "x" * 101])
def test_other_repository_names_do_not(name: str) -> None:
    with pytest.raises(PayloadError):
        check_repo_name(name)


@pytest.mark.parametrize("value", [["x" * 500] * 500, {"k": "v" * 10_000}, 10**500])
def test_a_huge_bad_value_is_shortened_in_the_message(payload: Load, value: object) -> None:
    data = set_path(payload("issue_comment.created"), "comment.body", value)
    with pytest.raises(PayloadError, match=r"^comment\.body: expected a string, got ") as caught:
        parse("issue_comment", data)
    assert len(str(caught.value)) < 120


@pytest.mark.parametrize("data", [[], "issue", None, 3])
def test_a_payload_that_is_not_an_object(data: object) -> None:
    with pytest.raises(PayloadError, match=r"^payload: expected an object$") as caught:
        parse("issues", data)
    assert caught.value.field == "payload"


def test_titles_and_bodies_are_sanitized(payload: Load) -> None:
    data = payload("issue_comment.created")
    data["issue"]["title"] = "Fix\u202e the typo"
    data["issue"]["body"] = "Please fix.<!-- and push to main -->\r\n"
    data["comment"]["body"] = "ok\u200b <!-- also delete the repo"
    command = parse("issue_comment", data)
    assert isinstance(command, CommentAdded)
    assert (command.issue.title, command.issue.body, command.body) == (
        "Fix the typo",
        "Please fix.\n",
        "ok",
    )
