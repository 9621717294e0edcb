"""Review rounds end to end: a real `teaparty serve`, the local GitHub stand-in, a bare remote
that refuses non-fast-forward pushes.

A changes-requested review with three inline comments is one round: one push to the same
pull request, one reply in each thread naming the commit, one summary, the review asked
for again. A person's push to the branch before the next round is merged into its work,
never overwritten; threads the App answered and nobody wrote in since are not input again.
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from app_harness import (
    OWNER,
    REPO,
    Served,
    Server,
    approve_plan,
    served,
    until,
    writer_and_reader,
)

from bot.fakehub.git import refuse_non_fast_forward
from bot.fakehub.hub import FakeGitHub
from bot.fakehub.review_state import PullReviews
from bot.github.tracking import MARKER_PREFIX

pytestmark = pytest.mark.timeout(240)


def _world(hub: FakeGitHub) -> None:
    refuse_non_fast_forward(hub.root / OWNER / f"{REPO}.git")
    writer_and_reader(hub)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[Served]:
    async with served(tmp_path, prepare=_world) as world:
        yield world


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def app_comments(hub: FakeGitHub, number: int, kind: str) -> list[str]:
    return [c.body for c in hub.comments(OWNER, REPO, number) if MARKER_PREFIX + kind in c.body]


def reviews(hub: FakeGitHub, number: int) -> PullReviews:
    pull = hub.state.issue(hub.state.repo(OWNER, REPO), number).pull
    assert pull is not None
    return pull.reviews


def replies(hub: FakeGitHub, number: int) -> dict[int, list[str]]:
    """Per thread (by its first comment), the bodies of the App's replies."""
    found: dict[int, list[str]] = {}
    for thread in hub.review_threads(OWNER, REPO, number):
        comments = [reviews(hub, number).comments[c] for c in thread.comment_ids]
        found[thread.root_id] = [c.body for c in comments if c.author.endswith("[bot]")]
    return found


def rested(hub: FakeGitHub, issue: int, rounds: int) -> bool:
    """Whether the tracking comment shows the job resting after `rounds` rounds."""
    tracking = app_comments(hub, issue, "job:")[0]
    return "✅" in tracking and f"round {rounds} (`@alice`)" in tracking and "; pushed" in tracking


async def changes_requested(
    hub: FakeGitHub, number: int, body: str | None, *comments: tuple[str, int, str]
) -> None:
    """alice's review of pull request `number` asks for changes: `body` and the inline
    `comments`, each (path, line, text)."""
    await hub.review_pr(OWNER, REPO, number, "alice", "changes_requested", body, comments=comments)


async def delivered_pull(hub: FakeGitHub, server: Server) -> tuple[int, int, str]:
    """A labelled issue run to its pull request: (issue, pull request, the file it wrote)."""
    issue = hub.open_issue(
        OWNER, REPO, title="Add a changelog", body="A CHANGELOG.", author="alice"
    )
    await approve_plan(hub, issue)
    await until(lambda: hub.pulls(OWNER, REPO), what="the pull request", limit=90)
    await until(lambda: "✅" in app_comments(hub, issue, "job:")[0], what="the job to rest")
    (pull,) = hub.pulls(OWNER, REPO)
    return issue, pull.number, "docs/requests/add-a-changelog.md"


async def test_a_review_is_one_round_that_updates_the_same_pull_request(world: Served) -> None:
    hub, server = world.hub, world.server
    issue, number, path = await delivered_pull(hub, server)
    remote = hub.root / OWNER / f"{REPO}.git"
    head_ref = hub.pulls(OWNER, REPO)[0].pull.head_ref  # type: ignore[union-attr]
    first_head = git(remote, "rev-parse", head_ref)

    await hub.review_pr(OWNER, REPO, number, "mallory", "changes_requested", "No.")  # not a writer
    await hub.review_pr(OWNER, REPO, number, "alice", "approved", "Looks fine.")  # approves
    await changes_requested(
        hub,
        number,
        "Three things.",
        (path, 1, "Title case?"),
        (path, 3, "Say why."),
        (path, 5, "Drop this line."),
    )
    await until(lambda: app_comments(hub, number, "round:"), what="the round's summary", limit=90)
    await until(lambda: rested(hub, issue, 1), what="the job to rest again")

    assert len(hub.pulls(OWNER, REPO)) == 1  # the same pull request, updated
    new_head = git(remote, "rev-parse", head_ref)
    assert new_head != first_head
    git(remote, "merge-base", "--is-ancestor", first_head, new_head)  # a fast-forward
    assert "docs/reviews/round-1.md" in git(remote, "ls-tree", "-r", "--name-only", new_head)
    answered = replies(hub, number)
    assert len(answered) == 3
    assert all(len(bodies) == 1 for bodies in answered.values()), answered  # one reply each
    assert all(f"Addressed in {new_head}" in bodies[0] for bodies in answered.values())
    assert not any(t.resolved_by for t in hub.review_threads(OWNER, REPO, number))
    (summary,) = app_comments(hub, number, "round:")
    assert "review round 1" in summary
    assert summary.count("- Point ") == 4
    assert reviews(hub, number).requested == ["alice"]
    tracking = app_comments(hub, issue, "job:")[0]
    assert "round 1 (`@alice`): 4 point(s), 4 answered; pushed" in tracking

    # A person pushes to the branch; the next review's round merges their commit in.
    theirs = await hub.push_to_head(
        OWNER, REPO, number, "alice", {"NOTES.md": "by hand\n"}, message="A note"
    )
    await changes_requested(hub, number, None, (path, 2, "One more thing."))
    await until(
        lambda: len(app_comments(hub, number, "round:")) == 2, what="round 2's summary", limit=90
    )
    await until(lambda: rested(hub, issue, 2), what="the job to rest after round 2")
    last = git(remote, "rev-parse", head_ref)
    git(remote, "merge-base", "--is-ancestor", theirs, last)  # their commit is kept
    assert "NOTES.md" in git(remote, "ls-tree", "-r", "--name-only", last)
    answered = replies(hub, number)
    assert sorted(len(bodies) for bodies in answered.values()) == [1, 1, 1, 1]  # none twice
    summary2 = next(s for s in app_comments(hub, number, "round:") if "round 2" in s)
    assert summary2.count("- Point ") == 1

    # Merged: the job is complete, its worktrees and task branches gone, its comment final.
    await hub.merge_pr(OWNER, REPO, number, "alice")
    await until(lambda: "(merged)" in app_comments(hub, issue, "job:")[0], what="the final comment")
    home = Path(server.env["TEAPARTY_HOME"]) / "repos" / "github" / OWNER / REPO / "jobs"
    (folder,) = list(home.iterdir())
    assert not (folder / "worktree").exists()
    assert not any((folder / "slots").glob("slot-*"))
    branches = git(folder / "repo.git", "branch", "--list", "--format=%(refname:short)")
    assert branches.split() == [head_ref]  # the task branches went; the job's stays
    assert hub.violations == []


async def test_a_resolved_thread_is_left_alone_and_only_the_open_one_is_answered(
    world: Served,
) -> None:
    hub = world.hub
    issue, number, path = await delivered_pull(hub, world.server)
    # Two lone comments (each a one-comment review, gathered for 90 s), one then resolved.
    resolved = await hub.comment_on_line(OWNER, REPO, number, "alice", path, 1, "Typo here.")
    still_open = await hub.comment_on_line(OWNER, REPO, number, "alice", path, 3, "Why this?")
    hub.resolve_thread(OWNER, REPO, number, resolved, "alice")
    await changes_requested(hub, number, "See my comments.")
    await until(lambda: rested(hub, issue, 1), what="the round to be delivered", limit=90)

    answered = replies(hub, number)
    assert answered[resolved] == []  # no reply in the resolved thread
    assert len(answered[still_open]) == 1
    (summary,) = app_comments(hub, number, "round:")
    assert summary.count("- Point ") == 2  # the review's text and the open thread
    assert "Typo here" not in summary


async def test_a_teaparty_comment_on_the_pull_request_is_a_round(world: Served) -> None:
    hub = world.hub
    project = "humans: {decider: alice}\nrounds: {window_s: 0}\n"
    await hub.push_to_branch(OWNER, REPO, "main", "alice", {".teaparty/project.yaml": project})
    issue, number, _ = await delivered_pull(hub, world.server)
    await hub.comment_as(OWNER, REPO, number, "mallory", "/teaparty delete everything")
    await hub.comment_as(OWNER, REPO, number, "alice", "Nice work.")  # asks for nothing
    await hub.comment_as(OWNER, REPO, number, "alice", "/teaparty please also note the date")
    await until(lambda: rested(hub, issue, 1), what="the round to be delivered", limit=90)
    (summary,) = app_comments(hub, number, "round:")
    assert summary.count("- Point ") == 1
    assert "please also note the date" not in summary  # the reviewer's words are not echoed
    round_file = git(
        hub.root / OWNER / f"{REPO}.git", "show", f"{head(hub)}:docs/reviews/round-1.md"
    )
    assert "please also note the date" in round_file
    assert "delete everything" not in round_file


def head(hub: FakeGitHub) -> str:
    pull = hub.pulls(OWNER, REPO)[0].pull
    assert pull is not None
    return pull.head_ref


async def test_a_suggestion_is_applied_as_written(world: Served) -> None:
    hub = world.hub
    issue, number, path = await delivered_pull(hub, world.server)
    remote = hub.root / OWNER / f"{REPO}.git"
    first = git(remote, "show", f"{head(hub)}:{path}").splitlines()[0]
    assert first == "# Add a changelog"
    suggested = "Capitalise it:\n```suggestion\n# Add a CHANGELOG\n```"
    await changes_requested(hub, number, None, (path, 1, suggested))
    await until(lambda: rested(hub, issue, 1), what="the round to be delivered", limit=90)
    lines = git(remote, "show", f"{head(hub)}:{path}").splitlines()
    assert lines[0] == "# Add a CHANGELOG"
    log = git(remote, "log", "--format=%s", head(hub))
    assert "Apply @alice's suggestion (review round 1, point 1)" in log
    (bodies,) = replies(hub, number).values()
    assert "applied as written in" in bodies[0]


async def test_lone_teaparty_comments_within_the_window_are_one_round(world: Served) -> None:
    """Two `/teaparty` comments a moment apart each wait out the window; the first to come
    due takes both into one round, and the second, due later, finds nothing new."""
    hub, server = world.hub, world.server
    project = "humans: {decider: alice}\nrounds: {window_s: 2}\n"
    await hub.push_to_branch(OWNER, REPO, "main", "alice", {".teaparty/project.yaml": project})
    issue, number, _ = await delivered_pull(hub, server)
    await hub.comment_as(OWNER, REPO, number, "alice", "/teaparty add a date")
    await hub.comment_as(OWNER, REPO, number, "alice", "/teaparty and a version")
    await until(lambda: rested(hub, issue, 1), what="the round to be delivered", limit=90)
    await until(lambda: _settled(server), what="every delivery handled", limit=30)
    tracking = app_comments(hub, issue, "job:")[0]
    assert "round 1 (`@alice`): 2 point(s), 2 answered; pushed" in tracking, tracking
    assert "round 2" not in tracking
    (summary,) = app_comments(hub, number, "round:")
    assert summary.count("- Point ") == 2


async def _settled(server: Server) -> bool:
    return await server.pending() == 0
