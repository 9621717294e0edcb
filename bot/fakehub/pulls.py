"""Pull-request operations of the local GitHub stand-in, checked against the bare repo's branches.

GitHub's quirks kept here: one open pull request per head and base (422 "A pull request
already exists"), 422 for a head branch that does not exist or has no new commits, and a
`head` filter on `pulls/list` that is ignored unless it has the `owner:branch` form.
"""

from __future__ import annotations

from typing import Any

from bot.fakehub import git, webhooks
from bot.fakehub.routes import Call, Reply, Routes, paginate, path_number, repo_for
from bot.fakehub.shapes import Json, Urls, pull_json
from bot.fakehub.state import HubIssue, HubRepo, HubState, PullInfo, not_found, validation_failed

PULL_ROUTES = Routes()
_SIMPLE_SORTS = {"created": "created_at", "updated": "updated_at"}


def _invalid(field_name: str) -> dict[str, Any]:
    return {"resource": "PullRequest", "field": field_name, "code": "invalid"}


def _custom(message: str) -> dict[str, Any]:
    return {"resource": "PullRequest", "code": "custom", "message": message}


def pull_issue(state: HubState, repo: HubRepo, number: int) -> HubIssue:
    """Pull request `number` (its issue half), or 404 for an issue or nothing."""
    issue = state.issue(repo, number)
    if issue.pull is None:
        raise not_found()
    return issue


def _duplicate(repo: HubRepo, pull: PullInfo, *, ignore: int = 0) -> None:
    for other in repo.issues.values():
        same = other.pull and (other.pull.head_ref, other.pull.base_ref) == (
            pull.head_ref,
            pull.base_ref,
        )
        if same and other.state == "open" and other.number != ignore:
            message = f"A pull request already exists for {pull.head_owner}:{pull.head_ref}."
            raise validation_failed(_custom(message))


async def refresh(repo: HubRepo, issue: HubIssue) -> git.DiffStats:
    """Follow the branches of an open pull request (they move when anyone pushes; a closed
    one keeps the commits it was closed at) and count the changes."""
    assert issue.pull is not None
    pull = issue.pull
    if issue.state == "open":
        pull.head_sha = await git.branch_sha(repo.path, pull.head_ref) or pull.head_sha
        pull.base_sha = await git.branch_sha(repo.path, pull.base_ref) or pull.base_sha
    return await git.diff_stats(repo.path, pull.base_sha, pull.head_sha)


async def full_pull_json(state: HubState, repo: HubRepo, issue: HubIssue, urls: Urls) -> Json:
    """The `pull-request` GitHub answers `pulls/get` with, after following the branches."""
    stats = await refresh(repo, issue)
    with state.lock:
        return pull_json(state, repo, issue, urls, stats=stats)


async def _full(state: HubState, repo: HubRepo, issue: HubIssue, call: Call) -> Json:
    return await full_pull_json(state, repo, issue, call.urls)


@PULL_ROUTES.on("pulls/list", needs=("pull_requests",))
async def list_pulls(state: HubState, call: Call) -> Reply:
    """GET /repos/{owner}/{repo}/pulls with `state`, `head`, `base`, `sort` and `direction`."""
    repo = repo_for(state, call)
    wanted_state = call.query.get("state", "open")
    head = call.query.get("head", "")
    owner, _, branch = head.partition(":")
    with state.lock:
        pulls = [i for i in repo.issues.values() if i.pull is not None]
    pulls = [
        issue
        for issue in pulls
        if wanted_state in ("all", issue.state)
        and (not branch or (issue.pull and (owner.lower(), branch) == _head_key(issue.pull)))
        and (
            not call.query.get("base") or (issue.pull and issue.pull.base_ref == call.query["base"])
        )
    ]
    key = _SIMPLE_SORTS.get(call.query.get("sort", "created"), "created_at")
    default_direction = "desc" if key == "created_at" else "asc"
    pulls.sort(key=lambda i: (getattr(i, key), i.number))
    if call.query.get("direction", default_direction) == "desc":
        pulls.reverse()
    for issue in pulls:
        await refresh(repo, issue)
    with state.lock:
        items = [pull_json(state, repo, issue, call.urls, stats=None) for issue in pulls]
    page, headers = paginate(items, call, f"repos/{repo.full_name}/pulls")
    return Reply(200, page, headers)


def _head_key(pull: PullInfo) -> tuple[str, str]:
    return pull.head_owner.lower(), pull.head_ref


@PULL_ROUTES.on("pulls/get", needs=("pull_requests",))
async def get_pull(state: HubState, call: Call) -> Reply:
    """GET /repos/{owner}/{repo}/pulls/{pull_number}."""
    repo = repo_for(state, call)
    issue = pull_issue(state, repo, path_number(call, "pull_number"))
    return Reply(200, await _full(state, repo, issue, call))


@PULL_ROUTES.on("pulls/create", needs=("pull_requests",), level="write")
async def create_pull(state: HubState, call: Call) -> Reply:
    """POST /repos/{owner}/{repo}/pulls."""
    repo = repo_for(state, call)
    body = call.body
    if body.get("title") is None and body.get("issue") is None:
        raise validation_failed(
            {"resource": "PullRequest", "field": "title", "code": "missing_field"}
        )
    issue = await open_pull(state, repo, body, author=state.bot.login)
    reply = await _full(state, repo, issue, call)
    return Reply(201, reply, {"Location": reply["url"]})


async def open_pull(state: HubState, repo: HubRepo, body: Json, *, author: str) -> HubIssue:
    """Open a pull request as `author` (the App's bot user, or a person), as GitHub checks it."""
    pull = await _new_pull(repo, body)
    with state.lock:
        _duplicate(repo, pull)
    if (await git.diff_stats(repo.path, pull.base_sha, pull.head_sha)).commits == 0:
        raise validation_failed(_custom(f"No commits between {pull.base_ref} and {pull.head_ref}"))
    with state.lock:
        _duplicate(repo, pull)  # again: another request may have won while git ran
        issue = _issue_for(state, repo, body, author=author)
        issue.pull, issue.pull_id = pull, state.next_id()
    return issue


async def _new_pull(repo: HubRepo, body: Json) -> PullInfo:
    """The branches of a new pull request, or 422 when either is not in the repository."""
    head_owner, _, head_ref = body["head"].rpartition(":")
    if (head_owner or repo.owner).lower() != repo.owner.lower():
        raise validation_failed(_invalid("head"))  # forks are not imitated
    if (head_sha := await git.branch_sha(repo.path, head_ref)) is None:
        raise validation_failed(_invalid("head"))
    if (base_sha := await git.branch_sha(repo.path, body["base"])) is None:
        raise validation_failed(_invalid("base"))
    return PullInfo(
        head_owner=repo.owner,
        head_ref=head_ref,
        base_ref=body["base"],
        head_sha=head_sha,
        base_sha=base_sha,
        draft=bool(body.get("draft", False)),
        maintainer_can_modify=bool(body.get("maintainer_can_modify", False)),
    )


def _issue_for(state: HubState, repo: HubRepo, body: Json, *, author: str) -> HubIssue:
    if body.get("issue") is None:
        issue = state.open_issue(repo, title=body["title"], body=body.get("body"), author=author)
        issue.via_app = issue.author == state.bot.login
        return issue
    issue = state.issue(repo, body["issue"])
    if issue.pull is not None:
        raise validation_failed(_custom(f"Issue #{issue.number} is already a pull request"))
    return issue


async def _reopenable(repo: HubRepo, pull: PullInfo) -> None:
    """422 unless a closed pull request may be opened again: not merged, its head still there."""
    if pull.merged_at is not None:
        raise validation_failed(_custom("state cannot be changed. The pull request is merged."))
    if await git.branch_sha(repo.path, pull.head_ref) is None:
        raise validation_failed(
            _custom(f"state cannot be changed. The {pull.head_ref} branch has been deleted.")
        )


@PULL_ROUTES.on("pulls/update", needs=("pull_requests",), level="write")
async def update_pull(state: HubState, call: Call) -> Reply:
    """PATCH /repos/{owner}/{repo}/pulls/{pull_number}: title, body, state, base.

    Like GitHub's, it cannot change `draft` (only the GraphQL mutations can) and ignores it.
    A change of state sends `pull_request.closed` or `.reopened`, by the App's account.
    """
    repo = repo_for(state, call)
    issue = pull_issue(state, repo, path_number(call, "pull_number"))
    assert issue.pull is not None
    body = call.body or {}
    if "base" in body and await git.branch_sha(repo.path, body["base"]) is None:
        raise validation_failed(_invalid("base"))
    if body.get("state") == "open" and issue.state == "closed":
        await _reopenable(repo, issue.pull)
    with state.lock:
        now = state.clock()
        if body.get("state") == "open" and issue.state == "closed":
            _duplicate(repo, issue.pull, ignore=issue.number)
        for key in ("title", "body"):
            if key in body:
                setattr(issue, key, body[key])
        issue.pull.base_ref = body.get("base", issue.pull.base_ref)
        issue.pull.maintainer_can_modify = body.get(
            "maintainer_can_modify", issue.pull.maintainer_can_modify
        )
        changed = body.get("state") in ("open", "closed") and body["state"] != issue.state
        if changed:
            issue.state = body["state"]
            issue.closed_at = now if issue.state == "closed" else None
            issue.closed_by = state.bot.login if issue.state == "closed" else None
        issue.updated_at = now
    pull = await _full(state, repo, issue, call)
    deliveries: list[webhooks.Outgoing] = []
    if changed:
        action = "reopened" if issue.state == "open" else "closed"
        payload = webhooks.pull_request_event(
            state, repo, issue, pull, call.urls, action=action, sender=state.bot.login
        )
        deliveries.append(("pull_request", payload))
    return Reply(200, pull, deliveries=deliveries)
