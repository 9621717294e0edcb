"""Webhook payloads checked against octokit's JSON Schema (tests/schemas/octokit-webhooks.json).

The schemas date from 2024 and close every object (`additionalProperties: false`); GitHub has
since added fields (`user_view_type`, `custom_properties`, ...) that the stand-in sends as GitHub
does, so the check ignores unknown properties and holds every required one and every type.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator  # type: ignore[import-untyped]

SCHEMAS = Path(__file__).parent / "schemas"


def _open(node: Any) -> Any:
    if isinstance(node, list):
        return [_open(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {
        k: _open(v) for k, v in node.items() if not (k == "additionalProperties" and v is False)
    }


@cache
def _definitions() -> dict[str, Any]:
    bundle = json.loads((SCHEMAS / "octokit-webhooks.json").read_text(encoding="utf-8"))
    opened: dict[str, Any] = _open(bundle["definitions"])
    return opened


def webhook_errors(event: str, payload: dict[str, Any]) -> list[str]:
    """How a delivery's payload departs from the schema of `event.<its action>` (none: [])."""
    definitions = _definitions()
    name = f"{event}${payload.get('action')}"
    assert name in definitions, f"no schema for {name}"
    validator = Draft7Validator({"$ref": f"#/definitions/{name}", "definitions": definitions})
    return sorted(
        f"{'.'.join(str(p) for p in error.absolute_path) or '(root)'}: {error.message}"
        for error in validator.iter_errors(payload)
    )
