"""orchestrator/api.py, the edge's one door, exports no raw git and no store internals: the
edge's git users go through named ports (runner mode's state through `StoreRef`; the local
commands through `repository_top`, `has_head`, `uncommitted`, `git_version`), so the engine's
git and store can change behind it (issue 32)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from orchestrator import api

API = Path(api.__file__)
INTERNALS = ("orchestrator.workspace", "orchestrator.store")
PORTS = {"orchestrator.workspace.state_ref"}  # runner mode's state on a git ref
# Names of those modules that api.py may still export, each with why. Their classes (records,
# errors) are the seam's vocabulary and need no entry: only functions and constants do.
ALLOWED = {
    "slug": "an issue title as a branch name: pure text, no git run; bot/handlers names a "
    "job's branch with it, as the engine's local runs do",
}


def exported_internals() -> dict[str, str]:
    """What api.py exports of the engine's git and store modules, but their classes: each
    name and the module it comes from, as api.py's imports name it."""
    found: dict[str, str] = {}
    for node in ast.parse(API.read_text(), filename=str(API)).body:
        if not isinstance(node, ast.ImportFrom) or not node.module:
            continue
        if not node.module.startswith(INTERNALS) or node.module in PORTS:
            continue
        for alias in node.names:
            name = alias.asname or alias.name
            if name in api.__all__ and not inspect.isclass(getattr(api, name)):
                found[name] = node.module
    return found


def test_api_exports_no_raw_git_or_store_internals() -> None:
    raw = {name: where for name, where in exported_internals().items() if name not in ALLOWED}
    assert raw == {}, "give the edge a named port (a function or record of its own) instead"


def test_no_export_is_a_git_or_store_function_by_another_way() -> None:
    """A function of those modules re-exported through another engine module is one too."""
    raw = {
        name: value.__module__
        for name in api.__all__
        if inspect.isfunction(value := getattr(api, name))
        and value.__module__.startswith(INTERNALS)
        and value.__module__ not in PORTS
        and name not in ALLOWED
    }
    assert raw == {}


def test_each_allowed_name_is_still_exported_and_needed() -> None:
    assert set(ALLOWED) <= set(exported_internals()), "drop the entries api.py exports no more"
