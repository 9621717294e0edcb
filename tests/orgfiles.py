"""A small organisation on disk for configuration tests, each of which breaks it in one place."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

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
