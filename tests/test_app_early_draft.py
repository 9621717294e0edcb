"""The early draft on GitHub (`pull_request: {draft: early}`): the App runs in this process
against the local stand-in, whose bare remote logs every ref update it receives.

The draft opens once the plan is approved (not before), the job branch moves by one push per
task merge, a change to a protected path is pushed only once its gate is approved, and the
pull request is marked ready at the end. Without the setting nothing of this happens: one
push, one pull request opened ready, at the end.
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from app_harness import (
    NOWHERE,
    OWNER,
    REPO,
    app_settings,
    approve_plan,
    ask_plan,
    bodies,
    in_process,
    protected_question,
    until,
    world,
)

from bot.fakehub.hub import FakeGitHub
from bot.fakehub.state import HubIssue
from orchestrator.core.messages import AssistantTurn, ToolCall
from orchestrator.core.model import ModelRequest
from orchestrator.jobs.early_draft import PLAN_COMMIT
from orchestrator.jobs.offline import DemoModel

pytestmark = pytest.mark.timeout(180)
EARLY = "humans: {decider: alice}\npull_request: {draft: early}\n"
CI = ".github/workflows/ci.yml"


class TwoTasks(DemoModel):
    """The demo organisation with a lead that plans two tasks and runs them one after the
    other: the first writes docs/one.md, the second `second`."""

    def __init__(self, second: str) -> None:
        super().__init__(title="Two things", body="Do two things.", path="docs/one.md")
        self.second = second

    def _lead(self, request: ModelRequest) -> AssistantTurn:
        if request.messages and "on the job's pull request" in request.messages[0].text:
            return super()._lead(request)  # a review round, as the demo's lead works one
        results = [m for m in request.messages if m.role == "tool"]
        if not any(m.role == "assistant" for m in request.messages):
            return _create("t1", "One", "docs/one.md")
        last = results[-1]
        if last.call_id == "t1":
            return _create("t2", "Two", self.second)
        if last.call_id in ("t2", "run1"):
            number = 1 if last.call_id == "t2" else 2
            return _tool(f"run{number}", "dispatch", task=number, brief="As its spec says.")
        return AssistantTurn(text=f"Done. {last.text}")


def _create(call_id: str, title: str, path: str) -> AssistantTurn:
    spec = (
        f"Record this request in {path} and commit it.\nTitle: {title}\n\n<issue>\n{title} "
        f"it.\n</issue>\n\nAcceptance: {path} exists."
    )
    return _tool(call_id, "task_create", title=title, spec=spec, review="none")


def _tool(call_id: str, name: str, **args: object) -> AssistantTurn:
    return AssistantTurn(tool_calls=(ToolCall(call_id, name, args),))


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def _pull(hub: FakeGitHub) -> HubIssue | None:
    pulls = hub.pulls(OWNER, REPO)
    assert len(pulls) <= 1, "one pull request per job"
    return pulls[0] if pulls else None


def _checks_done(hub: FakeGitHub) -> bool:
    runs = hub.app_check_runs(OWNER, REPO, check="TeaParty")
    return bool(runs) and all(r["status"] == "completed" for r in runs)


def _ready(hub: FakeGitHub) -> bool:
    found = _pull(hub)
    return found is not None and found.pull is not None and not found.pull.draft


def _updates(remote: Path, branch: str) -> list[str]:
    """Each commit the branch was moved to on the remote, oldest first (its reflog)."""
    return _git(remote, "reflog", "show", "--format=%H", f"refs/heads/{branch}").split()[::-1]


def _first_parents(remote: Path, branch: str) -> list[str]:
    """The branch's first-parent commits since main, oldest first."""
    span = f"main..refs/heads/{branch}"
    return _git(remote, "rev-list", "--first-parent", "--reverse", span).split()


def _subject(remote: Path, commit: str) -> str:
    return _git(remote, "show", "-s", "--format=%s", commit).strip()


def _pull_posts(hub: FakeGitHub) -> list[tuple[int, object]]:
    return [
        (r.status, r.body)
        for r in hub.requests
        if r.method == "POST" and r.path.endswith(f"/{OWNER}/{REPO}/pulls")
    ]


def _operations(hub: FakeGitHub, name: str) -> int:
    return sum(r.operation_id == f"graphql/{name}" for r in hub.requests)


async def _world(tmp_path: Path, project: str | None) -> tuple[FakeGitHub, int, str, Path]:
    hub, port, pem = world(tmp_path)
    remote = hub.root / OWNER / f"{REPO}.git"
    _git(remote, "config", "core.logAllRefUpdates", "always")  # every push it receives, logged
    if project is not None:
        await hub.push_to_branch(OWNER, REPO, "main", "alice", {".teaparty/project.yaml": project})
    return hub, port, pem, remote


@asynccontextmanager
async def _running(
    tmp_path: Path, project: str | None, second: str
) -> AsyncIterator[tuple[FakeGitHub, Path, int]]:
    """The App in this process over the stand-in, TwoTasks(`second`) as every agent's model,
    and an issue for it: (the stand-in, its bare remote, the issue's number)."""
    hub, port, pem, remote = await _world(tmp_path, project)
    async with hub.serve() as api_url:
        settings = app_settings(hub, api_url, tmp_path / "home", pem, status_interval_s=0.2)
        number = hub.open_issue(OWNER, REPO, title="Two things", body="Please.", author="alice")
        async with in_process(settings, lambda _: TwoTasks(second), port=port, sandbox=NOWHERE):
            yield hub, remote, number


async def test_the_draft_opens_after_the_plan_and_each_merge_is_one_push(tmp_path: Path) -> None:
    async with _running(tmp_path, EARLY, "docs/two.md") as (hub, remote, number):
        await ask_plan(hub, number)
        assert _pull(hub) is None, "no draft before the plan is approved"
        assert not _git(remote, "branch", "--list", "teaparty/*").split()
        await hub.comment_as(OWNER, REPO, number, "alice", "yes")
        await until(lambda: _ready(hub), what="the pull request made ready", limit=90)
        # the check run is completed after the draft is made ready, not before
        await until(lambda: _checks_done(hub), what="the job's check runs completed", limit=90)
        tracking = bodies(hub, number, "job:")[0]
    pull = _pull(hub)
    assert pull is not None
    assert pull.pull is not None
    branch = pull.pull.head_ref
    updates, line = _updates(remote, branch), _first_parents(remote, branch)
    assert updates == line, "each push moved the branch by exactly one first-parent commit"
    subjects = [_subject(remote, commit) for commit in line]
    assert subjects[0] == PLAN_COMMIT
    assert _git(remote, "rev-parse", f"{line[0]}^{{tree}}") == _git(
        remote, "rev-parse", "main^{tree}"
    ), "the plan's commit changes no file"
    merges = [s for s in subjects if s.startswith("Merge task #")]
    assert merges == ["Merge task #1: One", "Merge task #2: Two"]
    # The draft was asked for once (the delivery's attempt finds it), and made ready once.
    posts = _pull_posts(hub)
    assert [status for status, _ in posts] == [201, 422]
    assert isinstance(posts[0][1], dict)
    assert posts[0][1].get("draft") is True
    assert _operations(hub, "MarkReady") == 1
    assert "Paused" not in tracking
    # The job's check run moved with the draft: one on each head it was told of, the last
    # on the head made ready, completed there; the earlier ones completed as superseded.
    runs = hub.app_check_runs(OWNER, REPO, check="TeaParty")
    assert [r["head_sha"] for r in runs] == line
    assert [r["status"] for r in runs] == ["completed"] * len(line)
    assert hub.violations == []


async def test_a_protected_change_is_pushed_only_once_its_gate_is_approved(
    tmp_path: Path,
) -> None:
    async with _running(tmp_path, EARLY, CI) as (hub, remote, number):
        await approve_plan(hub, number)
        _, short = await protected_question(hub, number)
        pull = _pull(hub)
        assert pull is not None
        assert pull.pull is not None
        assert pull.pull.draft
        branch = pull.pull.head_ref
        pushed = _updates(remote, branch)
        assert _subject(remote, pushed[-1]) == "Merge task #1: One"
        for commit in pushed:
            assert CI not in _git(remote, "ls-tree", "-r", "--name-only", commit)
        await hub.comment_as(OWNER, REPO, number, "alice", f"/approve {short}")
        await until(lambda: _ready(hub), what="the pull request made ready", limit=90)
    updates, line = _updates(remote, branch), _first_parents(remote, branch)
    assert updates == line
    assert [_subject(remote, c) for c in line[len(pushed) :]] == ["Merge task #2: Two"]
    assert CI in _git(remote, "ls-tree", "-r", "--name-only", line[-1])
    assert hub.violations == []


def _closed(hub: FakeGitHub) -> HubIssue | None:
    found = _pull(hub)
    return found if found is not None and found.state == "closed" else None


async def test_a_refused_protected_change_closes_the_draft_saying_why(tmp_path: Path) -> None:
    async with _running(tmp_path, EARLY, CI) as (hub, remote, number):
        await approve_plan(hub, number)
        await protected_question(hub, number)
        draft = _pull(hub)
        assert draft is not None
        assert draft.pull is not None
        assert draft.pull.draft
        pushed = _updates(remote, draft.pull.head_ref)
        await hub.comment_as(OWNER, REPO, number, "alice", "/reject")
        await until(lambda: _closed(hub), what="the draft closed", limit=90)
    closed = _closed(hub)
    assert closed is not None
    assert closed.pull is not None
    assert closed.pull.draft, "closed as it stood, never made ready"
    assert (closed.body or "").startswith(
        "**Closed by TeaParty:** the job ended without a change to deliver: "
    )
    assert _updates(remote, closed.pull.head_ref) == pushed, "the refused change never pushed"
    assert _operations(hub, "MarkReady") == 0
    assert hub.violations == []


async def test_closing_the_issue_closes_its_draft(tmp_path: Path) -> None:
    async with _running(tmp_path, EARLY, CI) as (hub, remote, number):
        await approve_plan(hub, number)
        await protected_question(hub, number)
        await hub.close_issue(OWNER, REPO, number, sender="alice")
        await until(lambda: _closed(hub), what="the draft closed", limit=90)
    closed = _closed(hub)
    assert closed is not None
    assert (closed.body or "").startswith(
        "**Closed by TeaParty:** the job was cancelled, so this draft will not be finished."
    )
    assert closed.pull is not None
    assert _git(remote, "branch", "--list", closed.pull.head_ref).strip(), "the branch stays"
    assert hub.violations == []


async def test_without_the_setting_the_pull_request_opens_ready_at_the_end(
    tmp_path: Path,
) -> None:
    async with _running(tmp_path, None, "docs/two.md") as (hub, remote, number):
        await approve_plan(hub, number)
        await until(lambda: _ready(hub), what="the pull request", limit=90)
    pull = _pull(hub)
    assert pull is not None
    assert pull.pull is not None
    updates = _updates(remote, pull.pull.head_ref)
    assert len(updates) == 1, "one push, at the end"
    line = _first_parents(remote, pull.pull.head_ref)
    assert PLAN_COMMIT not in [_subject(remote, commit) for commit in line]
    (post,) = _pull_posts(hub)
    assert post[0] == 201
    assert isinstance(post[1], dict)
    assert "draft" not in post[1]
    assert _operations(hub, "MarkReady") == 0
    assert hub.violations == []
