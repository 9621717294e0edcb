"""A `setup:` to suggest for a repository that has none, from the files it has.

Read from the repository's files at a commit (names, and the text of a manifest), never run:
a manifest is data. The suggestion is a starting point a person reviews, so it names the
file each choice came from.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

_EXTRAS = ("test", "tests", "testing", "dev")


@dataclass(frozen=True)
class Suggestion:
    """A setup as the project file would hold it, and why each part was chosen."""

    setup: Mapping[str, object]
    because: tuple[str, ...]


def suggest(names: frozenset[str], read: Callable[[str], str | None]) -> Suggestion | None:
    """A setup for a repository with files `names` (paths at the commit); `read(path)` is a
    file's text (None: unreadable). None when nothing is recognised."""
    for found in (_python, _node, _rust, _go):
        if (suggestion := found(names, read)) is not None:
            return suggestion
    return None


def _python(names: frozenset[str], read: Callable[[str], str | None]) -> Suggestion | None:
    venv = "python3 -m venv .venv"
    if "pyproject.toml" in names:
        try:
            data = tomllib.loads(read("pyproject.toml") or "")
        except tomllib.TOMLDecodeError:
            data = {}
        project = data.get("project", {})
        extras = project.get("optional-dependencies", {}) if isinstance(project, dict) else {}
        extra = next((name for name in _EXTRAS if name in extras), None)
        target = f"'.[{extra}]'" if extra else "."
        why = [
            f"pyproject.toml: installed with its `{extra}` extra"
            if extra
            else "pyproject.toml: installed (it has no test or dev extra)"
        ]
        tested = "pytest" in json.dumps(extras) or "pytest" in data.get("tool", {})
        return Suggestion(
            {
                "commands": [venv, f".venv/bin/pip install -e {target}"],
                "key_files": ["pyproject.toml"],
                "network": ["python"],
                **({"test": ".venv/bin/python -m pytest -q"} if tested else {}),
            },
            (*why, *(["pytest is named: the test command runs it"] if tested else [])),
        )
    requirements = sorted(
        n for n in names if "/" not in n and n.startswith("requirements") and n.endswith(".txt")
    )
    if requirements:
        installs = " ".join(f"-r {name}" for name in requirements)
        return Suggestion(
            {
                "commands": [venv, f".venv/bin/pip install {installs}"],
                "key_files": requirements,
                "network": ["python"],
                "test": ".venv/bin/python -m pytest -q",
            },
            (f"{', '.join(requirements)}: installed into a virtualenv",),
        )
    return None


def _node(names: frozenset[str], read: Callable[[str], str | None]) -> Suggestion | None:
    if "package.json" not in names:
        return None
    locks = {
        "package-lock.json": "npm ci",
        "yarn.lock": "yarn install --frozen-lockfile",
        "pnpm-lock.yaml": "pnpm install --frozen-lockfile",
    }
    lock = next((name for name in locks if name in names), None)
    try:
        scripts = json.loads(read("package.json") or "{}").get("scripts", {})
    except (ValueError, AttributeError):
        scripts = {}
    tested = isinstance(scripts, dict) and "test" in scripts
    return Suggestion(
        {
            "commands": [locks[lock] if lock else "npm install"],
            "key_files": ["package.json", *([lock] if lock else [])],
            "network": ["node"],
            **({"test": "npm test"} if tested else {}),
        },
        (
            f"{lock}: installed exactly as locked" if lock else "package.json: no lock file",
            *(["package.json has a test script"] if tested else []),
        ),
    )


def _rust(names: frozenset[str], read: Callable[[str], str | None]) -> Suggestion | None:
    if "Cargo.toml" not in names:
        return None
    return Suggestion(
        {
            "commands": ["CARGO_HOME=.cargo cargo fetch"],
            "key_files": ["Cargo.toml", *(["Cargo.lock"] if "Cargo.lock" in names else [])],
            "network": ["rust"],
            "test": "CARGO_HOME=.cargo cargo test --offline",
        },
        ("Cargo.toml: crates fetched into .cargo, in the worktree, where tasks see them",),
    )


def _go(names: frozenset[str], read: Callable[[str], str | None]) -> Suggestion | None:
    if "go.mod" not in names:
        return None
    return Suggestion(
        {
            "commands": ["GOMODCACHE=$PWD/.gomodcache go mod download"],
            "key_files": ["go.mod", *(["go.sum"] if "go.sum" in names else [])],
            "network": ["go"],
            "test": "GOMODCACHE=$PWD/.gomodcache GOFLAGS=-mod=mod go test ./...",
        },
        ("go.mod: modules fetched into .gomodcache, in the worktree, where tasks see them",),
    )
