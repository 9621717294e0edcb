"""What follows a job's label, parsed from real deliveries into commands: a pull request closed
(merged or not), made a draft, made ready, reopened; an issue closed, a label removed; the App
uninstalled or repositories taken out of it. Actions octokit has no example of are made from
a real delivery of the same event and checked against octokit's schema for their action."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Load
from webhook_schemas import webhook_errors

from bot.handlers.deliveries import IssueClosed, LabelRemoved, PullAction, PullChanged, ReposRemoved
from bot.handlers.payloads import Actor, Ignored, Issue, PayloadError, Repo, parse_command

APP = "teaparty[bot]"
HELLO = Repo("Codertocat", "Hello-World", "master", installation_id=1, private=False)
CODERTOCAT = Actor("Codertocat", is_bot=False)


def parse(event: str, data: dict[str, Any], **more: Any) -> object:
    return parse_command(event, data, app_login=APP, **more)


def pull_event(payload: Load, action: str, **pull: Any) -> dict[str, Any]:
    """octokit's `pull_request.closed` as another action, valid against that action's schema
    (a pull request converted to a draft is a draft)."""
    data = payload("pull_request.closed") | {"action": action}
    data["pull_request"] |= {"draft": action == "converted_to_draft"} | pull
    if action != "closed":
        data["pull_request"] |= {"state": "open", "closed_at": None}
    assert webhook_errors("pull_request", data) == []
    return data


def as_sender(data: dict[str, Any], login: str, kind: str = "Bot") -> dict[str, Any]:
    data["sender"] = data["sender"] | {"login": login, "type": kind}
    return data


def test_a_pull_request_closed_unmerged(payload: Load) -> None:
    data = payload("pull_request.closed")
    assert parse("pull_request", data) == PullChanged(
        HELLO, 2, "closed", merged=False, draft=False, head="changes", sender=CODERTOCAT
    )


def test_a_pull_request_merged(payload: Load) -> None:
    command = parse("pull_request", pull_event(payload, "closed", merged=True))
    assert isinstance(command, PullChanged)
    assert (command.action, command.merged) == ("closed", True)


@pytest.mark.parametrize(
    ("action", "draft"),
    [("converted_to_draft", True), ("ready_for_review", False), ("reopened", False)],
)
def test_a_pull_request_drafted_made_ready_or_reopened(
    payload: Load, action: PullAction, draft: bool
) -> None:
    command = parse("pull_request", pull_event(payload, action, draft=draft))
    assert command == PullChanged(
        HELLO, 2, action, merged=False, draft=draft, head="changes", sender=CODERTOCAT
    )


def test_a_merge_by_a_bot_is_a_fact_but_never_the_apps_own_act(payload: Load) -> None:
    queue = as_sender(pull_event(payload, "closed", merged=True), "github-merge-queue[bot]")
    command = parse("pull_request", queue)
    assert isinstance(command, PullChanged)
    assert command.sender == Actor("github-merge-queue[bot]", is_bot=True)
    own = parse("pull_request", as_sender(payload("pull_request.closed"), APP))
    assert own == Ignored(f"pull_request.closed is ignored: {APP!r} is the app's own account.")


@pytest.mark.parametrize("action", ["converted_to_draft", "ready_for_review", "reopened"])
def test_bots_and_the_app_do_not_draft_ready_or_reopen(payload: Load, action: str) -> None:
    bot = parse("pull_request", as_sender(pull_event(payload, action), "mergify[bot]"))
    assert bot == Ignored(
        f"pull_request.{action} is ignored: bot 'mergify[bot]' is not in allowed_bots."
    )
    allowed = as_sender(pull_event(payload, action), "mergify[bot]")
    assert isinstance(
        parse("pull_request", allowed, allowed_bots=frozenset({"mergify[bot]"})), PullChanged
    )
    own = parse("pull_request", as_sender(pull_event(payload, action), APP))
    assert isinstance(own, Ignored)
    assert "the app's own account" in own.reason


def test_other_pull_request_actions_are_ignored_with_a_reason(payload: Load) -> None:
    command = parse("pull_request", payload("pull_request.opened"))
    assert command == Ignored(
        "pull_request.opened is ignored: only a pull request closed, made a draft, made ready "
        "or reopened is acted on."
    )


def test_an_issue_closed(payload: Load) -> None:
    command = parse("issues", payload("issues.closed"))
    assert isinstance(command, IssueClosed)
    assert command.repo == Repo(
        "codinasion", "codinasion-bot", "master", installation_id=27216354, private=True
    )
    assert (command.issue.number, command.issue.is_pull_request) == (2, False)
    assert command.sender == Actor("harshraj8843", is_bot=False)
    stale = parse("issues", as_sender(payload("issues.closed"), "stale[bot]"))
    assert stale == Ignored("issues.closed is ignored: bot 'stale[bot]' is not in allowed_bots.")


def test_a_label_removed(payload: Load) -> None:
    data = payload("issues.unlabeled")
    assert webhook_errors("issues", data) == []
    command = parse("issues", data)
    assert command == LabelRemoved(
        Repo("Codertocat", "Hello-World", "master", installation_id=None, private=False),
        Issue(
            1,
            "Spelling error in the README file",
            "It looks like you accidently spelled 'commit' with two 't's.",
            is_pull_request=False,
            labels=("bug",),  # so octokit's example says, the label removed or not
        ),
        "bug",
        CODERTOCAT,
    )
    del data["label"]
    with pytest.raises(PayloadError) as raised:
        parse("issues", data)
    assert raised.value.field == "label.name"


def test_the_app_uninstalled(payload: Load) -> None:
    data = payload("installation.deleted")
    assert webhook_errors("installation", data) == []
    assert parse("installation", data) == ReposRemoved(
        2, ("octocat/Hello-World",), Actor("octocat", is_bot=False)
    )
    del data["repositories"]  # an installation on all repositories may not list them
    assert parse("installation", data) == ReposRemoved(2, None, Actor("octocat", is_bot=False))


def test_repositories_taken_out_of_the_installation(payload: Load) -> None:
    data = payload("installation_repositories.added") | {"action": "removed"}
    data["repositories_removed"], data["repositories_added"] = data["repositories_added"], []
    assert webhook_errors("installation_repositories", data) == []
    assert parse("installation_repositories", data) == ReposRemoved(
        957387, ("Codertocat/Space",), CODERTOCAT
    )


@pytest.mark.parametrize(
    ("event", "name", "change", "field"),
    [
        ("pull_request", "pull_request.closed", ("pull_request", "number"), "pull_request.number"),
        ("pull_request", "pull_request.closed", ("pull_request", "head"), "pull_request.head.ref"),
        ("installation", "installation.deleted", ("installation", "id"), "installation.id"),
    ],
)
def test_a_missing_field_is_named(
    payload: Load, event: str, name: str, change: tuple[str, str], field: str
) -> None:
    data = payload(name)
    del data[change[0]][change[1]]
    with pytest.raises(PayloadError) as raised:
        parse(event, data)
    assert raised.value.field == field


@pytest.mark.parametrize(
    ("full_name", "problem"),
    [("no-slash", "not `owner/name`"), ("octo/../x", "not a GitHub repository name")],
)
def test_a_bad_repository_name_is_named(payload: Load, full_name: str, problem: str) -> None:
    data = payload("installation.deleted")
    data["repositories"][0]["full_name"] = full_name
    with pytest.raises(PayloadError, match=problem) as raised:
        parse("installation", data)
    assert raised.value.field == "repositories.0.full_name"
