"""Gate kinds are the features': a new one is one registered module, and the store does not
list them.

tests/kickoff_gate.py is a kind no shipped feature asks. Registered beside the standard
features (as the composition root registers theirs), it is accepted by a project's `gates:`
and `proxy.allow`, asked on the issue with its title and hash, and settled by the decider's
reply, with no edit anywhere else. The store's migration that drops the table's list of
kinds keeps a store from the last release working: its open plan gate settles.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import demo_office
import kickoff_gate
import pytest
from app_harness import OWNER, REPO, app_settings, bodies, in_process, until, world
from demo_office import start_job
from local_repo import make_repo

from orchestrator.api import FEATURES, GATE_KINDS, ConfigError, load_project
from orchestrator.config import load_organisation, shipped_org_dir
from orchestrator.core.gate_kinds import GateKinds
from orchestrator.jobs.features import extensions
from orchestrator.jobs.offline import DemoModel
from orchestrator.sandbox.confine import Sandbox
from orchestrator.store import migrations

pytestmark = pytest.mark.timeout(180)
NOWHERE = Sandbox("unavailable", "not needed: the demo model runs no shell")
WITH_KICKOFF = (*FEATURES, kickoff_gate.register)
PROJECT = "humans: {decider: alice}\ngates: {plan: never, kickoff: always}\n"


def kinds_with_kickoff() -> GateKinds:
    return extensions(WITH_KICKOFF).kinds


def test_a_projects_gates_and_proxy_allow_read_the_kinds_the_engine_runs_with() -> None:
    org = load_organisation(shipped_org_dir())
    text = PROJECT + "proxy: {allow: [kickoff]}\n"
    project = load_project(
        text, org=org, source="p.yaml", default_name="w", kinds=kinds_with_kickoff()
    )
    assert project.gates["kickoff"] == "always"
    assert project.gates["intent"] == "never", "a kind left out keeps its default"
    assert project.proxy.allow == ("kickoff",)

    with pytest.raises(ConfigError) as refused:  # the standard features ask no kickoff
        load_project(text, org=org, source="p.yaml", default_name="w")
    issues = {issue.key: issue.message for issue in refused.value.issues}
    assert issues["gates.kickoff"].startswith("unknown gate kind; allowed gate kinds: ")
    assert issues["proxy.allow[0]"] == "must be 'budget' or 'protected-path', got 'kickoff'"

    typo = "humans: {decider: alice}\ngates: {kickof: always}\nproxy: {allow: [plan]}\n"
    with pytest.raises(ConfigError) as wrong:
        load_project(typo, org=org, source="p.yaml", default_name="w", kinds=kinds_with_kickoff())
    found = {(issue.key, issue.line): issue.message for issue in wrong.value.issues}
    assert found[("gates.kickof", 2)].startswith("unknown gate kind; did you mean 'kickoff'?")
    assert found[("proxy.allow[0]", 3)] == (
        "must be 'budget', 'protected-path' or 'kickoff', got 'plan'"
    )
    assert "kickoff" not in GATE_KINDS


async def test_a_new_kind_is_asked_on_the_issue_with_its_hash_and_settled(tmp_path: Path) -> None:
    hub, port, pem = world(tmp_path)
    async with hub.serve() as api_url:
        await hub.push_to_branch(OWNER, REPO, "main", "alice", {".teaparty/project.yaml": PROJECT})
        settings = app_settings(hub, api_url, tmp_path / "home", pem, status_interval_s=0.2)
        demo = DemoModel()
        async with in_process(
            settings, lambda _: demo, port=port, sandbox=NOWHERE, features=WITH_KICKOFF
        ) as runtime:
            number = hub.open_issue(OWNER, REPO, title="Add docs", body="Docs.", author="alice")
            await hub.label_issue(OWNER, REPO, number, "teaparty", sender="alice")
            await until(lambda: bodies(hub, number, "gate:"), what="the kickoff question")
            (asked,) = bodies(hub, number, "gate:")
            (gate,) = await runtime.office.open_gates()
            assert gate.kind == "kickoff"
            assert "— shall the job start now?" in asked
            assert f"`kickoff {gate.short_hash}`" in asked
            reply = f"> kickoff {gate.short_hash}\n\n/approve"  # names it by its kind and hash
            await hub.comment_as(OWNER, REPO, number, "alice", reply)
            await until(lambda: hub.pulls(OWNER, REPO), what="the pull request", limit=90)
            settled = await runtime.office.engine.store.read(
                lambda tx: tx.execute("SELECT kind, answered_by FROM gates").fetchall()
            )
            assert settled == [("kickoff", "alice")]
    assert hub.violations == [], hub.violations


async def test_a_store_from_the_last_release_opens_and_its_open_plan_gate_settles(
    tmp_path: Path,
) -> None:
    """The plan gate is open when the store is made as the last release left it (its gates
    table listed the kinds, its answers were human or proxy); the new release migrates it,
    and answering the gate dispatches the plan it held."""
    repo = make_repo(tmp_path / "widgets")
    project = "humans: {decider: carol}\n"
    demo = DemoModel(title="Add docs", body="Docs.", path="docs/requests/docs.md")
    office = await demo_office.open_office(tmp_path / "home", project, demo)
    try:
        job_id = await start_job(office, repo, project, title="Add docs", body="Docs.")
        await office.prepare(job_id)
        await office.run_until_idle(job_id)
        (gate,) = await office.open_gates(job_id)
        assert gate.kind == "plan"
    finally:
        await office.close()
    as_the_last_release(tmp_path / "home" / "teaparty.db")

    office = await demo_office.open_office(tmp_path / "home", project, demo)
    try:
        await office.resume()
        await office.answer_gate(gate.gate_id, text="yes", answered_by="carol")
        await office.run_until_idle(job_id)
        tasks = await office.engine.store.read(
            lambda tx: tx.execute("SELECT state FROM tasks WHERE job_id = ?", (job_id,)).fetchall()
        )
        assert tasks == [("done",)], "the held dispatch ran"
    finally:
        await office.close()
    with sqlite3.connect(tmp_path / "home" / "teaparty.db") as db:
        (sql,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'gates'").fetchone()
    assert "kind IN" not in sql, "the table lists no kinds any more"


def as_the_last_release(path: Path) -> None:
    """The store as the last release (schema 19) had it: no job marks, and a gates table
    whose CHECKs list the kinds and the two ways an answer came."""
    steps = migrations.MIGRATIONS
    last = steps.index(migrations.JOB_MARKS)  # the schema version before it
    old = migrations.GATE_KINDS
    create = old[: old.index("INSERT INTO gates_new")]
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA foreign_keys=OFF")
    db.executescript(
        f"BEGIN;{create}ALTER TABLE gates_new ADD COLUMN pinned TEXT;"
        "INSERT INTO gates_new SELECT * FROM gates; DROP TABLE gates;"
        "ALTER TABLE gates_new RENAME TO gates;"
        "CREATE INDEX gates_open ON gates (job_id) WHERE answer IS NULL;"
        "CREATE UNIQUE INDEX gates_by_answer_ref ON gates (answer_ref)"
        " WHERE answer_ref IS NOT NULL;"
        f"ALTER TABLE job_workspaces DROP COLUMN mark; PRAGMA user_version={last}; COMMIT;"
    )
    db.close()
