"""What the App decides once a job's pull request, issue or installation changes, from commands
and facts alone (no GitHub, no store): every branch of `decide_pull`, `decide_closed`,
`decide_unlabeled`, `decide_removed`, the k-th job of `decide_label`, `/reopen` from a
comment, and what the tracking comment says of the pull request."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from conftest import Load

from bot.github.outbound import Outbound
from bot.github.subject import Subject
from bot.github.tracking import DRAFT_HOLD, pull_gone_body, tracking_body
from bot.handlers.actions import (
    Control,
    EndPull,
    Ignore,
    LeaveRepos,
    PostOnce,
    React,
    Report,
    SetPull,
    StartJob,
    WithdrawJob,
    job_key,
    job_ordinal,
)
from bot.handlers.commands import parse_reply
from bot.handlers.deliveries import (
    CommentAdded,
    IssueClosed,
    LabelAdded,
    LabelRemoved,
    PullAction,
    PullChanged,
    ReposRemoved,
)
from bot.handlers.installation import InstalledJob, decide_removed
from bot.handlers.issue_comment import CommentFacts, decide_comment
from bot.handlers.issue_withdrawal import IssueFacts, decide_closed, decide_unlabeled
from bot.handlers.issues import LabelFacts, decide_label
from bot.handlers.payloads import Actor, Issue, Repo, parse_command
from bot.handlers.performers import job_branch
from bot.handlers.pull_request import PullFacts, decide_pull
from bot.handlers.repos import load_config, with_decider
from orchestrator.api import (
    JobRecord,
    JobStatus,
    Pull,
    PullState,
    load_organisation,
    shipped_org_dir,
)
from orchestrator.core.messages import Usage

REPO = Repo("octo", "widgets", "main", installation_id=5, private=False)
ISSUE = Issue(3, "Fix it", "Please.", is_pull_request=False, labels=("teaparty",))
BOB = Actor("bob", is_bot=False)
SUBJECT = Subject("octo", "widgets", 3, 5, "main", "Fix it", "alice", "alice", "teaparty")
KEY = "github:octo/widgets#3"


def job(state: str = "complete", job_id: int = 7, key: str = KEY) -> JobRecord:
    return JobRecord(job_id, key, "octo-widgets", "Fix it", state)


def pull(state: PullState = "open") -> Pull:
    return Pull(7, 12, "https://github.com/octo/widgets/pull/12", state)


def changed(action: PullAction, *, merged: bool = False, draft: bool = False) -> PullChanged:
    return PullChanged(REPO, 12, action, merged, draft, "teaparty/job-3-fix-it", BOB)


# pull_request


def test_a_pull_request_of_no_job_is_ignored() -> None:
    assert decide_pull(changed("closed"), PullFacts()) == (Ignore("pull request #12 is no job's"),)


def test_merged_closed_and_gone() -> None:
    facts = PullFacts(job(), pull(), SUBJECT)
    assert decide_pull(changed("closed", merged=True), facts) == (EndPull(7, "merged", "bob"),)
    assert decide_pull(changed("closed"), replace(facts, branch_exists=True)) == (
        EndPull(7, "closed", "bob"),
    )
    gone = decide_pull(changed("closed"), replace(facts, branch_exists=False))
    body = pull_gone_body(
        "pull-gone:7", number=12, branch="teaparty/job-3-fix-it", label="teaparty"
    )
    assert gone == (EndPull(7, "gone", "bob"), PostOnce("pull-gone:7", body))
    assert "remove the `teaparty` label and add it again" in body


def test_draft_ready_and_reopened() -> None:
    facts = PullFacts(job(), pull(), SUBJECT)
    assert decide_pull(changed("converted_to_draft"), facts) == (SetPull(7, "draft", "bob"),)
    assert decide_pull(changed("ready_for_review"), facts) == (SetPull(7, "open", "bob"),)
    assert decide_pull(changed("reopened"), facts) == (SetPull(7, "open", "bob"),)
    assert decide_pull(changed("reopened", draft=True), facts) == (SetPull(7, "draft", "bob"),)


@pytest.mark.parametrize("state", ["merged", "gone"])
def test_an_ended_pull_request_is_not_drafted_or_readied(state: PullState) -> None:
    facts = PullFacts(job(), pull(state), SUBJECT)
    assert decide_pull(changed("ready_for_review"), facts) == (
        Ignore(f"job 7's pull request has ended ({state})", 7),
    )


# issues.closed, issues.unlabeled


def closed() -> IssueClosed:
    return IssueClosed(REPO, ISSUE, BOB)


def unlabeled(label: str = "teaparty") -> LabelRemoved:
    return LabelRemoved(REPO, ISSUE, label, BOB)


def test_a_closed_issue_withdraws_only_a_running_job() -> None:
    assert decide_closed(closed(), IssueFacts()) == (Ignore("the issue has no job"),)
    for state in ("complete", "withdrawn"):  # `Closes #N` after the merge: nothing
        assert decide_closed(closed(), IssueFacts(job(state))) == (
            Ignore(f"job 7 has ended ({state})", 7),
        )
    running = IssueFacts(job("active"), "teaparty")
    assert decide_closed(closed(), running) == (WithdrawJob(7, "bob", "closed the issue"),)
    merged = replace(running, merged=True)  # the merge closed it, before GitHub said so
    assert decide_closed(closed(), merged) == (EndPull(7, "merged", "bob"),)
    on_pull = IssueClosed(REPO, replace(ISSUE, is_pull_request=True), BOB)
    assert decide_closed(on_pull, running) == (
        Ignore("a pull request's close is pull_request.closed"),
    )


def test_the_trigger_label_removed_withdraws_a_running_job() -> None:
    running = IssueFacts(job("active"), "teaparty")
    assert decide_unlabeled(unlabeled(), running) == (
        WithdrawJob(7, "bob", "removed the `teaparty` label"),
    )
    assert decide_unlabeled(unlabeled("bug"), running) == (
        Ignore("label 'bug' did not start job 7", 7),
    )
    assert decide_unlabeled(unlabeled(), IssueFacts()) == (Ignore("the issue has no job"),)
    assert decide_unlabeled(unlabeled(), IssueFacts(job())) == (
        Ignore("job 7 has ended (complete)", 7),
    )
    stopped = replace(running, failed=True)  # remove and add again: how a stopped job retries
    assert decide_unlabeled(unlabeled(), stopped) == (
        Ignore("job 7 is stopped by an error: adding the label again retries it", 7),
    )


# installation.deleted, installation_repositories.removed


def test_the_app_leaves_the_jobs_of_the_repositories_it_lost() -> None:
    jobs = (
        InstalledJob(1, "active", 5, "octo/widgets"),
        InstalledJob(2, "complete", 5, "octo/widgets"),
        InstalledJob(3, "active", 5, "octo/gadgets"),
        InstalledJob(4, "active", 6, "elsewhere/widgets"),
    )
    some = ReposRemoved(5, ("octo/widgets", "octo/empty"), BOB)
    assert decide_removed(some, jobs) == (LeaveRepos((1,), ("octo/widgets", "octo/empty"), "bob"),)
    every = ReposRemoved(5, None, BOB)  # an uninstall that does not list them: all of it
    assert decide_removed(every, jobs) == (
        LeaveRepos((1, 3), ("octo/widgets", "octo/gadgets"), "bob"),
    )
    assert decide_removed(ReposRemoved(9, None, BOB), jobs) == (
        Ignore("installation 9: no repository of a job"),
    )


# the k-th job


def test_job_keys_and_branches_of_an_issues_jobs() -> None:
    assert job_key("octo", "widgets", 3) == KEY
    assert job_key("octo", "widgets", 3, 2) == f"{KEY}/2"
    assert [job_ordinal(k) for k in (KEY, f"{KEY}/2", f"{KEY}/11", "local:/x#3/y")] == [
        1,
        2,
        11,
        1,
    ]
    assert job_branch(3, 1, "fix-it") == "teaparty/job-3-fix-it"
    assert job_branch(3, 2, "fix-it") == "teaparty/job-3-2-fix-it"


@pytest.fixture(scope="module")
def label_facts() -> LabelFacts:
    org = load_organisation(shipped_org_dir())
    loaded = load_config(None, owner="octo", repo="widgets", org=org)
    return LabelFacts(with_decider(loaded, "alice", owner="octo", repo="widgets", org=org), "write")


def labelled() -> LabelAdded:
    return LabelAdded(REPO, ISSUE, "teaparty", Actor("alice", is_bot=False))


@pytest.mark.parametrize(
    ("record", "found", "ordinal"),
    [
        (job("complete"), pull("merged"), 2),
        (job("complete"), pull("closed"), 2),
        (job("complete"), pull("gone"), 2),
        (job("complete"), None, 2),  # it changed nothing: no pull request
        (job("withdrawn"), pull("open"), 2),  # cancelled: its pull request is left to people
        (job("complete", key=f"{KEY}/2"), pull("merged"), 3),
    ],
)
def test_the_label_after_a_finished_job_starts_the_next(
    label_facts: LabelFacts, record: JobRecord, found: Pull | None, ordinal: int
) -> None:
    react, start = decide_label(labelled(), replace(label_facts, job=record, pull=found))
    assert react == React("eyes")
    assert isinstance(start, StartJob)
    assert start.ordinal == ordinal


def test_the_label_while_a_done_jobs_pull_request_is_open_starts_nothing(
    label_facts: LabelFacts,
) -> None:
    facts = replace(label_facts, job=job("complete"), pull=pull("draft"))
    assert decide_label(labelled(), facts) == (
        Report("job 7 is done and its pull request #12 is open: review it there", 7),
    )
    running = decide_label(labelled(), replace(label_facts, job=job("active"), pull=pull()))
    assert isinstance(running[-1], StartJob)  # a running job: its failures are retried
    assert running[-1].ordinal == 1


# /reopen


def test_reopen_is_a_deciders_order(payload: Load) -> None:
    assert [c.name for c in parse_reply("/reopen").job_commands] == ["reopen"]
    data = payload("issue_comment.created.with-installation")
    data["comment"]["body"] = "/reopen"
    command = parse_command("issue_comment", data, app_login="teaparty[bot]")
    assert isinstance(command, CommentAdded)
    author = command.author.login
    subject = replace(SUBJECT, decider=author)
    facts = CommentFacts(job(), subject, author_access="write")
    ref = f"github:comment:{command.comment_id}"
    assert decide_comment(command, facts) == (
        Control(7, "reopen", "", by=author, ref=ref),
        React("+1", comment_id=command.comment_id),
    )
    other = replace(facts, subject=replace(SUBJECT, decider="alice"))
    assert decide_comment(command, other) == (
        React("confused", comment_id=command.comment_id),
        Ignore(f"{author} may not /reopen job 7", 7),
    )


# the tracking comment


def status(pull_state: PullState | None, **more: Any) -> JobStatus:
    return JobStatus(
        7,
        "Fix it",
        "done",
        "done",
        (),
        Usage(0, 0),
        0.0,
        "teaparty/job-3-fix-it",
        link="https://github.com/octo/widgets/pull/12",
        pull=pull_state,
        **more,
    )


@pytest.mark.parametrize(
    ("state", "note", "footer"),
    [
        ("merged", "(merged)", "The pull request was merged: the job is finished"),
        ("closed", "(closed without merging)", "comment `/reopen` here while its branch"),
        ("gone", "(closed: its branch was deleted)", "branch was deleted, so the job is closed"),
        ("draft", "(a draft)", "review rounds wait until it is ready"),
    ],
)
def test_the_tracking_comment_says_what_became_of_the_pull_request(
    state: PullState, note: str, footer: str
) -> None:
    body = tracking_body(
        status(state), branch_url=None, trigger_label="teaparty", agent=Outbound("o", "w", 3)
    )
    assert f"**Pull request:** https://github.com/octo/widgets/pull/12 {note}" in body
    assert footer in body
    assert "To retry a stopped job" not in body


def test_the_tracking_comment_of_an_open_pull_request_is_as_before() -> None:
    body = tracking_body(
        status("open"), branch_url=None, trigger_label="teaparty", agent=Outbound("o", "w", 3)
    )
    assert "**Pull request:** https://github.com/octo/widgets/pull/12\n" in body
    assert "To retry a stopped job, remove the `teaparty` label" in body


def test_a_drafts_hold_is_said_as_one() -> None:
    held = replace(status("draft"), state="working", paused_by="bob (the pull request is a draft)")
    body = tracking_body(held, branch_url=None, trigger_label="t", agent=Outbound("o", "w", 3))
    assert "**Paused**: bob made the pull request a draft; it resumes when ready." in body
    assert "until `/resume`" not in body


def test_the_apps_early_draft_is_not_a_persons_hold() -> None:
    working = replace(status("draft"), state="working")
    body = tracking_body(
        working, branch_url=None, trigger_label="teaparty", agent=Outbound("o", "w", 3)
    )
    assert "a draft while the job works: ready at its end" in body
    assert "Paused" not in body
    held = replace(working, paused_by=f"alice {DRAFT_HOLD}")
    body = tracking_body(
        held, branch_url=None, trigger_label="teaparty", agent=Outbound("o", "w", 3)
    )
    assert "review rounds wait until it is ready" in body
    assert "**Paused**: alice made the pull request a draft" in body
