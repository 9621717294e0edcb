"""The stand-in's side of a job's lifecycle: the App closing and reopening a pull request
(GitHub says so in `pull_request.closed` / `.reopened` by the App's account), a branch read
or found gone (`repos/get-branch`), and a person closing an issue or taking a label off it;
every delivery checked against octokit's schema, every response against GitHub's OpenAPI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakehub_support import INSTALLATION, NAME, OWNER, SECRET
from githubkit import GitHub
from githubkit.exception import RequestFailed
from review_support import open_review_pull
from webhook_schemas import webhook_errors

from bot.fakehub.hub import FakeGitHub


@pytest.fixture
def signed(hub: FakeGitHub) -> FakeGitHub:
    hub.webhook_secret = SECRET  # no webhook_url: each delivery is recorded, not sent
    return hub


def checked(hub: FakeGitHub) -> list[tuple[str, str, str]]:
    """(event, action, sender) of each delivery, each valid against its schema."""
    for delivery in hub.deliveries:
        assert webhook_errors(delivery.event, delivery.payload) == [], delivery.action
    return [(d.event, d.action, d.payload["sender"]["login"]) for d in hub.deliveries]


async def test_the_app_closing_and_reopening_a_pull_request_is_said_by_webhooks(
    signed: FakeGitHub, gh: GitHub[Any], base_url: str, tmp_path: Path
) -> None:
    number = await open_review_pull(signed, tmp_path / "work")
    bot = signed.state.bot.login
    closed = await gh.rest.pulls.async_update(OWNER, NAME, number, state="closed")
    assert closed.json()["state"] == "closed"
    reopened = await gh.rest.pulls.async_update(OWNER, NAME, number, state="open")
    assert reopened.json()["state"] == "open"
    await gh.rest.pulls.async_update(OWNER, NAME, number, title="Same state: no webhook")
    assert checked(signed) == [
        ("pull_request", "closed", bot),
        ("pull_request", "reopened", bot),
    ]
    assert signed.deliveries[-1].payload["pull_request"]["number"] == number
    assert signed.violations == []


async def test_a_branch_is_read_until_it_is_deleted(
    signed: FakeGitHub, gh: GitHub[Any], base_url: str, tmp_path: Path
) -> None:
    number = await open_review_pull(signed, tmp_path / "work")
    pull = signed.issue(OWNER, NAME, number).pull
    assert pull is not None
    branch = (await gh.rest.repos.async_get_branch(OWNER, NAME, "feature")).json()
    assert (branch["name"], branch["commit"]["sha"], branch["protected"]) == (
        "feature",
        pull.head_sha,
        False,
    )
    assert branch["commit"]["commit"]["message"] == "work on feature"
    assert len(branch["commit"]["parents"]) == 1
    await signed.delete_head_branch(OWNER, NAME, number, "alice")
    with pytest.raises(RequestFailed) as gone:
        await gh.rest.repos.async_get_branch(OWNER, NAME, "feature")
    assert gone.value.response.status_code == 404
    with pytest.raises(RequestFailed) as refused:  # GitHub reopens nothing without its head
        await gh.rest.pulls.async_update(OWNER, NAME, number, state="open")
    assert refused.value.response.status_code == 422
    assert signed.violations == []


async def test_a_person_closes_an_issue_and_takes_a_label_off(signed: FakeGitHub) -> None:
    number = signed.open_issue(OWNER, NAME, title="Widgets", body="Please", author="alice")
    signed.add_user("alice", "write")
    await signed.label_issue(OWNER, NAME, number, "teaparty", sender="alice")
    assert await signed.unlabel_issue(OWNER, NAME, number, "teaparty", sender="alice")
    assert await signed.unlabel_issue(OWNER, NAME, number, "teaparty", sender="alice") is None
    assert await signed.close_issue(OWNER, NAME, number, sender="alice")
    assert await signed.close_issue(OWNER, NAME, number, sender="alice") is None
    assert checked(signed) == [
        ("issues", "labeled", "alice"),
        ("issues", "unlabeled", "alice"),
        ("issues", "closed", "alice"),
    ]
    unlabeled, closed = (d.payload for d in signed.deliveries[1:])
    assert unlabeled["label"]["name"] == "teaparty"
    assert unlabeled["issue"]["labels"] == []
    assert (closed["issue"]["state"], closed["installation"]["id"]) == ("closed", INSTALLATION)
    assert signed.issue(OWNER, NAME, number).state == "closed"
