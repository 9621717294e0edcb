"""The webhooks people's acts on a pull request send the App, checked against octokit's schemas."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
from pathlib import Path

import pytest
from fakehub_support import INSTALLATION, NAME, OWNER, SECRET, git
from review_support import FILE, numbered, open_review_pull
from webhook_schemas import webhook_errors

from bot.fakehub.hub import FakeGitHub
from bot.fakehub.webhooks import SentDelivery


def events(deliveries: list[SentDelivery]) -> list[tuple[str, str]]:
    return [(d.event, d.action) for d in deliveries]


def checked(hub: FakeGitHub, since: int = 0) -> list[SentDelivery]:
    """The deliveries after the first `since`, each signed and valid against its schema."""
    sent = hub.deliveries[since:]
    for delivery in sent:
        want = "sha256=" + hmac.new(SECRET.encode(), delivery.body, hashlib.sha256).hexdigest()
        assert delivery.headers["X-Hub-Signature-256"] == want
        assert delivery.payload["installation"]["id"] == INSTALLATION
        assert webhook_errors(delivery.event, delivery.payload) == [], delivery.event
    return sent


@pytest.fixture
def signed(hub: FakeGitHub) -> FakeGitHub:
    hub.webhook_secret = SECRET  # no webhook_url: each delivery is recorded, not sent
    return hub


@pytest.mark.parametrize("state", ["approved", "changes_requested", "commented"])
async def test_a_review_and_its_inline_comments_share_one_review_id(
    signed: FakeGitHub, tmp_path: Path, state: str
) -> None:
    number = await open_review_pull(signed, tmp_path / "work")
    comments = [(FILE, 2, "one"), (FILE, 9, "two"), (FILE, 30, "three")]
    review_id = await signed.review_pr(
        OWNER, NAME, number, "bob", state, "See inline", comments=comments
    )

    sent = checked(signed)
    assert events(sent) == [("pull_request_review_comment", "created")] * 3 + [
        ("pull_request_review", "submitted")
    ]
    *inline, review = (d.payload for d in sent)
    assert [c["comment"]["pull_request_review_id"] for c in inline] == [review_id] * 3
    assert [(c["comment"]["line"], c["comment"]["body"]) for c in inline] == [
        (2, "one"),
        (9, "two"),
        (30, "three"),
    ]
    assert (review["review"]["id"], review["review"]["state"]) == (review_id, state)
    assert review["review"]["body"] == "See inline"
    assert review["pull_request"]["number"] == number
    assert {p["sender"]["login"] for p in (*inline, review)} == {"bob"}


async def test_a_lone_comment_and_a_reply_each_arrive_as_a_commented_review(
    signed: FakeGitHub, tmp_path: Path
) -> None:
    number = await open_review_pull(signed, tmp_path / "work")
    root = await signed.comment_on_line(OWNER, NAME, number, "bob", FILE, 7, "Hm?")
    reply = await signed.reply_in_thread(OWNER, NAME, number, "carol", root, "Agreed")

    sent = checked(signed)
    assert (
        events(sent)
        == [
            ("pull_request_review_comment", "created"),
            ("pull_request_review", "submitted"),
        ]
        * 2
    )
    first, first_review, second, second_review = (d.payload for d in sent)
    assert "in_reply_to_id" not in first["comment"]
    assert second["comment"]["in_reply_to_id"] == root
    assert second["comment"]["id"] == reply
    for comment, review in ((first, first_review), (second, second_review)):
        assert comment["comment"]["pull_request_review_id"] == review["review"]["id"]
        assert (review["review"]["state"], review["review"]["body"]) == ("commented", None)


async def test_a_push_to_the_head_is_a_synchronize_and_moves_the_head(
    signed: FakeGitHub, tmp_path: Path
) -> None:
    number = await open_review_pull(signed, tmp_path / "work")
    before = signed.issue(OWNER, NAME, number).pull.head_sha  # type: ignore[union-attr]
    after = await signed.push_to_head(
        OWNER, NAME, number, "carol", {FILE: numbered(changed={1: "first"}), "new.txt": "n\n"}
    )
    [sync] = checked(signed)
    payload = sync.payload
    assert (sync.event, sync.action) == ("pull_request", "synchronize")
    assert (payload["before"], payload["after"]) == (before, after)
    assert payload["pull_request"]["head"]["sha"] == after
    assert payload["pull_request"]["commits"] == 2
    assert payload["sender"]["login"] == "carol"
    removed = await signed.push_to_head(OWNER, NAME, number, "carol", {"new.txt": None})
    assert checked(signed, 1)[0].payload["before"] == after
    assert signed.issue(OWNER, NAME, number).pull.head_sha == removed  # type: ignore[union-attr]


async def test_draft_and_ready_for_review(signed: FakeGitHub, tmp_path: Path) -> None:
    number = await open_review_pull(signed, tmp_path / "work")
    await signed.set_draft(OWNER, NAME, number, "alice")
    await signed.set_draft(OWNER, NAME, number, "alice")  # already a draft: nothing happens
    await signed.set_draft(OWNER, NAME, number, "alice", draft=False)
    sent = checked(signed)
    assert events(sent) == [
        ("pull_request", "converted_to_draft"),
        ("pull_request", "ready_for_review"),
    ]
    assert [d.payload["pull_request"]["draft"] for d in sent] == [True, False]


async def test_closing_unmerged(signed: FakeGitHub, tmp_path: Path) -> None:
    number = await open_review_pull(signed, tmp_path / "work")
    await signed.close_pr(OWNER, NAME, number, "bob")
    [closed] = checked(signed)
    pull = closed.payload["pull_request"]
    assert (closed.event, closed.action) == ("pull_request", "closed")
    assert (pull["state"], pull["merged"], pull["merged_at"], pull["merged_by"]) == (
        "closed",
        False,
        None,
        None,
    )


async def test_merging_closes_the_pull_request_and_the_issue_it_closes(
    signed: FakeGitHub, tmp_path: Path
) -> None:
    issue = signed.open_issue(OWNER, NAME, title="Widgets", body="Please", author="alice")
    other = signed.open_issue(OWNER, NAME, title="Unrelated", body="", author="alice")
    number = await open_review_pull(signed, tmp_path / "work")
    signed.issue(OWNER, NAME, number).body = f"Adds the app.\n\nCloses #{issue}"
    sha = await signed.merge_pr(OWNER, NAME, number, "bob", delete_branch=True)

    merged, closed_issue = checked(signed)
    pull = merged.payload["pull_request"]
    assert (merged.event, merged.action, pull["merged"]) == ("pull_request", "closed", True)
    assert (pull["merge_commit_sha"], pull["merged_by"]["login"]) == (sha, "bob")
    assert (closed_issue.event, closed_issue.action) == ("issues", "closed")
    assert closed_issue.payload["issue"]["number"] == issue
    assert closed_issue.payload["issue"]["state"] == "closed"
    assert closed_issue.payload["sender"]["login"] == "bob"
    assert "organization" not in closed_issue.payload  # the template's org is not ours
    assert signed.issue(OWNER, NAME, other).state == "open"
    repo = signed.state.repo(OWNER, NAME)
    assert not (repo.path / "refs" / "heads" / "feature").exists()


async def test_a_conflicting_merge_is_refused(signed: FakeGitHub, tmp_path: Path) -> None:
    number = await open_review_pull(signed, tmp_path / "work")
    await signed.push_to_branch(OWNER, NAME, "main", "bob", {FILE: "theirs\n"})
    with pytest.raises(Exception, match="Merge conflict"):
        await signed.merge_pr(OWNER, NAME, number, "bob")
    assert signed.issue(OWNER, NAME, number).state == "open"
    assert signed.deliveries == []


async def test_deleting_the_head_branch_closes_the_pull_request(
    signed: FakeGitHub, tmp_path: Path
) -> None:
    number = await open_review_pull(signed, tmp_path / "work")
    await signed.delete_head_branch(OWNER, NAME, number, "alice")
    [closed] = checked(signed)
    assert (closed.action, closed.payload["pull_request"]["merged"]) == ("closed", False)
    assert closed.payload["pull_request"]["head"]["ref"] == "feature"


async def test_the_schema_check_catches_a_payload_that_lacks_or_mistypes_a_field(
    signed: FakeGitHub, tmp_path: Path
) -> None:
    number = await open_review_pull(signed, tmp_path / "work")
    await signed.review_pr(OWNER, NAME, number, "bob", "approved")
    payload = json.loads(signed.deliveries[-1].body)
    del payload["review"]["commit_id"]
    payload["review"]["state"] = "APPROVED"  # REST's spelling, not the webhook's
    assert webhook_errors("pull_request_review", payload) == [
        "review.state: 'APPROVED' is not one of ['commented', 'changes_requested', 'approved',"
        " 'dismissed']",
        "review: 'commit_id' is a required property",
    ]


async def test_a_protected_remote_refuses_a_forced_push_over_a_persons_commit(
    tmp_path: Path, pem: str
) -> None:
    hub = FakeGitHub(tmp_path / "remotes", private_key_pem=pem)
    hub.add_repo(OWNER, NAME, refuse_force_pushes=True)
    number = await open_review_pull(hub, tmp_path / "work")
    theirs = await hub.push_to_head(OWNER, NAME, number, "carol", {"theirs.txt": "mine\n"})
    work = tmp_path / "work"
    git(work, "commit", "-q", "--allow-empty", "-m", "ours, not on top of carol's")
    with pytest.raises(subprocess.CalledProcessError):
        git(work, "push", "-q", "--force", "origin", "feature")
    assert hub.issue(OWNER, NAME, number).pull.head_sha == theirs  # type: ignore[union-attr]
    git(work, "pull", "-q", "--no-rebase", "--no-edit", "origin", "feature")
    git(work, "push", "-q", "origin", "feature")  # merged in: a fast-forward
