"""A small organisation on disk for configuration tests, each of which breaks it in one place;
its fixtures (`org_dir`, `org`) and the helpers that find one issue (a pytest plugin)."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

from orchestrator.api import load_project
from orchestrator.config import ConfigError, ConfigIssue, Organisation, load_organisation

ORG_YAML = """\
name: Test organisation
office_manager: office-manager
proxy: proxy
project_lead: project-lead
humans:
  decider: boss
defaults: {model: claude-sonnet-4-5, max_turns: 40}
workgroups:
  coding: workgroups/coding.yaml
"""
CODING_YAML = """\
name: coding
description: Writes code.
lead: coding-lead
members:
  - implementer
  - reviewer
"""
AGENT_TOOLS = {
    "office-manager": "[send, ask_human]",
    "proxy": "[read_file]",
    "project-lead": "[send, task_create, task_list, ask_human]",
    "coding-lead": "[send, task_get, task_update]",
    "implementer": "[read_file, write_file, shell, message]",
    "reviewer": "[read_file, shell]",
}


def agent_yaml(name: str, tools: str) -> str:
    return f"name: {name}\ndescription: The {name}.\ntools: {tools}\nprompt: |\n  Be the {name}.\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dedent(text))
    return path


def write_org(root: Path) -> Path:
    """Write a valid organisation (one workgroup, six agents) under ``root``."""
    write(root / "teaparty.yaml", ORG_YAML)
    write(root / "workgroups/coding.yaml", CODING_YAML)
    for name, tools in AGENT_TOOLS.items():
        write(root / f"agents/{name}.yaml", agent_yaml(name, tools))
    return root


SOURCE = ".teaparty/project.yaml"


@pytest.fixture
def org_dir(tmp_path: Path) -> Path:
    return write_org(tmp_path / "org")


@pytest.fixture
def org(org_dir: Path) -> Organisation:
    return load_organisation(org_dir)


def org_issue(org_dir: Path, key: str) -> ConfigIssue:
    with pytest.raises(ConfigError) as caught:
        load_organisation(org_dir)
    return only(caught.value, key)


def project_issue(text: str, org: Organisation, key: str) -> ConfigIssue:
    with pytest.raises(ConfigError) as caught:
        load_project(dedent(text), org=org, source=SOURCE, default_name="widgets")
    return only(caught.value, key)


def only(error: ConfigError, key: str) -> ConfigIssue:
    """The one issue at ``key``; its rendering must name file, line and key."""
    found = [issue for issue in error.issues if issue.key == key]
    assert len(found) == 1, str(error)
    issue = found[0]
    assert f"{issue.file}:{issue.line}: {key}: " in str(error)
    return issue


def assert_at(issue: ConfigIssue, file: str, line: int, *phrases: str) -> None:
    assert issue.file.endswith(file), issue
    assert issue.line == line, issue
    for phrase in phrases:
        assert phrase in issue.message, issue
