"""The App's GraphQL documents against GitHub's public schema (tests/schemas/), and the tool
that trimmed that schema."""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from graphql import GraphQLObjectType, GraphQLSchema, build_schema, parse, validate
from graphql.validation import NoDeprecatedCustomRule, specified_rules

from bot.github.graphql_queries import DOCUMENTS, Document

SCHEMA = Path(__file__).parent / "schemas" / "github-graphql.graphql"


@cache
def github_schema() -> GraphQLSchema:
    return build_schema(SCHEMA.read_text(encoding="utf-8"))


def problems(text: str) -> list[str]:
    """What GitHub's schema says is wrong with a document, deprecated fields included."""
    rules = [*specified_rules, NoDeprecatedCustomRule]
    return [error.message for error in validate(github_schema(), parse(text), rules)]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: d.name)
def test_each_document_is_valid_against_githubs_schema(document: Document) -> None:
    assert problems(document.text) == []
    assert parse(document.text).definitions[0].name.value == document.name  # type: ignore[attr-defined]


def test_the_check_catches_a_wrong_field_type_or_a_deprecated_field() -> None:
    assert problems('query { repository(owner: 1, name: "x") { id } }') == [
        "String cannot represent a non string value: 1"
    ]
    assert problems('query { repository(owner: "o", name: "r") { issues { id } } }') == [
        "Cannot query field 'issues' on type 'Repository'."
    ]
    deprecated = problems(
        'query { repository(owner: "o", name: "r") { pullRequest(number: 1) {'
        " reviewThreads(first: 1) { nodes { comments(first: 1) { nodes { databaseId } } } } } } }"
    )
    assert deprecated == [
        "The field PullRequestReviewComment.databaseId is deprecated. `databaseId` will be"
        " removed because it does not support 64-bit signed integer identifiers. Use"
        " `fullDatabaseId` instead. Removal on 2024-07-01 UTC."
    ]


def fields(schema: GraphQLSchema, name: str) -> list[str]:
    named = schema.type_map[name]
    assert isinstance(named, GraphQLObjectType)
    return list(named.fields)


def _trim_tool() -> Any:
    loader = importlib.util.spec_from_file_location(
        "trim_graphql_schema", Path(__file__).parent.parent / "tools" / "trim_graphql_schema.py"
    )
    assert loader
    assert loader.loader
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module


def test_the_trim_keeps_listed_fields_and_what_they_need() -> None:
    full = '''
    """The root"""
    type Query implements Node { id: ID! node(id: ID!): Node repository(name: String!): Repository
      viewer: User! }
    interface Node { id: ID! }
    interface Actor { login: String! }
    type User implements Actor & Node { id: ID! login: String! email: String! }
    type Bot implements Actor & Node { id: ID! login: String! }
    type Repository implements Node { id: ID! """doc""" pullRequest(number: Int!): PullRequest
      stars: Int! }
    type PullRequest implements Node { id: ID! number: Int! created: DateTime! }
    type Mutation { addPullRequestReviewThreadReply(input: AddPullRequestReviewThreadReplyInput!):
      AddPullRequestReviewThreadReplyPayload deleteEverything: Boolean }
    input AddPullRequestReviewThreadReplyInput { body: String! pullRequestReviewThreadId: ID! }
    type AddPullRequestReviewThreadReplyPayload { clientMutationId: String }
    scalar DateTime
    scalar Unused
    '''
    trimmed = _trim_tool().trim(full)
    schema = build_schema(trimmed)
    query = schema.query_type
    assert query is not None
    assert set(query.fields) == {"id", "node", "repository"}
    assert set(fields(schema, "Repository")) == {"id", "pullRequest"}
    assert set(fields(schema, "User")) == {"id", "login"}
    assert "Unused" not in schema.type_map
    assert '"""' not in trimmed
