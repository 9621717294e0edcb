"""The example caller's job-level `if:` (docs/runner/teaparty-caller.yml) against real webhook
payloads: the events that can concern a job start a runner, the App's own and unlabelled
issues' do not.

Each case starts from a delivery in tests/payloads and changes only what it is about (the
label, who wrote, the pull request's branch), and departs no further from octokit's schema of
its event than the delivery it started from. The `if:` is evaluated by
tests/actions_expressions.py, which refuses what it does not understand, so a more elaborate
`if:` fails here instead of passing.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from actions_expressions import job_runs
from webhook_schemas import webhook_errors
from workflow_files import CALLER, load

Payload = dict[str, Any]
Load = Callable[[str], Payload]
LABEL = "teaparty"
ACTIONS_BOT = ("github-actions[bot]", 41898282)  # the author of whatever GITHUB_TOKEN writes
APP_BOT = ("teaparty-app[bot]", 123456789)  # an App the bot runs as (App-token mode)
MERGE_QUEUE = ("github-merge-queue[bot]", 118344674)


@dataclass(frozen=True)
class Case:
    """A delivery (tests/payloads/<source>.json), changed as described, and whether it runs."""

    source: str
    runs: bool
    labelled: bool = False  # the issue carries the trigger label
    label: str | None = None  # the label a labeled/unlabeled event is about
    author: tuple[str, int] | None = None  # a bot who did it (sender, and comment/review author)
    branch: str | None = None  # the pull request's head branch
    body: str | None = None  # the comment's text
    action: str | None = None
    changes: dict[str, Any] = field(default_factory=dict)
    run_branch: str | None = None  # the branch a workflow run ran on

    @property
    def event(self) -> str:
        return self.source.split(".", 1)[0]


CASES = {
    "the trigger label added": Case("issues.labeled", True, labelled=True, label=LABEL),
    "another label added": Case("issues.labeled", False),
    "the trigger label added by a bot": Case(
        "issues.labeled", False, labelled=True, label=LABEL, author=APP_BOT
    ),
    "the trigger label removed": Case("issues.unlabeled", True, label=LABEL),
    "another label removed": Case("issues.unlabeled", False),
    "a labelled issue closed": Case("issues.closed", True, labelled=True),
    "a labelled issue closed by a bot": Case("issues.closed", True, labelled=True, author=APP_BOT),
    "an unlabelled issue closed": Case("issues.closed", False),
    "a labelled issue edited": Case("issues.edited", True, labelled=True),
    "an unlabelled issue edited": Case("issues.edited", False),
    "a person's comment on a labelled issue": Case("issue_comment.created", True, labelled=True),
    "a person's comment on an unlabelled issue": Case("issue_comment.created", False),
    "github-actions[bot]'s comment": Case(
        "issue_comment.created", False, labelled=True, author=ACTIONS_BOT
    ),
    "the App's own comment": Case("issue_comment.created", False, labelled=True, author=APP_BOT),
    "/teaparty on a pull request": Case(
        "issue_comment.created.on-pull-request", True, body="/teaparty the docs too, please"
    ),
    "/teaparty by a bot": Case(
        "issue_comment.created.on-pull-request", False, body="/teaparty", author=ACTIONS_BOT
    ),
    "another comment on a pull request": Case("issue_comment.created.on-pull-request", False),
    "TeaParty's pull request closed": Case("pull_request.closed", True, branch="teaparty/job-1-x"),
    "TeaParty's pull request merged by the merge queue": Case(
        "pull_request.closed",
        True,
        branch="teaparty/job-1-x",
        author=MERGE_QUEUE,
        changes={"merged": True},
    ),
    "another pull request closed": Case("pull_request.closed", False),
    "TeaParty's pull request made a draft": Case(
        "pull_request.closed",
        True,
        branch="teaparty/job-1-x",
        action="converted_to_draft",
        changes={"state": "open", "closed_at": None, "draft": True},
    ),
    "TeaParty's pull request made ready by a bot": Case(
        "pull_request.closed",
        False,
        branch="teaparty/job-1-x",
        author=APP_BOT,
        action="ready_for_review",
        changes={"state": "open", "closed_at": None},
    ),
    "a review of TeaParty's pull request": Case(
        "pull_request_review.submitted", True, branch="teaparty/job-2-y"
    ),
    "a bot's review of TeaParty's pull request": Case(
        "pull_request_review.submitted", False, branch="teaparty/job-2-y", author=APP_BOT
    ),
    "a review of another pull request": Case("pull_request_review.submitted", False),
    "a person's review comment on TeaParty's pull request": Case(
        "pull_request_review_comment.created", True, branch="teaparty/job-2-y"
    ),
    "the App's reply in a review thread": Case(
        "pull_request_review_comment.created", False, branch="teaparty/job-2-y", author=APP_BOT
    ),
    "CI completed on TeaParty's pull request, pushed by the App": Case(
        "workflow_run.completed.with-pull-requests",
        True,
        author=APP_BOT,
        run_branch="teaparty/job-2-y",
    ),
    "CI completed on another branch": Case("workflow_run.completed.with-pull-requests", False),
}


def build(case: Case, payload: Load) -> Payload:
    """The case's delivery: its source payload with the case's changes."""
    data = payload(case.source)
    issue = data.get("issue") or {}
    labels = issue.get("labels", [])
    template = copy.deepcopy(data.get("label") or (labels[0] if labels else {"name": "bug"}))
    if case.label is not None:
        data["label"] = template | {"name": case.label}
    if case.labelled:
        labels.append(template | {"name": LABEL, "id": 1})
    if case.author is not None:
        login, user_id = case.author
        for holder in (data, data.get("comment"), data.get("review")):
            key = "sender" if holder is data else "user"
            if holder is not None:
                holder[key] = holder[key] | {"login": login, "id": user_id, "type": "Bot"}
    if case.body is not None:
        data["comment"]["body"] = case.body
    if case.action is not None:
        data["action"] = case.action
    if case.run_branch is not None:
        data["workflow_run"]["head_branch"] = case.run_branch
    return _pull(case, data)


def _pull(case: Case, data: Payload) -> Payload:
    """The case's changes to the delivery's pull request."""
    pull: Any = data.get("pull_request")
    if case.branch is not None:
        pull["head"]["ref"] = case.branch
    if case.changes:
        pull |= case.changes
    return data


def caller_if() -> str:
    (job,) = load(CALLER)["jobs"].values()
    return str(job["if"])


@pytest.mark.parametrize("name", list(CASES))
def test_the_callers_if_starts_a_runner_only_for_events_that_can_concern_a_job(
    name: str, payload: Load
) -> None:
    case = CASES[name]
    data = build(case, payload)
    # still a delivery GitHub could send: no departure from the schema the source lacks (the
    # third-party sources predate a few fields; tests/payloads/SOURCES.md)
    assert webhook_errors(case.event, data) == webhook_errors(case.event, payload(case.source))
    assert job_runs(caller_if(), event_name=case.event, event=data) is case.runs


def test_a_continuation_always_runs(payload: Load) -> None:
    # what GitHub delivers for a workflow_dispatch without inputs, sent with GITHUB_TOKEN
    labeled = payload("issues.labeled")
    login, user_id = ACTIONS_BOT
    dispatch = {
        "inputs": None,
        "ref": "refs/heads/master",
        "repository": labeled["repository"],
        "sender": labeled["sender"] | {"login": login, "id": user_id, "type": "Bot"},
        "workflow": ".github/workflows/teaparty.yml",
    }
    assert job_runs(caller_if(), event_name="workflow_dispatch", event=dispatch)


def test_every_event_the_caller_listens_to_is_tried_both_ways() -> None:
    events = set(load(CALLER)["on"]) - {"workflow_dispatch"}
    for runs in (True, False):
        tried = {case.event for case in CASES.values() if case.runs is runs}
        assert tried == events, f"runs={runs}"
