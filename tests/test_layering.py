"""orchestrator/ never imports the GitHub edge; anthropic and aiosqlite stay in their adapters."""

from __future__ import annotations

import ast
import re
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


# The edge reaches the engine through its surface only. bot/secrets.py reads which variables
# the engine keeps before anything else is imported (it re-executes the process), and
# bot/settings.py which a setup may be given (runner mode reads it before it decides to load
# the engine at all), so both may use the one tiny module that holds them.
SURFACE = "orchestrator.api"
SURFACE_EXCEPTIONS = {
    "bot/secrets.py": {"orchestrator.core.secrecy"},
    "bot/settings.py": {"orchestrator.core.secrecy"},
}
SQL = re.compile(
    r"\b(SELECT\s.+\sFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM"
    r"|CREATE\s+(TABLE|INDEX)|ALTER\s+TABLE)\b",
    re.IGNORECASE | re.DOTALL,
)


def modules_imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def bot_files() -> list[Path]:
    return sorted((ROOT / "bot").rglob("*.py"))


def test_bot_imports_the_engine_only_through_its_surface() -> None:
    offenders: dict[str, list[str]] = {}
    for path in bot_files():
        name = str(path.relative_to(ROOT))
        allowed = {SURFACE} | SURFACE_EXCEPTIONS.get(name, set())
        engine = {
            m
            for m in modules_imported(path)
            if m.startswith("orchestrator")
            and not any(m.startswith(a) for a in allowed)
            and m != "orchestrator"
        }
        if engine:
            offenders[name] = sorted(engine)
    assert offenders == {}


def test_bot_holds_no_sql_and_no_reach_into_the_engine() -> None:
    offenders: dict[str, list[str]] = {}
    for path in bot_files():
        tree = ast.parse(path.read_text(), filename=str(path))
        found = [
            f"line {node.lineno}: SQL"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and SQL.search(node.value)
        ]
        found += [
            f"line {node.lineno}: .engine.{node.attr}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "engine"
        ]
        found += [
            f"line {node.lineno}: .execute("
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr in {"execute", "executescript"}
        ]
        if found:
            offenders[str(path.relative_to(ROOT))] = found
    assert offenders == {}


def import_graph() -> dict[str, set[str]]:
    """Module → the project modules it imports at module level (TYPE_CHECKING left out)."""
    graph: dict[str, set[str]] = {}
    for package in ("bot", "orchestrator"):
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            graph[module] = set()
            for node in ast.parse(path.read_text()).body:
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                graph[module] |= {n for n in names if n.split(".")[0] in ("bot", "orchestrator")}
    return {m: {d for d in deps if d in graph and d != m} for m, deps in graph.items()}


def test_no_import_cycles() -> None:
    graph = import_graph()
    cycles: list[list[str]] = []
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for dep in sorted(graph[module]):
            if state.get(dep) == "open":
                cycles.append([*path[path.index(dep) :], dep])
            elif dep not in state:
                visit(dep, [*path, dep])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_no_import_circle_anywhere_counting_every_import() -> None:
    """A graph of every import (grimp: those under TYPE_CHECKING and inside functions too)
    has no circle among the modules of orchestrator/ or bot/: no module imports one that
    leads back to it. lint-imports checks the layers."""
    import grimp

    for package in ("orchestrator", "bot"):
        graph = grimp.build_graph(package, include_external_packages=False)
        circles = sorted(
            (importer, imported)
            for importer in graph.modules
            for imported in graph.find_modules_directly_imported_by(importer)
            if imported != importer and graph.chain_exists(importer=imported, imported=importer)
        )
        assert circles == [], f"imports that lead back to their importer in {package}: {circles}"


FORGE_METHODS = {"ask", "push_target", "deliver"}  # what only a Forge (ports.Forge) defines


def forges(path: Path) -> list[str]:
    """The classes in `path` that implement the Forge port (its Protocol aside)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and not any(isinstance(b, ast.Name) and b.id == "Protocol" for b in node.bases)
        and FORGE_METHODS
        <= {f.name for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    ]


def test_every_forge_lives_at_the_edge() -> None:
    """The engine names the Forge port; the terminal's, GitHub's and the rest implement it in
    bot/ (issue 32: the local run's terminal Forge lives with the rest of the local run)."""
    engine = {
        str(path.relative_to(ROOT)): found
        for path in sorted((ROOT / "orchestrator").rglob("*.py"))
        if (found := forges(path))
    }
    assert engine == {}
    edge = {name for path in bot_files() for name in forges(path)}
    assert {"GitHubForge", "LocalForge"} <= edge, "the scan no longer sees a Forge"
