"""`POST /graphql` of the local GitHub stand-in: the App's known documents and nothing else.

A document is recognised by its tokens (whitespace, commas and comments do not matter) among
bot.github.graphql_queries.DOCUMENTS; any other document, or variables that do not fit the
declared types, is answered as GitHub answers a query it cannot run (status 200, an `errors`
list) and recorded as a violation. GitHub quirks kept: errors carry `type` and `path` with
`data` null where the field failed; a bot's login has no `[bot]`; `fullDatabaseId` is a
string; each call costs points of the separate `graphql` rate limit: the requests its
connections could need, divided by 100 and rounded, at least 1.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bot.fakehub import webhooks
from bot.fakehub.anchors import Anchor, anchors
from bot.fakehub.pulls import full_pull_json, refresh
from bot.fakehub.review_actions import announce, reply
from bot.fakehub.review_shapes import thread_id_of, thread_node_id
from bot.fakehub.review_state import ReviewComment, ReviewThread
from bot.fakehub.routes import grants, sees
from bot.fakehub.shapes import Json, Urls, node_id, timestamp
from bot.fakehub.state import HubError, HubIssue, HubRepo, HubState, Token
from bot.fakehub.webhooks import Outgoing
from bot.github.graphql_queries import DOCUMENTS, PAGE_SIZE, Document

PATH = "/graphql"
DOCS = "https://docs.github.com/graphql"
_TOKEN = re.compile(
    r'(?P<skip>#[^\n\r]*|[\s,\ufeff]+)|(?P<token>"(?:[^"\\\n]|\\.)*"|\.\.\.|[_A-Za-z]\w*'
    r"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|.)"
)
_FORBIDDEN = "Resource not accessible by integration"


def tokens(text: str) -> list[tuple[str, int, int]]:
    """The document's lexical tokens with their line and column (ignored tokens dropped)."""
    found: list[tuple[str, int, int]] = []
    line, line_start = 1, 0
    for match in _TOKEN.finditer(text):
        if match["token"] is not None:
            found.append((match["token"], line, match.start() - line_start + 1))
        for newline in re.finditer(r"\r\n|\n|\r", match.group()):
            line, line_start = line + 1, match.start() + newline.end()
    return found


def declared(document: Document) -> list[tuple[str, str]]:
    """The variables an operation declares, with their types (`String!`, `[ID!]`)."""
    words = [t for t, _, _ in tokens(document.text)]
    header = words[: words.index("{")]
    found: list[tuple[str, str]] = []
    for index, word in enumerate(header):
        if word == "$" and header[index + 2] == ":":
            kind = []
            for part in header[index + 3 :]:
                if part in ("$", ")", "="):
                    break
                kind.append(part)
            found.append((header[index + 1], "".join(kind)))
    return found


_KNOWN = {tuple(t for t, _, _ in tokens(d.text)): d for d in DOCUMENTS}
_VARIABLES = {d.name: declared(d) for d in DOCUMENTS}


def _cost(requests: int) -> int:
    return max(1, round(requests / 100))


_COSTS = {
    "ReviewThreads": _cost(1 + PAGE_SIZE),  # the threads, and up to 100 threads' comments
    "ThreadComments": _cost(1),
    "AddThreadReply": 1,
    "MarkReady": 1,
}


@dataclass
class Answer:
    """What the hub sends back (always status 200) and records about one GraphQL call."""

    body: Json
    operation: str | None = None
    cost: int = 1
    violation: str | None = None
    deliveries: list[Outgoing] = field(default_factory=list)


@dataclass(frozen=True)
class _Context:
    state: HubState
    token: Token
    urls: Urls
    variables: dict[str, Any]


Result = tuple[Json, list[Json], list[Outgoing]]


async def answer(state: HubState, token: Token, request: Any, urls: Urls) -> Answer:
    """Run one `POST /graphql` body (decoded JSON) for an installation token."""
    query = request.get("query") if isinstance(request, dict) else None
    if not isinstance(query, str):
        message = "A query attribute must be specified and must be a string."
        return Answer({"errors": [{"message": message}]}, violation=f"graphql: {message}")
    document = _KNOWN.get(tuple(t for t, _, _ in tokens(query)))
    if document is None:
        message = _unknown(query)
        return Answer({"errors": [{"message": message}]}, violation=f"graphql: {message}")
    variables = request.get("variables") or {}
    if problems := _bad_variables(document, variables):
        errors = [{"message": problem} for problem in problems]
        violation = f"graphql {document.name}: " + "; ".join(problems)
        return Answer({"errors": errors}, document.name, violation=violation)
    context = _Context(state, token, urls, variables)
    data, errors, deliveries = await _RESOLVERS[document.name](context)
    body: Json = {"data": data} | ({"errors": errors} if errors else {})
    return Answer(body, document.name, _COSTS[document.name], deliveries=deliveries)


def _unknown(query: str) -> str:
    given = tokens(query)

    def shared(document: Document) -> int:
        known = tokens(document.text)
        return next(
            (i for i, (a, b) in enumerate(zip(known, given, strict=False)) if a[0] != b[0]),
            min(len(known), len(given)),
        )

    closest = max(DOCUMENTS, key=shared)
    index = shared(closest)
    where = (
        f"line {given[index][1]}, column {given[index][2]} ({given[index][0]!r})"
        if index < len(given)
        else "its end"
    )
    return (
        "The stand-in serves only the documents of bot/github/graphql_queries.py; this one"
        f" departs from {closest.name} at {where}."
    )


def _bad_variables(document: Document, given: Any) -> list[str]:
    if not isinstance(given, dict):
        return ["Variables must be an object."]
    return [
        f"Variable ${name} of type {kind} was provided invalid value"
        for name, kind in _VARIABLES[document.name]
        if not _fits(kind, given.get(name))
    ]


def _fits(kind: str, value: object) -> bool:
    if value is None:
        return not kind.endswith("!")
    base = kind.rstrip("!")
    if base == "Int":
        return type(value) is int and -(2**31) <= value < 2**31
    if base == "ID":
        return isinstance(value, str) or type(value) is int
    return base == "String" and isinstance(value, str)


def _error(kind: str, path: list[str], message: str) -> Json:
    return {"type": kind, "path": path, "message": message}


def _cursor(offset: int) -> str:
    return base64.b64encode(f"cursor:v2:{offset}".encode()).decode()


def _offset(cursor: object) -> int | None:
    """Where a page after `cursor` starts (0 without one); None for a cursor GitHub refuses."""
    if cursor is None:
        return 0
    try:
        kind, _, offset = base64.b64decode(str(cursor), validate=True).decode().rpartition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return int(offset) if kind == "cursor:v2" and offset.isdigit() else None


def _connection(items: list[Json], start: int) -> Json:
    chunk = items[start : start + PAGE_SIZE]
    return {
        "pageInfo": {
            "hasNextPage": start + PAGE_SIZE < len(items),
            "endCursor": _cursor(start + len(chunk)) if chunk else None,
        },
        "nodes": chunk,
    }


def _comment_json(state: HubState, comment: ReviewComment, *, with_id: bool = False) -> Json:
    user = state.user(comment.author)
    is_bot = user.kind == "Bot"
    login = user.login.removesuffix("[bot]") if is_bot else user.login
    reply_to = comment.in_reply_to
    body: Json = {"id": node_id("PullRequestReviewComment", comment.comment_id)} if with_id else {}
    return body | {
        "fullDatabaseId": str(comment.comment_id),
        "author": {"__typename": "Bot" if is_bot else "User", "login": login},
        "body": comment.body,
        "createdAt": timestamp(comment.created_at),
        "diffHunk": comment.diff_hunk,
        "replyTo": None if reply_to is None else {"fullDatabaseId": str(reply_to)},
    }


def _comments(state: HubState, issue: HubIssue, thread: ReviewThread) -> list[Json]:
    assert issue.pull is not None
    found = issue.pull.reviews.comments
    return [_comment_json(state, found[comment_id]) for comment_id in thread.comment_ids]


def _thread_json(state: HubState, issue: HubIssue, thread: ReviewThread, where: Anchor) -> Json:
    assert issue.pull is not None
    root = issue.pull.reviews.comments[thread.root_id]
    return {
        "id": thread_node_id(thread.thread_id),
        "isResolved": thread.resolved,
        "isOutdated": where.outdated,
        "path": thread.path,
        "line": where.line,
        "originalLine": root.original_line,
        "comments": _connection(_comments(state, issue, thread), 0),
    }


async def _review_threads(context: _Context) -> Result:
    state, token, given = context.state, context.token, context.variables
    owner, name, number = given["owner"], given["name"], given["number"]
    try:
        repo = state.repo(owner, name)
    except HubError:
        repo = None
    if repo is None or not sees(token, repo):
        message = f"Could not resolve to a Repository with the name '{owner}/{name}'."
        return {"repository": None}, [_error("NOT_FOUND", ["repository"], message)], []
    path = ["repository", "pullRequest"]
    if not grants(token.permissions.get("pull_requests"), "read"):
        return {"repository": {"pullRequest": None}}, [_error("FORBIDDEN", path, _FORBIDDEN)], []
    issue = repo.issues.get(number)
    if issue is None or issue.pull is None:
        message = f"Could not resolve to a PullRequest with the number of {number}."
        return {"repository": {"pullRequest": None}}, [_error("NOT_FOUND", path, message)], []
    if (start := _offset(given.get("after"))) is None:
        return _bad_cursor({"repository": {"pullRequest": None}}, path, given["after"])
    await refresh(repo, issue)
    where = await anchors(state, repo, issue.pull)
    with state.lock:
        threads = [
            _thread_json(state, issue, t, where[t.thread_id]) for t in issue.pull.reviews.threads
        ]
    connection = _connection(threads, start)
    return {"repository": {"pullRequest": {"reviewThreads": connection}}}, [], []


def _bad_cursor(data: Json, path: list[str], cursor: object) -> Result:
    message = f"`{cursor}` does not appear to be a valid cursor."
    return data, [_error("INVALID_CURSOR_ARGUMENTS", path, message)], []


def _find_thread(
    state: HubState, token: Token, node: object
) -> tuple[HubRepo, HubIssue, ReviewThread] | None:
    thread_id = thread_id_of(node) if isinstance(node, str) else None
    if thread_id is None:
        return None
    with state.lock:
        for repo in state.installation_repos(token.installation_id):
            for issue in repo.issues.values() if sees(token, repo) else ():
                if issue.pull and (thread := issue.pull.reviews.thread(thread_id)):
                    return repo, issue, thread
    return None


async def _thread_comments(context: _Context) -> Result:
    state, given = context.state, context.variables
    found = _find_thread(state, context.token, given["thread"])
    if found is None:
        message = f"Could not resolve to a node with the global id of '{given['thread']}'."
        return {"node": None}, [_error("NOT_FOUND", ["node"], message)], []
    if not grants(context.token.permissions.get("pull_requests"), "read"):
        return {"node": None}, [_error("FORBIDDEN", ["node"], _FORBIDDEN)], []
    if (start := _offset(given.get("after"))) is None:
        return _bad_cursor({"node": None}, ["node", "comments"], given["after"])
    _, issue, thread = found
    with state.lock:
        comments = _comments(state, issue, thread)
    node = {"__typename": "PullRequestReviewThread", "comments": _connection(comments, start)}
    return {"node": node}, [], []


async def _add_thread_reply(context: _Context) -> Result:
    state, given = context.state, context.variables
    field_name = "addPullRequestReviewThreadReply"
    found = _find_thread(state, context.token, given["thread"])
    if found is None:
        message = f"Could not resolve to a node with the global id of '{given['thread']}'."
        return {field_name: None}, [_error("NOT_FOUND", [field_name], message)], []
    if not grants(context.token.permissions.get("pull_requests"), "write"):
        return {field_name: None}, [_error("FORBIDDEN", [field_name], _FORBIDDEN)], []
    repo, issue, thread = found
    review, comment, where = await reply(
        state, repo, issue, author=state.bot.login, to=thread.root_id, body=given["body"]
    )
    deliveries = announce(state, repo, issue, review, [(comment, where)], context.urls)
    with state.lock:
        made = _comment_json(state, comment, with_id=True)
    return {field_name: {"comment": made}}, [], deliveries


async def _mark_ready(context: _Context) -> Result:
    """markPullRequestReadyForReview: a draft becomes ready (`pull_request.ready_for_review`,
    by the App's account); one that is ready already is left as it is."""
    state, given = context.state, context.variables
    field_name = "markPullRequestReadyForReview"
    found = _find_pull(state, context.token, given["pull"])
    if found is None:
        message = f"Could not resolve to a node with the global id of '{given['pull']}'."
        return {field_name: None}, [_error("NOT_FOUND", [field_name], message)], []
    if not grants(context.token.permissions.get("pull_requests"), "write"):
        return {field_name: None}, [_error("FORBIDDEN", [field_name], _FORBIDDEN)], []
    repo, issue = found
    assert issue.pull is not None
    with state.lock:
        changed = issue.pull.draft
        if changed:
            issue.pull.draft, issue.updated_at = False, state.clock()
    deliveries: list[Outgoing] = []
    if changed:
        pull = await full_pull_json(state, repo, issue, context.urls)
        payload = webhooks.pull_request_event(
            state,
            repo,
            issue,
            pull,
            context.urls,
            action="ready_for_review",
            sender=state.bot.login,
        )
        deliveries.append(("pull_request", payload))
    made = {"id": given["pull"], "isDraft": False}
    return {field_name: {"pullRequest": made}}, [], deliveries


def _find_pull(state: HubState, token: Token, node: object) -> tuple[HubRepo, HubIssue] | None:
    with state.lock:
        for repo in state.installation_repos(token.installation_id):
            for issue in repo.issues.values() if sees(token, repo) else ():
                if issue.pull and node == node_id("PullRequest", issue.pull_id):
                    return repo, issue
    return None


_RESOLVERS: dict[str, Callable[[_Context], Awaitable[Result]]] = {
    "ReviewThreads": _review_threads,
    "ThreadComments": _thread_comments,
    "AddThreadReply": _add_thread_reply,
    "MarkReady": _mark_ready,
}
