"""Trim GitHub's OpenAPI description to the operations the local GitHub stand-in serves.

Run: python tools/trim_openapi.py [SOURCE] [DEST]

Keeps the listed operations and every `components` entry they reference transitively; drops
examples, descriptions and the per-version `x-github-breaking-changes` patches (the stand-in
checks against the base description, whatever `X-GitHub-Api-Version` asks for), and writes
compact JSON to bot/fakehub/data/github-openapi.json next to a copy of the description's licence.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

REFERENCE = Path("/work/shared/reference/github")
SOURCE = REFERENCE / "openapi" / "api.github.com.json"
LICENSE = REFERENCE / "LICENSE.octokit-openapi"
DEST = Path(__file__).resolve().parent.parent / "bot" / "fakehub" / "data" / "github-openapi.json"

OPERATIONS = frozenset(
    {
        "apps/get-authenticated",
        "apps/create-installation-access-token",
        "apps/get-repo-installation",
        "apps/list-installations",
        "apps/list-repos-accessible-to-installation",
        "apps/list-webhook-deliveries",
        "apps/redeliver-webhook-delivery",
        "repos/get",
        "users/get-authenticated",
        "repos/get-collaborator-permission-level",
        "repos/get-content",
        "repos/get-branch",
        "actions/create-workflow-dispatch",
        "actions/download-job-logs-for-workflow-run",
        "actions/re-run-job-for-workflow-run",
        "checks/list-suites-for-ref",
        "checks/list-for-ref",
        "checks/list-annotations",
        "checks/rerequest-run",
        "checks/create",
        "checks/update",
        "checks/get",
        "issues/get",
        "issues/update",
        "issues/list-for-repo",
        "issues/list-events",
        "issues/list-comments",
        "issues/create-comment",
        "issues/update-comment",
        "reactions/create-for-issue",
        "reactions/create-for-issue-comment",
        "pulls/list",
        "pulls/create",
        "pulls/update",
        "pulls/get",
        "pulls/list-reviews",
        "pulls/get-review",
        "pulls/list-review-comments",
        "pulls/list-comments-for-review",
        "pulls/create-reply-for-review-comment",
        "pulls/request-reviewers",
        "pulls/list-requested-reviewers",
    }
)
# The description inlines the items of `apps/list-installations` with `account` as allOf
# [simple-user, enterprise], which no account satisfies; the `installation` component says anyOf.
_ANY_OF_FIXES = {
    "apps/list-installations": (
        *("responses", "200", "content", "application/json", "schema"),
        *("items", "properties", "account"),
    ),
}
# Review comments whose line is no longer in the diff (outdated) have `position` and `line`
# null; the description says integer (github/rest-api-description issues #1901 and #5568).
_NULLABLE_FIXES = {
    "pull-request-review-comment": ("position", "line"),
    "review-comment": ("line",),
}
# Keywords whose values are documentation only; dropped wherever they act as keywords.
_DROPPED = frozenset({"description", "example", "examples", "x-github-breaking-changes"})
# Keys whose values map arbitrary names to sub-objects, so a child called "description" is data.
_NAME_MAPS = frozenset({"properties", "responses", "content", "headers", "mapping"})


def strip(node: Any, *, in_name_map: bool = False) -> Any:
    """Return `node` without documentation keywords (a property named `description` stays)."""
    if isinstance(node, list):
        return [strip(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {
        key: strip(value, in_name_map=key in _NAME_MAPS and not in_name_map)
        for key, value in node.items()
        if in_name_map or key not in _DROPPED
    }


def refs_in(node: Any) -> set[str]:
    """Every `$ref` string inside `node`."""
    if isinstance(node, list):
        return set().union(*(refs_in(item) for item in node)) if node else set()
    if not isinstance(node, dict):
        return set()
    found = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
    for value in node.values():
        found |= refs_in(value)
    return found


def fix(operation: dict[str, Any]) -> dict[str, Any]:
    """`operation`, with a known allOf that should be anyOf (`_ANY_OF_FIXES`) corrected."""
    if (keys := _ANY_OF_FIXES.get(operation["operationId"])) is None:
        return operation
    node: Any = operation
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict) and "allOf" in node:
        node["anyOf"] = node.pop("allOf")
    return operation


def nullable(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """`schema`, with the properties `_NULLABLE_FIXES` names for it marked nullable."""
    for key in _NULLABLE_FIXES.get(name, ()):
        schema["properties"][key]["nullable"] = True
    return schema


def trim(spec: dict[str, Any], *, source_name: str) -> dict[str, Any]:
    """Build the trimmed description from the full one."""
    paths: dict[str, dict[str, Any]] = {}
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            if isinstance(operation, dict) and operation.get("operationId") in OPERATIONS:
                paths.setdefault(path, {})[method] = fix(strip(operation))
    found = {op["operationId"] for item in paths.values() for op in item.values()}
    if missing := OPERATIONS - found:
        raise SystemExit(f"operations not in {source_name}: {sorted(missing)}")
    components: dict[str, dict[str, Any]] = {}
    pending = refs_in(paths)
    seen: set[str] = set()
    while pending:
        ref = pending.pop()
        seen.add(ref)
        _, _, section, name = ref.split("/", 3)
        entry = nullable(name, strip(spec["components"][section][name]))
        components.setdefault(section, {})[name] = entry
        pending |= refs_in(entry) - seen
    return {
        "openapi": spec["openapi"],
        "info": {"title": spec["info"]["title"], "version": spec["info"]["version"]},
        "x-trimmed-from": f"{source_name} (@octokit/openapi {spec['info']['version']}, MIT)",
        "paths": paths,
        "components": {name: dict(sorted(v.items())) for name, v in sorted(components.items())},
    }


def main(argv: list[str]) -> int:
    """Read the full description, write the trimmed one and copy the licence."""
    source = Path(argv[1]) if len(argv) > 1 else SOURCE
    dest = Path(argv[2]) if len(argv) > 2 else DEST
    spec = json.loads(source.read_text(encoding="utf-8"))
    trimmed = trim(spec, source_name="octokit/openapi generated/api.github.com.json")
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(trimmed, separators=(",", ":"), sort_keys=False), encoding="utf-8")
    shutil.copyfile(LICENSE, dest.parent / "LICENSE.octokit-openapi")
    sys.stderr.write(f"wrote {dest} ({dest.stat().st_size} bytes)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
