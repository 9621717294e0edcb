"""Trim GitHub's public GraphQL schema to the types and fields the App's documents use.

Run: python tools/trim_graphql_schema.py SOURCE [DEST]

SOURCE is `schema.graphql` of octokit/graphql-schema (GitHub's schema as published, MIT).
Keeps the fields listed in KEEP with all their arguments and directives (a deprecated field
stays marked deprecated), the interfaces among them, every input object and scalar they
need; drops descriptions. Writes tests/schemas/github-graphql.graphql next to a copy of the
licence, which tests/test_graphql_documents.py checks bot/github/graphql_queries.py against.
Needs graphql-core (a test dependency).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from graphql import assert_valid_schema, build_ast_schema, parse, print_ast
from graphql.language import (
    DefinitionNode,
    DocumentNode,
    EnumTypeDefinitionNode,
    InputObjectTypeDefinitionNode,
    InterfaceTypeDefinitionNode,
    NamedTypeNode,
    ObjectTypeDefinitionNode,
    ScalarTypeDefinitionNode,
    TypeDefinitionNode,
    TypeNode,
)

DEST = Path(__file__).resolve().parent.parent / "tests" / "schemas" / "github-graphql.graphql"
# Object and interface types, and the fields of each that the documents (may) select.
KEEP: dict[str, tuple[str, ...]] = {
    "Query": ("id", "node", "repository"),
    "Mutation": ("addPullRequestReviewThreadReply", "markPullRequestReadyForReview"),
    "Node": ("id",),
    "Actor": ("login",),
    "Bot": ("id", "login"),
    "User": ("id", "login"),
    "Repository": ("id", "pullRequest"),
    "PullRequest": ("id", "isDraft", "number", "reviewThreads"),
    "PullRequestReviewThreadConnection": ("nodes", "pageInfo", "totalCount"),
    "PullRequestReviewThread": (
        *("id", "isResolved", "isOutdated", "isCollapsed", "path", "line", "originalLine"),
        "comments",
    ),
    "PullRequestReviewCommentConnection": ("nodes", "pageInfo", "totalCount"),
    "PullRequestReviewComment": (
        *("id", "databaseId", "fullDatabaseId", "author", "body", "createdAt", "diffHunk"),
        *("line", "originalLine", "outdated", "path", "replyTo"),
    ),
    "PageInfo": ("endCursor", "hasNextPage", "hasPreviousPage", "startCursor"),
    "AddPullRequestReviewThreadReplyPayload": ("clientMutationId", "comment"),
    "MarkPullRequestReadyForReviewPayload": ("clientMutationId", "pullRequest"),
}
INPUTS = ("AddPullRequestReviewThreadReplyInput", "MarkPullRequestReadyForReviewInput")
BUILT_IN = frozenset({"String", "Int", "Float", "Boolean", "ID"})


def _named(node: TypeNode) -> str:
    while not isinstance(node, NamedTypeNode):
        node = node.type  # type: ignore[attr-defined]  # list or non-null wrapper
    return node.name.value


def _with(node: Any, **changes: Any) -> Any:
    """A copy of AST `node` with `changes` (nodes are frozen in graphql-core 3.3)."""
    return type(node)(**{key: getattr(node, key) for key in node.keys} | changes)


def _undescribed(node: Any) -> Any:
    """`node`, its fields and their arguments without descriptions."""
    changes: dict[str, Any] = {"description": None}
    for key in ("fields", "arguments"):
        if getattr(node, key, None):
            changes[key] = tuple(_undescribed(child) for child in getattr(node, key))
    return _with(node, **changes)


def _kept(definition: DefinitionNode) -> Any:
    if not isinstance(definition, TypeDefinitionNode):
        return None
    name = definition.name.value
    if isinstance(definition, ObjectTypeDefinitionNode | InterfaceTypeDefinitionNode):
        if name not in KEEP:
            return None
        fields = tuple(f for f in definition.fields or () if f.name.value in KEEP[name])
        interfaces = tuple(i for i in definition.interfaces or () if i.name.value in KEEP)
        return _undescribed(_with(definition, fields=fields, interfaces=interfaces))
    if isinstance(definition, InputObjectTypeDefinitionNode) and name in INPUTS:
        return _undescribed(definition)
    leaf = isinstance(definition, ScalarTypeDefinitionNode | EnumTypeDefinitionNode)
    return _with(definition, description=None) if leaf else None


def _used(definitions: list[DefinitionNode]) -> set[str]:
    """The named types the kept fields, arguments and input fields refer to."""
    found: set[str] = set()
    for definition in definitions:
        for field in getattr(definition, "fields", None) or ():
            found.add(_named(field.type))
            found |= {_named(arg.type) for arg in getattr(field, "arguments", None) or ()}
    return found


def trim(text: str) -> str:
    """The trimmed schema as SDL, checked to build."""
    kept = [d for d in (_kept(d) for d in parse(text, no_location=True).definitions) if d]
    types = [
        d for d in kept if not isinstance(d, ScalarTypeDefinitionNode | EnumTypeDefinitionNode)
    ]
    used = _used(types)
    leaves = [d for d in kept if d not in types and d.name.value in used - BUILT_IN]
    document = DocumentNode(definitions=tuple(_ordered([*types, *leaves])))
    assert_valid_schema(build_ast_schema(document))
    return print_ast(document) + "\n"


def _ordered(definitions: list[DefinitionNode]) -> Iterator[DefinitionNode]:
    yield from sorted(definitions, key=lambda d: d.name.value)  # type: ignore[attr-defined]


def main(argv: list[str]) -> int:
    """Read the full schema, write the trimmed one and copy the licence."""
    source = Path(argv[1])
    dest = Path(argv[2]) if len(argv) > 2 else DEST
    header = (
        "# GitHub's public GraphQL schema, trimmed by tools/trim_graphql_schema.py from\n"
        "# octokit/graphql-schema schema.graphql (MIT, see LICENSE.octokit-graphql-schema).\n"
    )
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(header + trim(source.read_text(encoding="utf-8")), encoding="utf-8")
    licence = source.parent / "LICENSE.md"
    if licence.exists():
        (dest.parent / "LICENSE.octokit-graphql-schema").write_text(licence.read_text())
    sys.stderr.write(f"wrote {dest} ({dest.stat().st_size} bytes)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
