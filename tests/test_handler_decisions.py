"""bot.handlers: what the App decides about a label or a comment, from real payloads and facts
alone (no GitHub, no store): every branch of `decide_label` and `decide_comment`."""

from __future__ import annotations

import pytest
from conftest import Load
from fakes import unanswered_gate

from bot.github.subject import Subject
from bot.github.tracking import config_error_body, marker, no_sandbox_body, refusal_body
from bot.handlers.actions import AnswerGate, Ignore, Later, PostOnce, React, Report, StartJob
from bot.handlers.deliveries import CommentAdded, LabelAdded
from bot.handlers.issue_comment import CommentFacts, comment_ref, decide_comment
from bot.handlers.issues import LabelFacts, brief, decide_label, no_sandbox
from bot.handlers.payloads import parse_command
from bot.handlers.repos import (
    DEFAULT_LABEL,
    RepoConfig,
    load_config,
    project_name,
    trigger_label,
    with_decider,
)
from orchestrator.api import (
    Gate,
    JobRecord,
    Organisation,
    Pull,
    PullState,
    load_organisation,
    shipped_org_dir,
)

OWNER, REPO = "Codertocat", "Hello-World"
INSTALLATION = 27216354
KEY = f"github:{OWNER}/{REPO}#1"

COMMENT_ID = 492700400  # issue_comment.created.with-installation.json


@pytest.fixture(scope="module")
def org() -> Organisation:
    return load_organisation(shipped_org_dir())


def config(org: Organisation, text: str | None) -> RepoConfig:
    """The config a repository with this project file (None: none) has, Codertocat asking."""
    loaded = load_config(text, owner=OWNER, repo=REPO, org=org)
    return with_decider(loaded, "Codertocat", owner=OWNER, repo=REPO, org=org)


def labelled(payload: Load, label: str = DEFAULT_LABEL, **issue: object) -> LabelAdded:
    """issues.labeled from Codertocat on Hello-World#1, through an installation."""
    data = payload("issues.labeled")
    data["label"]["name"] = label
    data["installation"] = {"id": INSTALLATION}
    data["issue"] |= issue
    command = parse_command("issues", data, app_login="teaparty[bot]")
    assert isinstance(command, LabelAdded)
    return command


def job(state: str, job_id: int = 7) -> JobRecord:
    return JobRecord(job_id, KEY, project_name(OWNER, REPO), "Spelling error", state)


# issues.labeled


def test_a_label_on_a_pull_request_starts_nothing(payload: Load) -> None:
    command = labelled(payload, pull_request={"url": "https://api.github.com/pulls/1"})
    assert decide_label(command, LabelFacts()) == (Ignore("labels on pull requests start nothing"),)


def test_a_delivery_without_an_installation_starts_nothing(payload: Load) -> None:
    data = payload("issues.labeled")
    data["label"]["name"] = DEFAULT_LABEL
    command = parse_command("issues", data, app_login="teaparty[bot]")
    assert isinstance(command, LabelAdded)
    assert command.repo.installation_id is None
    assert decide_label(command, LabelFacts()) == (Ignore("the delivery names no installation"),)


def test_a_label_that_is_not_the_trigger_is_ignored(payload: Load, org: Organisation) -> None:
    facts = LabelFacts(config(org, None))  # nothing more is asked: no permission, no job
    assert decide_label(labelled(payload, "bug"), facts) == (
        Ignore("label 'bug' is not the trigger 'teaparty'"),
    )


def test_the_trigger_label_comes_from_the_project_file(payload: Load, org: Organisation) -> None:
    own = config(org, "humans: {decider: Codertocat}\ntrigger_label: agents\n")
    assert trigger_label(own) == "agents"
    assert decide_label(labelled(payload), LabelFacts(own)) == (
        Ignore("label 'teaparty' is not the trigger 'agents'"),
    )
    started = decide_label(labelled(payload, "agents"), LabelFacts(own, "write"))
    assert isinstance(started[-1], StartJob)
    assert started[-1].subject.trigger_label == "agents"


@pytest.mark.parametrize("permission", ["read", "triage", "none", None])
def test_a_sender_without_write_access_hears_once_why(
    payload: Load, org: Organisation, permission: str | None
) -> None:
    command = labelled(payload)
    actions = decide_label(command, LabelFacts(config(org, None), permission))
    assert actions == (
        PostOnce("refused:codertocat", refusal_body("Codertocat", label="teaparty")),
        Report("refused: Codertocat has no write access"),
    )
    assert marker("refused:codertocat") in refusal_body("Codertocat", label="teaparty")
    assert actions[-1].outcome == ("refused: Codertocat has no write access", None)


def test_a_broken_project_file_is_quoted_once(payload: Load, org: Organisation) -> None:
    broken = config(org, "humans: {decider: Codertocat}\nnonsense: 1\n")
    assert broken.project is None
    assert broken.error
    actions = decide_label(labelled(payload), LabelFacts(broken, "admin"))
    assert actions == (
        PostOnce("config-error", config_error_body(broken.error, label="teaparty")),
        Report(f"config error: {broken.error}"),
    )


@pytest.mark.parametrize("state", ["open", "draft"])
def test_a_done_job_with_its_pull_request_open_is_not_started_again(
    payload: Load, org: Organisation, state: PullState
) -> None:
    pull = Pull(7, 12, "https://github.com/Codertocat/Hello-World/pull/12", state)
    facts = LabelFacts(config(org, None), "write", job("complete"), pull)
    assert decide_label(labelled(payload), facts) == (
        Report("job 7 is done and its pull request #12 is open: review it there", 7),
    )


@pytest.mark.parametrize("existing", [None, "active"])
@pytest.mark.parametrize("permission", ["write", "admin"])
def test_a_writer_starts_the_job_or_retries_the_active_one(
    payload: Load, org: Organisation, permission: str, existing: str | None
) -> None:
    command = labelled(payload)
    repo_config = config(org, None)
    facts = LabelFacts(repo_config, permission, None if existing is None else job(existing))
    react, start = decide_label(command, facts)
    assert react == React("eyes")
    assert isinstance(start, StartJob)
    project = repo_config.project
    assert project is not None
    assert project.name == project_name(OWNER, REPO)
    subject = Subject(
        OWNER,
        REPO,
        1,
        INSTALLATION,
        "master",
        "Spelling error in the README file",
        "Codertocat",
        "Codertocat",  # no project file: the requester decides
        "teaparty",
    )
    assert start == StartJob(
        subject,
        project,
        brief(subject, project, body=command.issue.body),
        project_text=repo_config.text,
        issue_body=command.issue.body,
    )
    assert "Job from GitHub issue Codertocat/Hello-World#1" in start.brief
    assert "It looks like you accidently spelled 'commit'" in start.brief


def test_the_project_files_decider_decides(payload: Load, org: Organisation) -> None:
    text = "humans: {decider: octocat}\n"
    _, start = decide_label(labelled(payload), LabelFacts(config(org, text), "write"))
    assert isinstance(start, StartJob)
    assert (start.subject.requester, start.subject.decider) == ("Codertocat", "octocat")
    assert start.project_text == text


def test_an_issue_without_a_body_is_briefed_by_its_title(payload: Load, org: Organisation) -> None:
    _, start = decide_label(labelled(payload, body=None), LabelFacts(config(org, None), "write"))
    assert isinstance(start, StartJob)
    assert "Spelling error in the README file\n</issue>" in start.brief


def test_a_host_without_a_sandbox_says_so_once() -> None:
    assert no_sandbox("no bwrap", label="agents") == (
        PostOnce("no-sandbox", no_sandbox_body("no bwrap", label="agents")),
        Report("refused: no bwrap"),
    )


# issue_comment.created


def commented(payload: Load, body: str | None = None, *, login: str = "Codertocat") -> CommentAdded:
    data = payload("issue_comment.created.with-installation")
    data["comment"]["user"]["login"] = login
    if body is not None:
        data["comment"]["body"] = body
    command = parse_command("issue_comment", data, app_login="teaparty[bot]")
    assert isinstance(command, CommentAdded)
    return command


def subject(decider: str) -> Subject:
    return Subject(OWNER, REPO, 1, 1, "master", "Spelling", "Codertocat", decider, "teaparty")


def gate(
    gate_id: int, *, posted: str | None = "100", digest: str = "", hashed_at: float = 0.0
) -> Gate:
    """A gate of job 7 whose question is the comment `posted` (None: not posted yet)."""
    digest = digest or f"{gate_id:x}" * 40
    return unanswered_gate(
        gate_id,
        7,
        conversation_id="c-1",
        call_id="call-1",
        options=("yes", "no"),
        comment_ref=posted,
        content_hash=digest[:64],
        hashed_at=hashed_at,
    )


def test_a_comment_on_an_issue_without_a_job_is_ignored(payload: Load) -> None:
    assert decide_comment(commented(payload), CommentFacts()) == (Ignore("no job on this issue"),)


def test_a_job_the_app_did_not_start_is_not_answered(payload: Load) -> None:
    facts = CommentFacts(job("active"), subject=None)  # e.g. started by `teaparty run`
    assert decide_comment(commented(payload), facts) == (Ignore("no job on this issue"),)


def test_a_comment_when_nothing_is_asked_is_ignored(payload: Load) -> None:
    facts = CommentFacts(job("active"), subject("Codertocat"), gates=())
    actions = decide_comment(commented(payload), facts)
    assert actions == (Ignore("the job has no open question", 7),)
    assert actions[0].outcome == ("ignored: the job has no open question", 7)


def test_only_the_decider_answers(payload: Load) -> None:
    facts = CommentFacts(job("active"), subject("octocat"), gates=(gate(3),))
    assert decide_comment(commented(payload), facts) == (
        Ignore("Codertocat is not the decider", 7),
    )


@pytest.mark.parametrize("login", ["octocat", "OctoCat"])
def test_the_deciders_reply_answers_the_only_question(payload: Load, login: str) -> None:
    facts = CommentFacts(job("active"), subject("octocat"), gates=(gate(3),), author_access="write")
    assert decide_comment(commented(payload, "  yes, go  ", login=login), facts) == (
        AnswerGate(7, 3, "yes, go", answered_by=login, ref=comment_ref(COMMENT_ID)),
        React("+1", comment_id=COMMENT_ID),
    )


def test_a_reply_answers_the_oldest_question_posted_before_it(payload: Load) -> None:
    later = str(COMMENT_ID + 1)
    facts = CommentFacts(
        job("active"),
        subject("Codertocat"),
        gates=(gate(3, posted=later), gate(5)),
        author_access="admin",
    )
    assert decide_comment(commented(payload, "ok"), facts) == (
        AnswerGate(7, 5, "ok", answered_by="Codertocat", ref=comment_ref(COMMENT_ID)),
        React("+1", comment_id=COMMENT_ID),
    )


@pytest.mark.parametrize("posted", [str(COMMENT_ID + 1), "not-a-github-id"])
def test_a_reply_older_than_every_posted_question_answers_none(
    payload: Load, posted: str | None
) -> None:
    facts = CommentFacts(job("active"), subject("Codertocat"), gates=(gate(3, posted=posted),))
    assert decide_comment(commented(payload, "ok"), facts) == (
        Ignore("the comment came before the open question was posted", 7),
    )


def test_a_reply_while_the_question_is_being_posted_is_decided_later(payload: Load) -> None:
    """GitHub shows the question before the App has recorded it (a 502 after posting)."""
    facts = CommentFacts(job("active"), subject("Codertocat"), gates=(gate(3, posted=None),))
    assert decide_comment(commented(payload, "ok"), facts) == (
        Later("a question of job 7 is being posted"),
    )


def test_a_comment_that_answered_a_gate_answers_nothing_more(payload: Load) -> None:
    """Seen again (a redelivery, a catch-up pass), it does not answer the next question."""
    facts = CommentFacts(job("active"), subject("Codertocat"), gates=(gate(5),), answered=3)
    assert decide_comment(commented(payload, "ok"), facts) == (
        Ignore(f"comment {COMMENT_ID} answered gate 3", 7),
    )


def test_an_empty_reply_is_still_an_answer(payload: Load) -> None:
    facts = CommentFacts(
        job("active"), subject("Codertocat"), gates=(gate(3),), author_access="write"
    )
    assert decide_comment(commented(payload, " \n "), facts) == (
        AnswerGate(7, 3, "(empty reply)", answered_by="Codertocat", ref=comment_ref(COMMENT_ID)),
        React("+1", comment_id=COMMENT_ID),
    )


# The proxy's label


def test_a_writers_auto_label_lets_the_proxy_decide_the_running_job(
    payload: Load, org: Organisation
) -> None:
    from bot.handlers.actions import AutoProxy

    command = labelled(payload, "teaparty-auto")
    facts = LabelFacts(config(org, None), "write", job("active"))
    assert decide_label(command, facts) == (AutoProxy(7, by="Codertocat"), React("eyes"))
    assert decide_label(command, LabelFacts(config(org, None), "read", job("active"))) == (
        Ignore("Codertocat may not let the proxy decide (no write access)"),
    )
    assert decide_label(command, LabelFacts(config(org, None), "write", job("complete"))) == (
        Ignore("label 'teaparty-auto': the issue has no running job"),
    )
    own = config(org, "humans: {decider: Codertocat}\nproxy: {auto_label: robots-ok}\n")
    assert decide_label(command, LabelFacts(own, "write", job("active"))) == (
        Ignore("label 'teaparty-auto' is not the trigger 'teaparty'"),
    )
    assert decide_label(labelled(payload, "robots-ok"), LabelFacts(own, "write", job("active")))[
        0
    ] == AutoProxy(7, by="Codertocat")
