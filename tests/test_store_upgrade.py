"""A store written before jobs kept their project file (schema 5) upgrades with its jobs running.

Migration 6 gives each job the project text its App link held (if any), marks every
existing job ready (its workspace was made at start then), and adds the failures table.
A running job carries on: its conversation is still runnable, its project comes back on
resume, and a job whose text was never stored is named so the edge can restore it.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from orchestrator.bus import gates as gate_rows
from orchestrator.bus import transactions as txn
from orchestrator.config import load_organisation, shipped_org_dir
from orchestrator.core.messages import ConversationKind, InboxKind, job_conversation_id
from orchestrator.jobs.office import Office
from orchestrator.models.scripted import ScriptedModel
from orchestrator.proxy import decisions
from orchestrator.sandbox.confine import Sandbox
from orchestrator.store.migrations import GATE_ANSWERS_ON_BEHALF, MIGRATIONS
from orchestrator.store.sqlite import Store

PROJECT = "humans: {decider: alice}\nbudget: {max_usd: 2.5}\nparallel: 2\n"
NOWHERE = Sandbox("unavailable", "not needed: nothing runs")


def old_store(path: Path) -> None:
    """Schema 5, as the previous release wrote it, with two active jobs and a finished one."""
    db = sqlite3.connect(path, isolation_level=None)
    for number, script in enumerate(MIGRATIONS[:5], start=1):
        db.executescript(f"BEGIN;{script};PRAGMA user_version={number};COMMIT;")
    subjects = {
        1: {"owner": "octo", "repo": "widgets", "project_yaml": PROJECT, "learnings": "Be brief."},
        2: {"owner": "octo", "repo": "gadgets"},  # what the old code wrote: no project text
        3: {"owner": "octo", "repo": "done", "project_yaml": PROJECT},
    }
    for job_id, subject in subjects.items():
        state = "complete" if job_id == 3 else "active"
        db.execute(
            "INSERT INTO jobs (job_id, job_key, project, title, state, created_at, updated_at)"
            " VALUES (?, ?, ?, 't', ?, 0, 0)",
            (job_id, f"github:octo/{subject['repo']}#1", f"octo-{subject['repo']}", state),
        )
        db.execute(
            "INSERT INTO job_links (job_id, forge, subject) VALUES (?, 'github', ?)",
            (job_id, json.dumps(subject)),
        )
        root = job_conversation_id(job_id)
        txn.create_conversation(
            db,
            conversation_id=root,
            kind=ConversationKind.JOB,
            agent="office-manager",
            initiator="engine",
            parent_id=None,
            job_id=job_id,
        )
        if state == "active":
            txn.deliver(db, root, kind=InboxKind.REQUEST, sender="engine", content={"text": "go"})
    db.close()


async def open_office(home: Path) -> Office:
    return await Office.open(
        home,
        org=load_organisation(shipped_org_dir()),
        projects=[],
        models=lambda _: ScriptedModel({}),
        env={},
        sandbox=NOWHERE,
        scripted=True,
    )


async def test_a_schema_5_store_with_running_jobs_upgrades_and_resumes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    old_store(home / "teaparty.db")

    office = await open_office(home)
    try:
        rows = await office.engine.store.read(
            lambda tx: tx.execute(
                "SELECT job_id, project_text, learnings, ready FROM jobs ORDER BY job_id"
            ).fetchall()
        )
        assert rows == [(1, PROJECT, "Be brief.", 1), (2, None, None, 1), (3, PROJECT, None, 1)]
        assert await office.engine.bus.runnable() == ["job:1", "job:2"], "running jobs carry on"
        assert await office.failures(1) == []

        resumed = await office.resume()
        assert resumed.jobs == (1,)
        assert resumed.without_project == (2,)
        widgets = office.projects["octo-widgets"]
        assert widgets.budget.max_usd == 2.5
        assert widgets.parallel == 2
        assert "Be brief." in office.agents.spec("octo-widgets/project-lead").system

        await office.restore_project(2, PROJECT, learnings=None)
    finally:
        await office.close()

    version = await _version(home / "teaparty.db")
    assert version == len(MIGRATIONS)
    again = await open_office(home)
    try:
        assert (await again.resume()).jobs == (1, 2), "a restored project is stored for good"
    finally:
        await again.close()


def one_job_store(path: Path, migrations: int) -> sqlite3.Connection:
    """A store at `path` as the first `migrations` migrations left it, holding job 1 and its
    conversation; its open connection."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA foreign_keys=ON")
    for number, script in enumerate(MIGRATIONS[:migrations], start=1):
        db.executescript(f"BEGIN;{script};PRAGMA user_version={number};COMMIT;")
    db.execute(
        "INSERT INTO jobs (job_id, job_key, project, title, created_at, updated_at)"
        " VALUES (1, 'k', 'widgets', 't', 0, 0)"
    )
    db.execute(
        "INSERT INTO conversations (conversation_id, kind, agent, initiator, job_id, created_at)"
        " VALUES ('job:1', 'job', 'office-manager', 'engine', 1, 0)"
    )
    return db


async def _version(path: Path) -> int:
    store = await Store.open(path)
    try:
        return int(await store.read(lambda tx: tx.execute("PRAGMA user_version").fetchone()[0]))
    finally:
        await store.close()


async def test_gates_widen_their_kinds_keeping_rows_and_what_refers_to_them(
    tmp_path: Path,
) -> None:
    """Migration 15 rebuilds the gates table (SQLite's way to change a CHECK) while the
    proxy's decisions refer to its rows: every row and column survives, and the old CHECK
    is gone."""
    path = tmp_path / "store.db"
    db = one_job_store(path, 14)
    db.execute(
        "INSERT INTO gates (gate_id, job_id, conversation_id, call_id, kind, question, options,"
        " asked_by, asked_at, answer, answered_by, answered_via, answer_ref, content_hash,"
        " hashed_at) VALUES (7, 1, 'job:1', 'q', 'question', 'Ship?', '[\"yes\"]', 'lead', 1,"
        " 'yes', 'alice', 'human', 'comment:9', 'abc', 1)"
    )
    db.execute(
        "INSERT INTO proxy_decisions (gate_id, job_id, project, decider, kind, agreement,"
        " policy, why, predicted_at) VALUES (7, 1, 'widgets', 'alice', 'question', 0.5,"
        " 'always', 'asked', 1)"
    )
    db.close()

    store = await Store.open(path)
    try:
        row = await store.read(
            lambda tx: tx.execute(
                "SELECT gate_id, kind, question, answer, answer_ref, content_hash, payload"
                " FROM gates"
            ).fetchall()
        )
        assert row == [(7, "question", "Ship?", "yes", "comment:9", "abc", None)]

        def plan_gate(tx: sqlite3.Connection) -> None:
            tx.execute(
                "INSERT INTO gates (job_id, conversation_id, call_id, kind, question, asked_by,"
                " asked_at) VALUES (1, 'job:1', 'p', 'protected-path', 'Push?', 'engine', 2)"
            )

        await store.write(plan_gate)
        refs = await store.read(lambda tx: tx.execute("PRAGMA foreign_key_check").fetchall())
        assert refs == []
        indexes = await store.read(
            lambda tx: tx.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'gates'"
                " AND sql IS NOT NULL ORDER BY name"
            ).fetchall()
        )
        assert indexes == [("gates_by_answer_ref",), ("gates_open",)]
    finally:
        await store.close()


async def test_answers_given_with_yes_stop_counting_as_the_deciders(tmp_path: Path) -> None:
    """The migration that adds `answered_via = 'auto'` rebuilds the gates table: an answer
    `teaparty run --yes` stored as the decider's (who answered ends in " (--yes)") becomes
    `auto`, and the proxy forgets its comparison with it; a person's answer, its decision, and
    every other column stay; a gate open before still settles after."""
    path = tmp_path / "store.db"
    before = MIGRATIONS.index(GATE_ANSWERS_ON_BEHALF)
    db = one_job_store(path, before)
    for gate_id, by in ((1, "alice (--yes)"), (2, "alice"), (3, None)):
        answer = None if by is None else "yes"
        db.execute(
            "INSERT INTO gates (gate_id, job_id, conversation_id, call_id, kind, question,"
            " options, asked_by, asked_at, answer, answered_by, answered_via, answered_at,"
            " pinned) VALUES (?, 1, 'job:1', ?, 'question', 'Ship?', '[\"yes\", \"no\"]',"
            " 'lead', 1, ?, ?, ?, 2, '{\"round\": 1}')",
            (gate_id, f"q{gate_id}", answer, by, None if by is None else "human"),
        )
        db.execute(
            "INSERT INTO proxy_decisions (gate_id, job_id, project, decider, kind, answer,"
            " confidence, agreement, policy, why, predicted_at, actual, agreed, decided_at)"
            " VALUES (?, 1, 'widgets', 'alice', 'question', 'yes', 0.9, 0.5, 'when_unsure',"
            " 'asked', 1, ?, ?, ?)",
            (gate_id, answer, None if by is None else 1, None if by is None else 2),
        )
    db.close()

    store = await Store.open(path)
    try:
        gates_now = await store.read(
            lambda tx: tx.execute(
                "SELECT gate_id, answered_by, answered_via, pinned FROM gates ORDER BY gate_id"
            ).fetchall()
        )
        assert gates_now == [
            (1, "alice (--yes)", "auto", '{"round": 1}'),
            (2, "alice", "human", '{"round": 1}'),
            (3, None, None, '{"round": 1}'),
        ]
        settled = await store.read(
            lambda tx: tx.execute(
                "SELECT gate_id, actual, agreed FROM proxy_decisions ORDER BY gate_id"
            ).fetchall()
        )
        assert settled == [(1, None, None), (2, "yes", 1), (3, None, None)]
        await store.write(
            lambda tx: gate_rows.answer(tx, 3, text="no", answered_by="alice", via="human")
        )
        assert await store.read(lambda tx: decisions.settle(tx)) == 1
        history, _ = await store.read(
            lambda tx: decisions.history(tx, decisions.Group("widgets", "alice", "question"))
        )
        assert len(history) == 2, "the person's two answers are decisions; --yes's is not"
        refs = await store.read(lambda tx: tx.execute("PRAGMA foreign_key_check").fetchall())
        assert refs == []
    finally:
        await store.close()
