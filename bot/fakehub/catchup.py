"""What an App reads to catch up after downtime: its webhook delivery log, installations and issues.

GitHub keeps every delivery attempt for the App (`GET /app/hook/deliveries`, newest first,
paginated by `cursor`) and redelivers one on request; it never retries a failed one by itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlencode

from bot.fakehub.routes import (
    Call,
    Reply,
    Routes,
    page_size,
    paginate,
    path_number,
    query_since,
    repo_for,
)
from bot.fakehub.shapes import Json, installation_json, issue_event_json, issue_json, repo_json
from bot.fakehub.state import HubError, HubIssue, HubState, not_found
from bot.fakehub.webhooks import SentDelivery, hook_delivery_json

CATCHUP_ROUTES = Routes()
# GitHub's `status` filter goes by `status_code` ranges, so an attempt that never got an
# answer (status_code 0, e.g. "failed to connect") is listed under neither.
_STATUS_CODES = {"success": range(200, 400), "failure": range(400, 600)}
_CURSOR_PREFIX = "v1_"
_ISSUE_SORTS = {"created": "created_at", "updated": "updated_at"}


@dataclass(frozen=True)
class DeliveryLog:
    """The App's webhook deliveries as GitHub lists and redelivers them, over the hub's attempts."""

    attempts: list[SentDelivery]

    def routes(self) -> Routes:
        """The two operations, bound to this log."""
        routes = Routes()
        routes.on("apps/list-webhook-deliveries")(self.list_deliveries)
        routes.on("apps/redeliver-webhook-delivery")(self.redeliver)
        return routes

    async def list_deliveries(self, state: HubState, call: Call) -> Reply:
        """GET /app/hook/deliveries: finished attempts newest first, `status` and `cursor`."""
        codes = _STATUS_CODES.get(call.query.get("status", ""))
        with state.lock:
            items = [hook_delivery_json(d) for d in reversed(self.attempts) if d.finished]
        if codes is not None:
            items = [item for item in items if item["status_code"] in codes]
        page, headers = _cursor_page(items, call)
        return Reply(200, page, headers)

    async def redeliver(self, state: HubState, call: Call) -> Reply:
        """POST /app/hook/deliveries/{delivery_id}/attempts: 202, then the attempt again."""
        attempt_id = path_number(call, "delivery_id")
        with state.lock:
            found = next((d for d in self.attempts if d.attempt_id == attempt_id), None)
        if found is None:
            raise not_found()
        return Reply(202, {}, deliveries=[found])


def _cursor_page(items: list[Json], call: Call) -> tuple[list[Json], dict[str, str]]:
    """The page of newest-first `items` from `cursor` on, and a `Link` to the next one."""
    size, start = page_size(call), 0
    if (cursor := call.query.get("cursor")) is not None:
        try:
            newest = int(cursor.removeprefix(_CURSOR_PREFIX))
        except ValueError:
            raise HubError(400, f"Invalid cursor: {cursor!r}") from None
        start = next((i for i, item in enumerate(items) if item["id"] <= newest), len(items))
    page, rest = items[start : start + size], items[start + size :]
    if not rest:
        return page, {}
    query = urlencode(
        {**call.query, "per_page": size, "cursor": f"{_CURSOR_PREFIX}{rest[0]['id']}"}
    )
    return page, {"Link": f'<{call.urls.api}app/hook/deliveries?{query}>; rel="next"'}


@CATCHUP_ROUTES.on("apps/list-installations")
async def list_installations(state: HubState, call: Call) -> Reply:
    """GET /app/installations: one per `installation_id` among the repositories."""
    with state.lock:
        ids = sorted({repo.installation_id for repo in state.repos.values()})
        items = [installation_json(state, installation_id, call.urls) for installation_id in ids]
    page, headers = paginate(items, call, "app/installations")
    return Reply(200, page, headers)


@CATCHUP_ROUTES.on("apps/list-repos-accessible-to-installation")
async def list_installation_repos(state: HubState, call: Call) -> Reply:
    """GET /installation/repositories: what the token's installation (and scope) may see."""
    token = call.token
    assert token is not None, "this operation is authenticated by an installation token"
    with state.lock:
        repos = [
            repo
            for repo in state.installation_repos(token.installation_id)
            if token.repositories is None or repo.full_name.lower() in token.repositories
        ]
        items = [repo_json(state, repo, call.urls) for repo in repos]
    page, headers = paginate(items, call, "installation/repositories")
    body = {"total_count": len(items), "repositories": page, "repository_selection": "selected"}
    return Reply(200, body, headers)


@CATCHUP_ROUTES.on("issues/list-for-repo", needs=("issues",))
async def list_issues(state: HubState, call: Call) -> Reply:
    """GET /repos/{owner}/{repo}/issues: pull requests included, as on GitHub."""
    repo = repo_for(state, call)
    listed = _issue_filter(call)
    with state.lock:
        issues = [issue for issue in repo.issues.values() if listed(issue)]
        key = _ISSUE_SORTS.get(call.query.get("sort", "created"), "created_at")
        issues.sort(key=lambda issue: (getattr(issue, key), issue.number))
        if call.query.get("direction", "desc") == "desc":
            issues.reverse()
        items = [issue_json(state, repo, issue, call.urls) for issue in issues]
    page, headers = paginate(items, call, f"repos/{repo.full_name}/issues")
    return Reply(200, page, headers)


def _issue_filter(call: Call) -> Callable[[HubIssue], bool]:
    """The `state`, `labels` (all of them, any case) and `since` filters of the query."""
    wanted_state, since = call.query.get("state", "open"), query_since(call)
    labels = {name.strip().lower() for name in call.query.get("labels", "").split(",")} - {""}

    def listed(issue: HubIssue) -> bool:
        return (
            wanted_state in ("all", issue.state)
            and labels <= {label.name.lower() for label in issue.labels}
            and issue.updated_at >= since
        )

    return listed


@CATCHUP_ROUTES.on("issues/list-events", needs=("issues", "pull_requests"))
async def list_events(state: HubState, call: Call) -> Reply:
    """GET …/issues/{issue_number}/events, oldest first."""
    repo = repo_for(state, call)
    with state.lock:
        issue = state.issue(repo, path_number(call, "issue_number"))
        items = [issue_event_json(state, repo, event, call.urls) for event in issue.events]
    page, headers = paginate(items, call, f"repos/{repo.full_name}/issues/{issue.number}/events")
    return Reply(200, page, headers)
