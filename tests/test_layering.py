"""orchestrator/ never imports the GitHub edge; anthropic and aiosqlite stay in their adapters."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {"bot", "fastapi", "starlette", "githubkit", "uvicorn"}
ADAPTERS = {
    "aiosqlite": {"orchestrator/store/sqlite.py"},
    "anthropic": {"orchestrator/models/anthropic.py"},
}


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_orchestrator_does_not_import_the_edge() -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(imports(path) & FORBIDDEN)
        for path in (ROOT / "orchestrator").rglob("*.py")
        if imports(path) & FORBIDDEN
    }
    assert offenders == {}


def test_adapters_own_their_libraries() -> None:
    for library, owners in ADAPTERS.items():
        users = {
            str(path.relative_to(ROOT))
            for folder in ("orchestrator", "bot")
            for path in (ROOT / folder).rglob("*.py")
            if library in imports(path)
        }
        assert users <= owners, f"{library} imported outside {owners}: {users - owners}"
