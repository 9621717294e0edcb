"""The edge (bot/) talks to the engine through the Office's own methods, not its collaborators.

`office.rounds.pull(...)` or `records = office.records` ties the App to how the engine is put
together: a collaborator renamed, split or merged breaks handlers no import graph links to
it. So the edge calls the Office (or a port `orchestrator.api` names); a reference to one of
its collaborators is a defect.

`DEBT` lists, file by file, the collaborators the edge still reaches today: the list only
shrinks. A new reach fails the first test; one removed fails the second until its name is
deleted here.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# What the edge may name on the Office without calling it: its configuration, and its run
# loop handed to a supervisor as a callable.
ALLOWED = {"org", "serve"}

DEBT: dict[str, set[str]] = {}


def _is_office(node: ast.expr) -> bool:
    """`office`, or `<anything>.office`."""
    return (isinstance(node, ast.Name) and node.id == "office") or (
        isinstance(node, ast.Attribute) and node.attr == "office"
    )


def reached(source: str) -> set[str]:
    """The Office attributes `source` names without calling them (collaborators reached)."""
    tree = ast.parse(source)
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and id(node) not in called
        and _is_office(node.value)
        and node.attr not in ALLOWED
    }


@functools.cache
def reaches() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "bot").rglob("*.py")):
        names = reached(path.read_text())
        if names:
            found[path.relative_to(ROOT).as_posix()] = names
    return found


def test_the_edge_reaches_no_collaborator_of_the_office_beyond_the_listed_debt() -> None:
    new = {
        module: sorted(names - DEBT.get(module, set()))
        for module, names in reaches().items()
        if names - DEBT.get(module, set())
    }
    assert not new, f"call the Office (or an orchestrator.api port) instead: {new}"


def test_the_debt_list_shrinks_as_the_edge_stops_reaching_in() -> None:
    found = reaches()
    gone = {
        module: sorted(names - found.get(module, set()))
        for module, names in DEBT.items()
        if names - found.get(module, set())
    }
    assert not gone, f"no longer reached: delete from DEBT: {gone}"


def test_the_scan_sees_a_chain_and_an_alias_and_lets_a_call_be() -> None:
    source = (
        "office.rounds.pull(1)\n"
        "records = self.office.records\n"
        "office.open_gates(3)\n"
        "runtime.office.serve\n"
    )
    assert reached(source) == {"rounds", "records"}
