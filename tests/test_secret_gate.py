"""The secret gate end to end: a scripted worker writes the issue's text into a file on a real
repository and a real store, and the JobDriver delivers it through a forge that really pushes.

A credential pattern waits at a gate naming the file and line, masked; approving pushes
exactly that head, rejecting pushes nothing. A secret value the engine holds waits at a gate
too, which no answer turns into a push. Mode `never` lets patterns through, never values;
the proxy never answers the kind alone, whatever the project allows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import demo_office
import pytest
from fakes import HeldJob, PushingForge, one_forge
from local_repo import git, make_repo

from bot.github.outbound import Outbound
from bot.github.tracking import gate_body
from orchestrator.api import load_project
from orchestrator.config import load_organisation, shipped_org_dir
from orchestrator.core.errors import ConfigError
from orchestrator.core.secrecy import KnownSecrets
from orchestrator.jobs.driver import JobDriver
from orchestrator.jobs.features import GATE_KINDS
from orchestrator.jobs.offline import DemoModel
from orchestrator.sandbox.confine import Sandbox

NOWHERE = Sandbox("unavailable", "not needed: the demo model runs no shell")
PATH = "docs/requests/note.md"  # the demo writes "# title", "", the body: the body is line 3
AWS = "AKIA" + "QWERTYUIOPASDFGH"
VALUE = "hook-secret-9f2c7a1e"


@dataclass
class Setup(HeldJob):
    def pushed(self) -> str:
        return git(self.repo, "for-each-ref", "--format=%(objectname)", "refs/heads/teaparty/")


async def setup(tmp_path: Path, body: str, *, project: str = "") -> Setup:
    repo = make_repo(tmp_path / "widgets")
    text = f"humans: {{decider: carol}}\n{project}"
    model = DemoModel(title="Note", body=body, path=PATH)
    secrets = KnownSecrets.of({"GITHUB_WEBHOOK_SECRET": VALUE, "PATH": "/usr/bin"})
    office = await demo_office.open_office(tmp_path / "home", text, model, secrets=secrets)
    job_id = await demo_office.start_job(
        office, repo, text, title="Note", body=body, slug="note", hand_off=demo_office.TO_LEAD
    )
    forge = PushingForge(office, answers={"The plan:": "yes"}, remote=repo, held=("secret",))

    return Setup(office, forge, JobDriver(office, one_forge(forge)), repo, job_id)


async def test_a_pattern_waits_named_and_masked_and_approval_pushes_that_head(
    tmp_path: Path,
) -> None:
    s = await setup(tmp_path, f"aws_key = {AWS}")
    try:
        gate = await s.waiting()
        assert (gate.kind, gate.engine_made) == ("secret", True)
        assert f"{PATH}:3: a AWS access key id AKIA…(20 characters)" in gate.question
        assert AWS not in gate.question
        assert "Approving pushes exactly this commit" in gate.question
        assert s.pushed() == "", "nothing is pushed before the approval"
        for _ in range(2):
            assert await s.driver.sync(s.job_id) == "waiting"
        assert [g.gate_id for g in await s.office.open_gates(s.job_id)] == [gate.gate_id]
        body = gate_body(gate, decider="carol", agent=Outbound("o", "widgets", 1))
        assert f"`/approve {gate.short_hash}` approves exactly commit" in body
        assert AWS not in body

        await s.office.answer_gate(gate.gate_id, text="yes", answered_by="carol")
        assert await s.drive() == "done"
        assert s.pushed().strip() == gate.payload["head"]
    finally:
        await s.office.close()


async def test_rejecting_a_pattern_pushes_nothing(tmp_path: Path) -> None:
    s = await setup(tmp_path, f"aws_key = {AWS}")
    try:
        assert await s.drive() == "waiting"
        await s.office.answer_gate((await s.gate()).gate_id, text="no", answered_by="carol")
        assert await s.drive() == "done"
        assert s.pushed() == ""
        final = await s.driver.status(s.job_id)
        assert final.result is not None
        assert final.result.startswith("Secrets were found in the job's work (")
        assert "carol answered 'no'" in final.result
        assert "Nothing was pushed" in final.result
    finally:
        await s.office.close()


async def test_a_value_the_engine_holds_is_never_pushed_even_when_approved(
    tmp_path: Path,
) -> None:
    s = await setup(tmp_path, f"secret: {VALUE} and {AWS}")
    try:
        gate = await s.waiting()
        assert f"{PATH}:3: the value of GITHUB_WEBHOOK_SECRET …(20 characters)" in gate.question
        assert VALUE not in gate.question
        assert "it is never pushed: whatever the answer" in gate.question
        body = gate_body(gate, decider="carol", agent=Outbound("o", "widgets", 1))
        assert "no answer pushes it" in body

        await s.office.answer_gate(gate.gate_id, text="yes", answered_by="carol")
        assert await s.drive() == "done"
        assert s.pushed() == "", "an approval does not push a secret value"
        final = await s.driver.status(s.job_id)
        assert final.result is not None
        assert "it holds a secret value the App holds, which is never pushed" in final.result
        assert VALUE not in final.result
    finally:
        await s.office.close()


async def test_mode_never_lets_patterns_through_but_not_values(tmp_path: Path) -> None:
    s = await setup(tmp_path, f"aws_key = {AWS}", project="gates: {secret: never}\n")
    try:
        assert await s.drive() == "done"
        assert s.pushed() != ""
    finally:
        await s.office.close()
    (tmp_path / "again").mkdir()
    s = await setup(tmp_path / "again", f"{VALUE}", project="gates: {secret: never}\n")
    try:
        assert await s.drive() == "waiting"
        assert (await s.gate()).kind == "secret"
        assert s.pushed() == ""
    finally:
        await s.office.close()


async def test_a_clean_change_pushes_without_a_gate(tmp_path: Path) -> None:
    s = await setup(tmp_path, "nothing to hide")
    try:
        assert await s.drive() == "done"
        assert s.pushed() != ""
    finally:
        await s.office.close()


def test_the_proxy_may_never_be_allowed_to_answer_it() -> None:
    assert GATE_KINDS["secret"].proxy_never
    assert "secret" not in GATE_KINDS.only_allowed()
    org = load_organisation(shipped_org_dir())
    with pytest.raises(ConfigError, match="got 'secret'"):
        load_project(
            "humans: {decider: c}\nproxy: {allow: [secret]}\n",
            org=org,
            source="p",
            default_name="w",
        )
