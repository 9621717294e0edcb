"""Where runner mode's workflow files live, and how the tests read them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
REUSABLE = ROOT / ".github" / "workflows" / "teaparty.yml"
COMPOSITE = ROOT / ".github" / "actions" / "teaparty" / "action.yml"
CALLER = ROOT / "docs" / "runner" / "teaparty-caller.yml"
COMPOSITE_CALLER = ROOT / "docs" / "runner" / "teaparty-composite-python.yml"
WORKFLOWS = (*sorted((ROOT / ".github" / "workflows").glob("*.y*ml")), CALLER, COMPOSITE_CALLER)
TEAPARTY_STEP = "teaparty"  # the id of the step that runs `teaparty action`


def load(path: Path) -> dict[str, Any]:
    """A workflow or action file as data, its `on:` key kept a string.

    PyYAML reads YAML 1.1, where a bare `on` is the boolean true; GitHub reads it as `on`.
    """
    data: dict[Any, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    if True in data:
        data["on"] = data.pop(True)
    return data


def step(steps: list[dict[str, Any]], step_id: str) -> dict[str, Any]:
    """The step of `steps` with this id."""
    (found,) = [each for each in steps if each.get("id") == step_id]
    return found
