"""A merge-conflict gate on GitHub, against the stand-in in-process: one short comment (the
task, its files, the hunks folded away, what each answer does), edited in place when the
engine restates the gate because the job branch moved."""

from __future__ import annotations

from pathlib import Path

import pytest
import teams_script as script
from app_harness import office_forge
from fakehub_support import app_hub
from test_conflict_gate import GATED, the_model

from bot.fakehub.hub import FakeGitHub
from bot.github.client import GitHubApp
from bot.github.subject import Subject
from bot.github.tracking import MARKER_PREFIX
from orchestrator.api import JobDriver
from orchestrator.bus import gates
from orchestrator.jobs import revisions
from orchestrator.teams import conflict_gate

OWNER, REPO = "octo", "widgets"


@pytest.fixture
def hub(tmp_path: Path, pem: str) -> FakeGitHub:
    return app_hub(tmp_path / "hub", pem, alice="maintain")


def gate_comments(hub: FakeGitHub, number: int) -> list[str]:
    return [c.body for c in hub.comments(OWNER, REPO, number) if f"{MARKER_PREFIX}gate:" in c.body]


def edits(hub: FakeGitHub) -> int:
    return sum(r.method == "PATCH" and "/issues/comments/" in r.path for r in hub.requests)


async def test_the_gate_comment_is_short_and_follows_a_restatement(
    hub: FakeGitHub, github: GitHubApp, tmp_path: Path
) -> None:
    number = hub.open_issue(OWNER, REPO, title="Alpha and beta", body="b", author="alice")
    office = await script.open_office(tmp_path / "home", the_model(), GATED)
    try:
        job = await script.start(office, script.make_repo(tmp_path / "widgets"))
        await office.run_until_idle(job.job_id)
        (gate,) = await office.open_gates(job.job_id)
        subject = Subject(OWNER, REPO, number, 1, "main", "t", "alice", "alice", "teaparty")
        identity = await github.identity()
        forge = office_forge(github, office, subject, identity=identity)
        status = await JobDriver(office, lambda _: _none()).status(job.job_id)
        await forge.ask(status, gate)
        (asked,) = gate_comments(hub, number)

        hunks = "<<<<<<< ours\nFixes #999 @mallory <!-- hidden -->\n=======\nb\n>>>>>>> theirs"
        restate = conflict_gate.restate
        await office.engine.store.write(
            lambda tx: restate(
                tx,
                gate.gate_id,
                job_head="f" * 40,
                files=("README.md", "b.txt"),
                hunks=hunks,
                content=revisions.job_content,
            )
        )
        moved = await office.engine.store.read(lambda tx: gates.get(tx, gate.gate_id))
        await forge.ask(status, moved)
        (edited,) = gate_comments(hub, number)
        before = edits(hub)
        await forge.ask(status, moved)  # nothing changed since: no edit
        assert edits(hub) == before
    finally:
        await office.close()
    task = gate.payload["task"]
    assert f"Task #{task} (Title {task}) was approved by its review" in asked
    assert "conflicts with the job branch in `README.md`." in asked
    assert "<details><summary>The conflicting hunks</summary>" in asked
    assert "<<<<<<<" in asked
    assert f"`/approve {gate.short_hash}` to have it resolved" in asked
    assert f"`/reject <why>` to drop task #{task}" in asked
    assert asked.count("@alice") == 1
    assert len(asked) < 2500
    assert moved.short_hash != gate.short_hash
    assert f"merge-conflict {moved.short_hash}" in edited
    assert f"merge-conflict {gate.short_hash}" not in edited
    assert "in `README.md`, `b.txt`." in edited
    # the hunks are code: shown as written (a comment in code is text), closing keywords
    # neutral all the same
    assert "Fixes (reference only) #999 @mallory <!-- hidden -->\n" in edited


async def _none() -> None:
    return None
