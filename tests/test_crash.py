"""SIGKILL the engine at many points of a job; a restart must finish it with the same transcript.

The engine runs in a real subprocess (tests/crash_harness.py) with a deterministic fake
organisation: office manager -> project lead -> coding lead (five parallel workers, then
a continuation) and research lead -> researcher. Each case kills the process at one
named point, restarts it without a kill, and compares every conversation's transcript
with an uninterrupted run's: nothing lost, nothing done twice.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

HARNESS = Path(__file__).with_name("crash_harness.py")

KILLS = {
    "inside the first model call": ["model:office-manager:1:inside"],
    "recording a send, before commit": ["record_turn:office-manager:1:inside"],
    "recording a fan-out, between statements": ["record_turn:coding-lead:1:mid"],
    "after a fan-out committed, before any child ran": ["record_turn:coding-lead:1:after"],
    "a worker's reply written, not committed": ["finish:implementer:2:inside"],
    "fan-in: three of five replies in": ["finish:implementer:3:after"],
    "taking the five replies, before commit": ["consume:coding-lead:2:inside"],
    "taking the five replies, between statements": ["consume:coding-lead:2:mid"],
    "a worker's reply, between statements": ["finish:implementer:1:mid"],
    "replies taken, model not yet called": ["consume:coding-lead:2:after"],
    "continuation queued to a worker": ["record_turn:coding-lead:2:after"],
    "between a worker's request and its reply": ["model:implementer:4:inside"],
    "the project lead's reply, before commit": ["finish:project-lead:1:inside"],
    "a worker's tool result committed": ["record_results:implementer:2:after"],
    "between a tool's result and the next model call": ["model:implementer:3:inside"],
    "three kills in a row": [
        "finish:implementer:1:after",
        "consume:coding-lead:1:inside",
        "finish:office-manager:1:inside",
    ],
}


def run(store: Path, kill: str | None) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, str(HARNESS), str(store)] + (["--kill", kill] if kill else [])
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)


def canonical(store: Path) -> dict[str, Any]:
    """Every conversation's transcript, with random ids replaced by their place in the tree."""
    with sqlite3.connect(store) as db:
        rows = db.execute(
            "SELECT c.conversation_id, c.parent_id, a.opening_call_id, c.kind, c.state, c.agent,"
            " c.initiator, c.result, a.pending_count, a.status FROM conversations c"
            " JOIN agent_contexts a ON a.context_id = c.conversation_id ORDER BY c.rowid"
        ).fetchall()
        names: dict[str, str] = {}
        for cid, parent, call, *_ in rows:
            names[cid] = cid if parent is None else f"{names[parent]}/{call}"
        result: dict[str, Any] = {}
        for cid, _, _, *fields in rows:
            messages = db.execute(
                "SELECT seq, sender, role, content FROM messages WHERE conversation_id = ?"
                " ORDER BY seq",
                (cid,),
            ).fetchall()
            result[names[cid]] = {"fields": fields, "messages": messages}
        result["inbox"] = db.execute("SELECT count(*) FROM inbox").fetchone()[0]
        result["jobs"] = db.execute("SELECT count(*) FROM jobs").fetchone()[0]
    text = json.dumps(result, sort_keys=True)
    for cid in sorted(names, key=len, reverse=True):
        text = text.replace(cid, names[cid])
    return dict(json.loads(text))


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    store = tmp_path_factory.mktemp("clean") / "store.db"
    done = run(store, None)
    assert done.returncode == 0, done.stderr
    return canonical(store)


def test_the_uninterrupted_run_finishes_the_job(uninterrupted: dict[str, Any]) -> None:
    root = uninterrupted["job:1"]
    assert root["fields"][4] == (
        "job done: project: coding: merged and polished: implementer did [polish part 0]"
        " + research: researcher did [find prior art]"
    )
    assert uninterrupted["inbox"] == 0
    assert uninterrupted["jobs"] == 1
    workers = [k for k in uninterrupted if k.startswith("job:1/om1/pl1/w")]
    assert len(workers) == 5
    assert all(c["fields"][5] == 0 for k, c in uninterrupted.items() if k.startswith("job:"))


@pytest.mark.parametrize("kills", KILLS.values(), ids=KILLS.keys())
def test_sigkill_then_restart_gives_the_uninterrupted_transcript(
    tmp_path: Path, kills: list[str], uninterrupted: dict[str, Any]
) -> None:
    store = tmp_path / "store.db"
    log = store.with_name("store.db.tools.log")
    for kill in [*kills, None]:
        # What each run may not do: run a tool whose result the store held when it started.
        # (A tool killed before its result committed runs again, and that result may then
        # commit before the next kill: the tool ran twice, rightly.)
        persisted, logged = persisted_tool_results(store), tool_runs(log)
        done = run(store, kill)
        if kill is None:
            assert done.returncode == 0, done.stderr
        else:
            assert done.returncode == -signal.SIGKILL, f"{kill} was never reached: {done.stderr}"
        ran = set(tool_runs(log)[len(logged) :])
        assert ran & persisted == set(), "a tool call whose result was persisted ran again"
    assert canonical(store) == uninterrupted
    runs = Counter(tool_runs(log))
    assert len(runs) == 6  # five parts and the polish
    assert max(runs.values()) <= 2


def tool_runs(log: Path) -> list[str]:
    """The workers' tool calls run so far, in order, as the tool log has them."""
    return log.read_text().splitlines() if log.exists() else []


def persisted_tool_results(store: Path) -> set[str]:
    """The worker tool calls whose results the store holds, as the tool log writes them."""
    if not store.exists():
        return set()
    with sqlite3.connect(store) as db:
        rows = db.execute(
            "SELECT conversation_id, json_extract(content, '$.call_id') FROM messages"
            " WHERE role = 'tool' AND json_extract(content, '$.call_id') LIKE 't-%'"
        ).fetchall()
    return {f"{conversation} {call}" for conversation, call in rows}


def test_a_tool_whose_result_was_not_committed_runs_again(tmp_path: Path) -> None:
    """At-least-once is the honest promise for a tool killed before its result committed.

    Results that shared the killed commit (group commit) are lost with it and their tools
    run again too; a tool that never ran before the kill runs exactly once.
    """
    store = tmp_path / "store.db"
    log = store.with_name("store.db.tools.log")
    assert run(store, "record_results:implementer:1:inside").returncode == -signal.SIGKILL
    before = set(log.read_text().splitlines())
    assert run(store, None).returncode == 0
    runs = Counter(log.read_text().splitlines())
    rerun = {line for line, n in runs.items() if n > 1}
    assert rerun, "the killed result's tool ran again"
    assert rerun <= before
    assert max(runs.values()) == 2
    assert len(runs) == 6
