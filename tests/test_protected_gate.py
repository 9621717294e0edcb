"""The protected-path gate end to end: a scripted worker's change on a real repository and
a real store, the JobDriver delivering it through a forge that really pushes.

A change to `.github/` waits at a gate pinned to its exact head; approving pushes that
head; a commit after the gate makes the approval stale; rejecting pushes nothing; mode
`never` and ordinary files push without a gate; a project's own patterns count.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import demo_office
import pytest
from fakes import HeldJob, PushingForge, one_forge
from local_repo import ENV, git, make_repo

from bot.github.outbound import Outbound
from bot.github.tracking import gate_body
from bot.local_forge import LocalForge, UnansweredGateError
from orchestrator.bus import gates
from orchestrator.bus.gates import Gate
from orchestrator.core.messages import AssistantTurn
from orchestrator.core.model import ModelRequest
from orchestrator.jobs import protection
from orchestrator.jobs.driver import JobDriver
from orchestrator.jobs.handle import JobHandle
from orchestrator.jobs.office import Office
from orchestrator.jobs.offline import DemoModel
from orchestrator.jobs.ports import Forge
from orchestrator.jobs.protected_gate import Held
from orchestrator.sandbox.confine import Sandbox
from orchestrator.workspace.git import GitError

TITLE = "Add CI"
NOWHERE = Sandbox("unavailable", "not needed: the demo model runs no shell")
CI = ".github/workflows/ci.yml"


class CountingModel(DemoModel):
    """The demo's scripted organisation, counting its model calls."""

    def __init__(self, path: str) -> None:
        super().__init__(title=TITLE, body="Run the tests on push.", path=path)
        self.calls = 0

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        self.calls += 1
        return await super().complete(request)


@dataclass
class Setup(HeldJob):
    model: CountingModel
    slug = "ci"

    def remote_head(self) -> str | None:
        found = git(
            self.repo, "for-each-ref", "--format=%(objectname)", f"refs/heads/{self.branch}"
        )
        return found.strip() or None

    async def job_head(self) -> str:
        space = await self.office.workspace.job(self.job_id)
        assert space is not None
        return git(space.repo, "rev-parse", f"refs/heads/{space.branch}").strip()


async def setup(tmp_path: Path, *, path: str = CI, project: str = "") -> Setup:
    repo = make_repo(tmp_path / "widgets")
    text = f"humans: {{decider: carol}}\n{project}"
    model = CountingModel(path)
    office = await demo_office.open_office(tmp_path / "home", text, model)
    job_id = await demo_office.start_job(
        office,
        repo,
        text,
        title=TITLE,
        body="Run the tests on push.",
        slug="ci",
        hand_off=demo_office.TO_LEAD,
    )
    forge = PushingForge(
        office, answers={"The plan:": "yes"}, remote=repo, held=("protected-path",)
    )

    return Setup(office, forge, JobDriver(office, one_forge(forge)), repo, job_id, model)


async def test_a_change_to_ci_waits_and_approval_pushes_exactly_the_pinned_head(
    tmp_path: Path,
) -> None:
    s = await setup(tmp_path)
    try:
        gate = await s.waiting()
        head = await s.job_head()
        assert (gate.kind, gate.engine_made, gate.conversation_id) == (
            "protected-path",
            True,
            f"job:{s.job_id}",
        )
        assert gate.question.startswith("The change touches protected paths: 1 protected file")
        assert CI in gate.question
        assert f"Head commit: {head}" in gate.question
        assert "Diff: 1 file changed" in gate.question
        assert f"+++ b/{CI}" in gate.question.split("```diff")[1], "the short diff is shown"
        assert gate.payload["head"] == head
        assert gate.payload["files"] == [f"A {CI}"]
        assert len(gate.payload["diff"]) == 64
        assert s.forge.asked[-1] == gate.gate_id, "asked in the sync that opened it"
        assert s.remote_head() is None, "nothing is pushed before the approval"
        assert (await s.driver.status(s.job_id)).state == "waiting"

        for _ in range(3):  # the sync runs often: still one gate
            assert await s.driver.sync(s.job_id) == "waiting"
        assert [g.gate_id for g in await s.office.open_gates(s.job_id)] == [gate.gate_id]

        calls = s.model.calls
        await s.office.answer_gate(gate.gate_id, text="yes", answered_by="carol")
        await s.office.run_until_idle(s.job_id)
        assert s.model.calls == calls, "the answer wakes nothing that calls a model"

        assert await s.drive() == "done"
        assert s.remote_head() == head == gate.payload["head"]
        assert s.forge.delivered == [s.branch]
        assert await s.driver.sync(s.job_id) == "done"
        assert s.forge.delivered == [s.branch], "delivered once"
        assert await s.office.open_gates(s.job_id) == []
    finally:
        await s.office.close()


async def test_a_commit_after_the_gate_makes_its_approval_stale(tmp_path: Path) -> None:
    s = await setup(tmp_path)
    try:
        first = await s.waiting()
        space = await s.office.workspace.job(s.job_id)
        assert space is not None
        later = _commit(space.repo, space.branch, "pyproject.toml", "[project]\nname = 'w'\n")

        await s.office.answer_gate(first.gate_id, text="yes", answered_by="carol")
        assert await s.drive() == "waiting", "the approved head is not the branch's head"
        assert s.remote_head() is None
        second = await s.gate()
        assert second.gate_id != first.gate_id
        assert second.payload["head"] == later != first.payload["head"]
        assert f"question {first.gate_id} approved commit {first.payload['head'][:12]}" in (
            second.question
        )
        assert "stale" in second.question
        assert "pyproject.toml" in second.question
        assert CI in second.question
        assert second.content_hash != first.content_hash

        await s.office.answer_gate(second.gate_id, text="yes", answered_by="carol")
        assert await s.drive() == "done"
        assert s.remote_head() == later
    finally:
        await s.office.close()


async def test_rejecting_pushes_nothing_and_ends_the_job_with_the_deciders_words(
    tmp_path: Path,
) -> None:
    s = await setup(tmp_path)
    try:
        gate = await s.waiting()
        await s.office.answer_gate(gate.gate_id, text="no (CI is mine)", answered_by="carol")
        assert await s.drive() == "done"
        assert s.remote_head() is None
        assert s.forge.delivered == []
        final = await s.driver.status(s.job_id)
        assert (final.state, final.link) == ("done", None)
        assert final.result is not None
        assert final.result.startswith("The decider did not approve the change to protected")
        assert CI in final.result
        assert "carol answered 'no (CI is mine)'" in final.result
        assert "Nothing was pushed and no pull request was opened" in final.result
        assert s.forge.statuses[-1].result == final.result
        assert await s.driver.sync(s.job_id) == "done"
        assert s.remote_head() is None
    finally:
        await s.office.close()


async def test_mode_never_pushes_without_a_gate(tmp_path: Path) -> None:
    s = await setup(tmp_path, project="gates: {protected-path: never}\n")
    try:
        assert await s.drive() == "done"
        assert s.remote_head() == await s.job_head()
        assert not [g for g in await _gates(s.office, s.job_id) if g.kind == "protected-path"]
    finally:
        await s.office.close()


async def test_ordinary_files_push_the_checked_head_without_a_gate(tmp_path: Path) -> None:
    s = await setup(tmp_path, path="docs/requests/add-ci.md")  # what the demo writes
    try:
        assert await s.drive() == "done"
        assert s.remote_head() == await s.job_head()
        assert [g.kind for g in await _gates(s.office, s.job_id)] == ["plan"]
    finally:
        await s.office.close()


async def test_a_projects_own_patterns_are_protected_too(tmp_path: Path) -> None:
    s = await setup(
        tmp_path, path="db/schema.sql", project='protected_paths: [migrations/**, "*.sql"]\n'
    )
    try:
        gate = await s.waiting()
        assert "db/schema.sql" in gate.question
        handle = JobHandle(s.job_id, f"job:{s.job_id}", await _space(s), created=False)
        again = await protection.check(s.office, handle)  # idempotent: the same open gate
        assert isinstance(again, Held)
        assert (again.gate_id, again.opened) == (gate.gate_id, False)
        await s.office.answer_gate(gate.gate_id, text="yes", answered_by="carol")
        assert await s.drive() == "done"
        assert s.remote_head() == gate.payload["head"]
    finally:
        await s.office.close()


async def test_the_github_question_shows_files_head_stat_and_what_approve_binds(
    tmp_path: Path,
) -> None:
    s = await setup(tmp_path)
    try:
        gate = await s.waiting()
        body = gate_body(gate, decider="carol", agent=Outbound("o", "widgets", 1))
        head = gate.payload["head"]
        assert f"`protected-path {gate.short_hash}`" in body
        assert CI in body
        assert f"Head commit: {head}" in body
        assert "Diff: 1 file changed" in body
        assert f"`/approve {gate.short_hash}` approves exactly commit `{head[:12]}`" in body
        assert "stale" in body
        assert "@carol" in body
    finally:
        await s.office.close()


def _commit(repo: Path, branch: str, path: str, content: str) -> str:
    """A commit on the job branch, made in its bare repository (as a later merge would)."""
    env = {**ENV, "GIT_INDEX_FILE": str(repo.parent / "scratch-index")}

    def run(*args: str, stdin: str | None = None) -> str:
        return subprocess.run(
            ["git", "--git-dir", str(repo), *args],
            input=stdin,
            check=True,
            capture_output=True,
            text=True,
            env=env,
        ).stdout.strip()

    blob = run("hash-object", "-w", "--stdin", stdin=content)
    run("read-tree", f"refs/heads/{branch}")
    run("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}")
    tree = run("write-tree")
    commit = run("commit-tree", tree, "-p", f"refs/heads/{branch}", "-m", "later")
    run("update-ref", f"refs/heads/{branch}", commit)
    return commit


async def _gates(office: Office, job_id: int) -> list[Gate]:
    return await office.engine.store.read(
        lambda tx: [
            gates.get(tx, g)
            for (g,) in tx.execute("SELECT gate_id FROM gates WHERE job_id = ?", (job_id,))
        ]
    )


async def _space(s: Setup) -> Any:
    space = await s.office.workspace.job(s.job_id)
    assert space is not None
    return space


async def test_publish_pushes_exactly_the_given_head_not_the_branch_tip(tmp_path: Path) -> None:
    s = await setup(tmp_path)
    try:
        assert await s.drive() == "waiting"
        checked = (await s.gate()).payload["head"]
        space = await _space(s)
        later = _commit(space.repo, space.branch, "notes.md", "later\n")
        job = JobHandle(s.job_id, f"job:{s.job_id}", space, created=False, head=checked)
        await s.office.publish(job, str(s.repo))
        assert s.remote_head() == checked != later
        with pytest.raises(GitError, match="not a commit id"):
            await s.office.publish(replace(job, head="--upload-pack=touch x"), str(s.repo))
    finally:
        await s.office.close()


async def test_at_the_terminal_nobody_to_ask_leaves_the_job_waiting_not_failed(
    tmp_path: Path,
) -> None:
    s = await setup(tmp_path, project="gates: {plan: never}\n")
    said: list[str] = []
    try:
        nobody = LocalForge(s.office, s.repo, decider="carol", approve=None, say=said.append)
        driver = JobDriver(s.office, lambda _: _ready(nobody))
        with pytest.raises(UnansweredGateError) as parked:
            await _until_done(s.office, driver, s.job_id)
        assert parked.value.gate.kind == "protected-path"
        assert (await driver.status(s.job_id)).state == "waiting"
        assert await s.office.failures(s.job_id) == []
        assert any(CI in line for line in said)

        async def approve(gate: Gate) -> str:
            return "yes"

        decider = LocalForge(s.office, s.repo, decider="carol", approve=approve, say=said.append)
        await _until_done(s.office, JobDriver(s.office, lambda _: _ready(decider)), s.job_id)
        record = await s.office.records.job(s.job_id)
        assert record is not None
        assert record.state == "complete"
        assert s.remote_head() == parked.value.gate.payload["head"]
    finally:
        await s.office.close()


async def _ready(forge: Forge) -> Forge:
    return forge


async def _until_done(office: Office, driver: JobDriver, job_id: int) -> None:
    """What `teaparty run` does: sync and run until the job is done (or failed)."""
    while await driver.sync(job_id) not in ("done", "failed"):
        await office.run_until_idle(job_id)
