"""Every table of the store has one owning module; SQL naming it anywhere else is a defect.

The schema is the engine's real interface: a column change ripples to every module whose SQL
names the table, and no import graph shows it. So each table has an owner, the one module
that reads and writes it; everything else calls the owner's named functions.

`DEBT` lists the SQL that still names a table outside its owner, file by file: the list only
shrinks. A new use outside the owner fails the first test; a use moved to its owner fails the
second until its line here is deleted.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("orchestrator", "bot")

OWNERS = {
    # the bus: conversations, their messages and the jobs they belong to
    "jobs": "orchestrator/bus/jobs.py",
    "conversations": "orchestrator/bus/transactions.py",
    "agent_contexts": "orchestrator/bus/transactions.py",
    "inbox": "orchestrator/bus/transactions.py",
    "messages": "orchestrator/bus/transactions.py",
    "failures": "orchestrator/bus/failures.py",
    "waits": "orchestrator/bus/waits.py",
    "gates": "orchestrator/bus/gates.py",
    # the store's own records of GitHub's deliveries
    "deliveries": "orchestrator/store/deliveries.py",
    "read_marks": "orchestrator/store/deliveries.py",
    # the task board and the workspace
    "tasks": "orchestrator/teams/board.py",
    "task_deps": "orchestrator/teams/board.py",
    "task_log": "orchestrator/teams/board.py",
    "job_workspaces": "orchestrator/workspace/spaces.py",
    "worktree_slots": "orchestrator/workspace/spaces.py",
    # what the project learned, and the proxy's record
    "learnings": "orchestrator/memory/index.py",
    "learnings_fts": "orchestrator/memory/index.py",
    "learning_blobs": "orchestrator/memory/index.py",
    "learnings_forgotten": "orchestrator/memory/index.py",
    "proxy_decisions": "orchestrator/proxy/decisions.py",
    "proxy_jobs": "orchestrator/proxy/decisions.py",
    "proxy_settings": "orchestrator/proxy/decisions.py",
    # a job's features
    "job_sources": "orchestrator/jobs/sources.py",
    "job_links": "orchestrator/jobs/records.py",
    "forge_objects": "orchestrator/jobs/records.py",
    "job_commands": "orchestrator/jobs/commands.py",
    "job_steering": "orchestrator/jobs/control.py",
    "project_preferences": "orchestrator/jobs/control.py",
    "issue_revisions": "orchestrator/jobs/revisions.py",
    "job_learned": "orchestrator/jobs/learned.py",
    "job_learning_files": "orchestrator/jobs/learned.py",
    "job_pulls": "orchestrator/jobs/rounds.py",
    "review_rounds": "orchestrator/jobs/rounds.py",
    "review_points": "orchestrator/jobs/rounds.py",
    "review_threads": "orchestrator/jobs/rounds.py",
    "checks": "orchestrator/jobs/checks.py",
    "ci_facts": "orchestrator/jobs/ci_rounds.py",
    "network_refusals": "orchestrator/jobs/refusals.py",
}

# Modules that touch every table by its nature, and why.
EXEMPT = {
    "orchestrator/store/migrations.py": "the schema itself: creates and upgrades every table",
    "orchestrator/store/prune.py": "removes a finished job's rows from every table that refers "
    "to it, found from the schema's foreign keys (no table named by hand)",
    "orchestrator/store/snapshot.py": "copies the whole database (no table named)",
}

# SQL that names a table outside its owner today: to be moved behind the owner's functions.
DEBT: dict[str, set[str]] = {}

_SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|REPLACE|CREATE|ALTER|DROP)\b")
_NAMED = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+(\w+)", re.IGNORECASE)


@functools.cache
def tables() -> frozenset[str]:
    """The tables the schema creates (a rebuild's `_new` copies apart)."""
    schema = (ROOT / "orchestrator/store/migrations.py").read_text()
    found = re.findall(r"CREATE (?:VIRTUAL )?TABLE (?:IF NOT EXISTS )?(\w+)", schema)
    return frozenset(name for name in found if not name.endswith("_new"))


def sql_text(source: str) -> Iterator[str]:
    """The string literals of a module that read as SQL (an f-string's holes as `?`)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            parts = (v.value if isinstance(v, ast.Constant) else "?" for v in node.values)
            text = "".join(str(part) for part in parts)
        else:
            continue
        if _SQL.search(text):
            yield text


@functools.cache
def named() -> dict[str, set[str]]:
    """Per module (relative path), the tables its SQL names."""
    known = tables()
    found: dict[str, set[str]] = {}
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            names = {
                name
                for text in sql_text(path.read_text())
                for name in _NAMED.findall(text)
                if name in known
            }
            if names:
                found[path.relative_to(ROOT).as_posix()] = names
    return found


def outside_owners() -> dict[str, set[str]]:
    uses = named()
    return {
        module: {table for table in names if OWNERS[table] != module}
        for module, names in uses.items()
        if module not in EXEMPT
    }


def test_every_table_has_one_owning_module_that_exists() -> None:
    assert set(OWNERS) == tables(), "a table without an owner, or an owner of no table"
    for table, owner in OWNERS.items():
        assert (ROOT / owner).is_file(), f"{table}: its owner {owner} is not a module"
        assert table in named().get(owner, set()), f"{owner} never names {table}"


def test_no_sql_names_a_table_outside_its_owner_beyond_the_listed_debt() -> None:
    new = {
        module: sorted(names - DEBT.get(module, set()))
        for module, names in outside_owners().items()
        if names - DEBT.get(module, set())
    }
    assert not new, (
        "SQL naming a table outside its owner (call a function of the owner instead): "
        + "; ".join(f"{m}: {', '.join(t)} (owner {OWNERS[t[0]]})" for m, t in new.items())
    )


def test_the_debt_list_shrinks_as_sql_moves_to_its_owner() -> None:
    uses = outside_owners()
    paid = {
        module: sorted(names - uses.get(module, set()))
        for module, names in DEBT.items()
        if names - uses.get(module, set())
    }
    assert not paid, f"no longer outside its owner: delete from DEBT: {paid}"


def test_the_scan_finds_sql_in_every_form_the_code_writes_it() -> None:
    """So that a passing run means something: plain, concatenated and f-string SQL."""
    source = (
        'a = "SELECT x FROM tasks t JOIN jobs j ON j.job_id = t.job_id"\n'
        'b = ("UPDATE gates SET state = ?" " WHERE gate_id = ?")\n'
        'c = f"INSERT INTO waits (a) VALUES ({n})"\n'
        'd = "the jobs from the tasks"\n'
    )
    found = {name for text in sql_text(source) for name in _NAMED.findall(text)}
    assert found == {"tasks", "jobs", "gates", "waits"}
