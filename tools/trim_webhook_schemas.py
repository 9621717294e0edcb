"""Trim octokit's bundled webhook JSON Schema to the deliveries the local GitHub stand-in sends
(and those the tests make from real payloads: an uninstall, a label removed).

Run: python tools/trim_webhook_schemas.py [SOURCE] [DEST]

SOURCE is `schema.json` of the npm package @octokit/webhooks-schemas (MIT), by default the copy
under /work/shared/reference/github/schemas/. Keeps the `<event>$<action>` definitions in
EVENTS and every definition they reference, and writes tests/schemas/octokit-webhooks.json
next to a copy of the licence, for the webhook tests to validate deliveries against.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

REFERENCE = Path("/work/shared/reference/github")
SOURCE = REFERENCE / "schemas" / "octokit-webhooks-schemas-7.6.1.schema.json"
LICENSE = REFERENCE / "LICENSE.octokit-webhooks"
DEST = Path(__file__).resolve().parent.parent / "tests" / "schemas" / "octokit-webhooks.json"
EVENTS = (
    "installation$deleted",
    "installation_repositories$removed",
    "issues$closed",
    "issues$edited",
    "issues$labeled",
    "issues$unlabeled",
    "issue_comment$created",
    "pull_request$closed",
    "pull_request$converted_to_draft",
    "pull_request$ready_for_review",
    "pull_request$reopened",
    "pull_request$synchronize",
    "pull_request_review$submitted",
    "pull_request_review_comment$created",
    "check_suite$completed",
    "workflow_run$completed",
)


def refs_in(node: Any) -> set[str]:
    """The definition names `node` refers to (`#/definitions/<name>`)."""
    if isinstance(node, list):
        return set().union(*(refs_in(item) for item in node)) if node else set()
    if not isinstance(node, dict):
        return set()
    ref = node.get("$ref")
    found = {ref.removeprefix("#/definitions/")} if isinstance(ref, str) else set()
    for value in node.values():
        found |= refs_in(value)
    return found


def trim(bundle: dict[str, Any]) -> dict[str, Any]:
    """The bundle with only EVENTS and what they reference."""
    definitions = bundle["definitions"]
    kept: dict[str, Any] = {}
    pending = set(EVENTS)
    while pending:
        name = pending.pop()
        kept[name] = definitions[name]
        pending |= refs_in(definitions[name]) - set(kept)
    return {
        "$schema": bundle.get("$schema", "http://json-schema.org/draft-07/schema#"),
        "definitions": dict(sorted(kept.items())),
    }


def main(argv: list[str]) -> int:
    """Read the bundle, write the trimmed one and copy the licence."""
    source = Path(argv[1]) if len(argv) > 1 else SOURCE
    dest = Path(argv[2]) if len(argv) > 2 else DEST
    trimmed = trim(json.loads(source.read_text(encoding="utf-8")))
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(trimmed, separators=(",", ":")), encoding="utf-8")
    shutil.copyfile(LICENSE, dest.parent / "LICENSE.octokit-webhooks")
    sys.stderr.write(f"wrote {dest} ({dest.stat().st_size} bytes)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
