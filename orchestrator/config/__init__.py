"""The configuration API: organisation and project models, their loaders, and `config check`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.config.load import read_text, read_yaml, shipped_org_dir
from orchestrator.config.organisation import load_organisation, read_agent, read_workgroup
from orchestrator.config.project import load_project
from orchestrator.config.schema import (
    DEFAULT_MAX_TURNS,
    DEFAULT_MODEL,
    KNOWN_TOOLS,
    ORG_FILE,
    PROJECT_FILE,
    AgentDef,
    AgentDefaults,
    Budget,
    Humans,
    Organisation,
    Project,
    Workgroup,
)
from orchestrator.core.errors import ConfigError, ConfigIssue
from orchestrator.core.gate_kinds import GateKinds, GateMode

__all__ = [
    "DEFAULT_MAX_TURNS",
    "DEFAULT_MODEL",
    "KNOWN_TOOLS",
    "ORG_FILE",
    "PROJECT_FILE",
    "AgentDef",
    "AgentDefaults",
    "Budget",
    "CheckReport",
    "ConfigError",
    "ConfigIssue",
    "GateKinds",
    "GateMode",
    "Humans",
    "Organisation",
    "Project",
    "Workgroup",
    "check_path",
    "check_paths",
    "load_organisation",
    "load_project",
    "shipped_org_dir",
]


@dataclass(frozen=True)
class CheckReport:
    """What checking one path found: its issues, or how many workgroups and agents it holds."""

    path: Path
    issues: tuple[ConfigIssue, ...] = ()
    workgroups: int = 0
    agents: int = 0
    note: str | None = None  # what else to know: e.g. that a repository runs on the defaults


def check_paths(paths: Sequence[Path], *, org_dir: Path, kinds: GateKinds) -> list[ConfigIssue]:
    """Every issue found in the given files and directories (see check_path)."""
    found = (check_path(path, org_dir=org_dir, kinds=kinds) for path in paths)
    return [issue for report in found for issue in report.issues]


def check_path(path: Path, *, org_dir: Path, kinds: GateKinds) -> CheckReport:
    """Check an organisation, a repository's project (against ``org_dir``) or one YAML file.

    A repository without a project file is fine: its jobs run on the defaults.
    """
    if path.is_dir() and (path / ".git").exists() and not (path / PROJECT_FILE).exists():
        if not (path / ORG_FILE).is_file():
            return CheckReport(path, note=f"no {PROJECT_FILE}: the defaults apply")
    try:
        workgroups, agents = _check(path, org_dir, kinds)
    except ConfigError as exc:
        return CheckReport(path, exc.issues)
    return CheckReport(path, (), workgroups, agents)


def _check(path: Path, org_dir: Path, kinds: GateKinds) -> tuple[int, int]:
    if path.is_dir():
        if (path / ORG_FILE).is_file():
            return _check_org(path)
        if (path / PROJECT_FILE).is_file():
            name = path.resolve().name
            return _check_project(path / PROJECT_FILE, org_dir, kinds, name=name)
        message = f"neither an organisation ({ORG_FILE}) nor a repository ({PROJECT_FILE})"
        raise _problem(path, message)
    if not path.is_file():
        raise _problem(path, "no such file or directory")
    if path.name == ORG_FILE:
        return _check_org(path.parent)
    if path.name == Path(PROJECT_FILE).name:
        repository = path.parent.parent if path.parent.name == ".teaparty" else path.parent
        return _check_project(path, org_dir, kinds, name=repository.resolve().name)
    return _check_single(path)


def _problem(path: Path, message: str) -> ConfigError:
    return ConfigError((ConfigIssue(str(path), None, "", message),))


def _check_org(directory: Path) -> tuple[int, int]:
    org = load_organisation(directory)
    return len(org.workgroups), len(org.agents)


def _check_project(path: Path, org_dir: Path, kinds: GateKinds, *, name: str) -> tuple[int, int]:
    org = load_organisation(org_dir)
    text = read_text(path)
    project = load_project(text, org=org, source=str(path), default_name=name, kinds=kinds)
    agents = {project.lead.name} | {a.name for group in project.workgroups for a in group.roster}
    return len(project.workgroups), len(agents)


def _check_single(path: Path) -> tuple[int, int]:
    """Check one agent or workgroup file on its own: its schema, not the names it refers to."""
    issues: list[ConfigIssue] = []
    if _looks_like(path) == "agent":
        read_agent(path, AgentDefaults(), issues=issues)
        counts = (0, 1)
    else:
        workgroup = read_workgroup(path, issues)
        counts = (1, 0 if workgroup is None else len({workgroup[1].lead, *workgroup[1].members}))
    if issues:
        raise ConfigError(tuple(issues))
    return counts


def _looks_like(path: Path) -> str:
    if path.parent.name in {"agents", "workgroups"}:
        return path.parent.name.removesuffix("s")
    data = read_yaml(path).data
    if isinstance(data, dict) and "prompt" in data:
        return "agent"
    if isinstance(data, dict) and "members" in data:
        return "workgroup"
    message = "cannot tell an agent (has prompt) from a workgroup (has members); "
    raise _problem(path, message + "put it in agents/ or workgroups/")
