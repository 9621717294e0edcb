"""JSON objects shaped like GitHub's REST responses, built from the stand-in's state.

Each builder returns what GitHub returns for the resource, with URLs under the hub's API URL
and HTML URLs under the server URL (the `file://` root that holds the bare remotes).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from bot.fakehub.git import DiffStats
from bot.fakehub.state import (
    REACTIONS,
    Comment,
    HubIssue,
    HubRepo,
    HubState,
    IssueEvent,
    Label,
    Reaction,
    User,
)

Json = dict[str, Any]
_REPO_LINKS = {
    "archive_url": "/{archive_format}{/ref}",
    "assignees_url": "/assignees{/user}",
    "blobs_url": "/git/blobs{/sha}",
    "branches_url": "/branches{/branch}",
    "collaborators_url": "/collaborators{/collaborator}",
    "comments_url": "/comments{/number}",
    "commits_url": "/commits{/sha}",
    "compare_url": "/compare/{base}...{head}",
    "contents_url": "/contents/{+path}",
    "contributors_url": "/contributors",
    "deployments_url": "/deployments",
    "downloads_url": "/downloads",
    "events_url": "/events",
    "forks_url": "/forks",
    "git_commits_url": "/git/commits{/sha}",
    "git_refs_url": "/git/refs{/sha}",
    "git_tags_url": "/git/tags{/sha}",
    "hooks_url": "/hooks",
    "issue_comment_url": "/issues/comments{/number}",
    "issue_events_url": "/issues/events{/number}",
    "issues_url": "/issues{/number}",
    "keys_url": "/keys{/key_id}",
    "labels_url": "/labels{/name}",
    "languages_url": "/languages",
    "merges_url": "/merges",
    "milestones_url": "/milestones{/number}",
    "notifications_url": "/notifications{?since,all,participating}",
    "pulls_url": "/pulls{/number}",
    "releases_url": "/releases{/id}",
    "stargazers_url": "/stargazers",
    "statuses_url": "/statuses/{sha}",
    "subscribers_url": "/subscribers",
    "subscription_url": "/subscription",
    "tags_url": "/tags",
    "teams_url": "/teams",
    "trees_url": "/git/trees{/sha}",
}


@dataclass(frozen=True)
class Urls:
    """Where the hub lives: `api` ends with '/', `server` is the git root's file:// URI."""

    api: str
    server: str

    def repo_api(self, repo: HubRepo) -> str:
        """`{api}repos/owner/name`."""
        return f"{self.api}repos/{repo.full_name}"

    def repo_html(self, repo: HubRepo) -> str:
        """`{server}/owner/name`."""
        return f"{self.server}/{repo.full_name}"


def timestamp(seconds: float | None) -> str | None:
    """GitHub's ISO 8601 UTC form, e.g. `2024-05-01T12:00:00Z`."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_id(kind: str, number: int) -> str:
    """A legacy global node id, e.g. `MDQ6VXNlcjE=` for User 1."""
    return base64.b64encode(f"0{len(kind)}:{kind}{number}".encode()).decode()


def user_json(user: User, urls: Urls) -> Json:
    """A `simple-user`."""
    is_bot = user.kind == "Bot"
    api = f"{urls.api}users/{quote(user.login)}"
    html = f"{urls.server}/apps/{user.login.removesuffix('[bot]')}" if is_bot else None
    return {
        "login": user.login,
        "id": user.user_id,
        "node_id": node_id(user.kind, user.user_id),
        "avatar_url": f"{urls.api}avatars/u/{user.user_id}?v=4",
        "gravatar_id": "",
        "url": api,
        "html_url": html or f"{urls.server}/{user.login}",
        "followers_url": f"{api}/followers",
        "following_url": f"{api}/following{{/other_user}}",
        "gists_url": f"{api}/gists{{/gist_id}}",
        "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{api}/subscriptions",
        "organizations_url": f"{api}/orgs",
        "repos_url": f"{api}/repos",
        "events_url": f"{api}/events{{/privacy}}",
        "received_events_url": f"{api}/received_events",
        "type": user.kind,
        "user_view_type": "public",
        "site_admin": False,
    }


def app_json(state: HubState, urls: Urls) -> Json:
    """The `integration` the hub plays: the GitHub App."""
    return {
        "id": state.app_id,
        "slug": state.app_slug,
        "node_id": node_id("Integration", state.app_id),
        "client_id": state.client_id,
        "owner": user_json(state.app_owner, urls),
        "name": state.app_slug.replace("-", " ").title(),
        "description": "A local stand-in for the TeaParty GitHub App.",
        "external_url": f"{urls.server}/apps/{state.app_slug}",
        "html_url": f"{urls.server}/apps/{state.app_slug}",
        "created_at": timestamp(state.created_at),
        "updated_at": timestamp(state.created_at),
        "permissions": dict(state.permissions),
        "events": ["issue_comment", "issues", "pull_request"],
        "installations_count": len({r.installation_id for r in state.repos.values()}),
    }


def installation_json(state: HubState, installation_id: int, urls: Urls) -> Json:
    """An `installation` of the app on the account that owns its repositories."""
    repos = state.installation_repos(installation_id)
    account = state.user(repos[0].owner) if repos else state.app_owner
    return {
        "id": installation_id,
        "account": user_json(account, urls),
        "repository_selection": "selected",
        "access_tokens_url": f"{urls.api}app/installations/{installation_id}/access_tokens",
        "repositories_url": f"{urls.api}installation/repositories",
        "html_url": f"{urls.server}/settings/installations/{installation_id}",
        "app_id": state.app_id,
        "client_id": state.client_id,
        "app_slug": state.app_slug,
        "target_id": account.user_id,
        "target_type": account.kind if account.kind != "Bot" else "User",
        "permissions": dict(state.permissions),
        "events": ["issue_comment", "issues", "pull_request"],
        "created_at": timestamp(state.created_at),
        "updated_at": timestamp(state.created_at),
        "single_file_name": None,
        "has_multiple_single_files": False,
        "single_file_paths": [],
        "suspended_by": None,
        "suspended_at": None,
    }


def repo_json(state: HubState, repo: HubRepo, urls: Urls) -> Json:
    """A `full-repository`; also satisfies the smaller `repository` schema."""
    api, html = urls.repo_api(repo), urls.repo_html(repo)
    open_count = sum(issue.state == "open" for issue in repo.issues.values())
    when = timestamp(repo.created_at)
    return {
        "id": repo.repo_id,
        "node_id": node_id("Repository", repo.repo_id),
        "name": repo.name,
        "full_name": repo.full_name,
        "private": repo.private,
        "owner": user_json(state.user(repo.owner), urls),
        "html_url": html,
        "description": None,
        "fork": False,
        "url": api,
        **{key: api + suffix for key, suffix in _REPO_LINKS.items()},
        "git_url": f"{html}.git",
        "ssh_url": f"{html}.git",
        "clone_url": f"{html}.git",
        "svn_url": html,
        "mirror_url": None,
        "homepage": None,
        "language": None,
        "size": 0,
        "default_branch": repo.default_branch,
        "visibility": "private" if repo.private else "public",
        "is_template": False,
        "topics": [],
        "custom_properties": {},
        **dict.fromkeys(["has_issues", "has_projects", "has_wiki", "has_downloads"], True),
        **dict.fromkeys(["has_pages", "has_discussions", "archived", "disabled"], False),
        **dict.fromkeys(["allow_squash_merge", "allow_merge_commit", "allow_rebase_merge"], True),
        **dict.fromkeys(["allow_auto_merge", "delete_branch_on_merge", "allow_forking"], False),
        "web_commit_signoff_required": False,
        **dict.fromkeys(["forks", "forks_count", "stargazers_count", "watchers"], 0),
        **dict.fromkeys(["watchers_count", "subscribers_count", "network_count"], 0),
        "open_issues": open_count,
        "open_issues_count": open_count,
        "license": None,
        "pushed_at": when,
        "created_at": when,
        "updated_at": when,
    }


def label_json(repo: HubRepo, label: Label, urls: Urls) -> Json:
    """A label as issues, pull requests and webhooks embed it."""
    return {
        "id": label.label_id,
        "node_id": node_id("Label", label.label_id),
        "url": f"{urls.repo_api(repo)}/labels/{quote(label.name)}",
        "name": label.name,
        "color": label.color,
        "default": False,
        "description": None,
        # Newer descriptions (and githubkit's models) require these two.
        "archived_at": None,
        "archived_by": None,
    }


def reactions_json(url: str, reactions: list[Reaction]) -> Json:
    """A `reaction-rollup`."""
    counts = {content: sum(r.content == content for r in reactions) for content in REACTIONS}
    return {"url": url, "total_count": len(reactions), **counts}


def association(state: HubState, repo: HubRepo, login: str) -> str:
    """The `author_association` GitHub shows for `login` on `repo`."""
    user = state.user(login)
    if user.login.lower() == repo.owner.lower():
        return "OWNER"
    if user.permission not in (None, "none", "read"):
        return "COLLABORATOR"
    return "NONE"


def issue_json(state: HubState, repo: HubRepo, issue: HubIssue, urls: Urls) -> Json:
    """An `issue`; a pull request's issue carries `pull_request` and `draft`."""
    api = f"{urls.repo_api(repo)}/issues/{issue.number}"
    kind = "pull" if issue.pull else "issues"
    body: Json = {
        "id": issue.issue_id,
        "node_id": node_id("Issue", issue.issue_id),
        "url": api,
        "repository_url": urls.repo_api(repo),
        "labels_url": f"{api}/labels{{/name}}",
        "comments_url": f"{api}/comments",
        "events_url": f"{api}/events",
        "timeline_url": f"{api}/timeline",
        "html_url": f"{urls.repo_html(repo)}/{kind}/{issue.number}",
        "number": issue.number,
        "state": issue.state,
        "state_reason": "completed" if issue.state == "closed" and not issue.pull else None,
        "title": issue.title,
        "body": issue.body,
        "user": user_json(state.user(issue.author), urls),
        "labels": [label_json(repo, label, urls) for label in issue.labels],
        "assignee": None,
        "assignees": [],
        "milestone": None,
        "locked": False,
        "active_lock_reason": None,
        "comments": len(issue.comments),
        "closed_at": timestamp(issue.closed_at),
        "closed_by": (
            user_json(state.user(issue.closed_by), urls)
            if issue.state == "closed" and issue.closed_by
            else None
        ),
        "created_at": timestamp(issue.created_at),
        "updated_at": timestamp(issue.updated_at),
        "author_association": association(state, repo, issue.author),
        "performed_via_github_app": app_json(state, urls) if issue.via_app else None,
        "reactions": reactions_json(f"{api}/reactions", issue.reactions),
        "sub_issues_summary": {"total": 0, "completed": 0, "percent_completed": 0},
    }
    if issue.pull is not None:
        pull_api = f"{urls.repo_api(repo)}/pulls/{issue.number}"
        html = body["html_url"]
        body["draft"] = issue.pull.draft
        body["pull_request"] = {
            "url": pull_api,
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "merged_at": timestamp(issue.pull.merged_at),
        }
    return body


def comment_json(state: HubState, repo: HubRepo, comment: Comment, urls: Urls) -> Json:
    """An `issue-comment`; the app's own comments carry `performed_via_github_app`."""
    api = f"{urls.repo_api(repo)}/issues/comments/{comment.comment_id}"
    issue = repo.issues[comment.issue_number]
    return {
        "id": comment.comment_id,
        "node_id": node_id("IssueComment", comment.comment_id),
        "url": api,
        "html_url": issue_json_html(repo, issue, urls) + f"#issuecomment-{comment.comment_id}",
        "issue_url": f"{urls.repo_api(repo)}/issues/{comment.issue_number}",
        "body": comment.body,
        "user": user_json(state.user(comment.author), urls),
        "created_at": timestamp(comment.created_at),
        "updated_at": timestamp(comment.updated_at),
        "author_association": association(state, repo, comment.author),
        "performed_via_github_app": app_json(state, urls) if comment.via_app else None,
        "reactions": reactions_json(f"{api}/reactions", []),
    }


def issue_json_html(repo: HubRepo, issue: HubIssue, urls: Urls) -> str:
    """The web address of an issue or pull request."""
    return f"{urls.repo_html(repo)}/{'pull' if issue.pull else 'issues'}/{issue.number}"


def reaction_json(state: HubState, reaction: Reaction, urls: Urls) -> Json:
    """A `reaction`."""
    return {
        "id": reaction.reaction_id,
        "node_id": node_id("Reaction", reaction.reaction_id),
        "user": user_json(state.user(reaction.author), urls),
        "content": reaction.content,
        "created_at": timestamp(reaction.created_at),
    }


def issue_event_json(state: HubState, repo: HubRepo, event: IssueEvent, urls: Urls) -> Json:
    """A `labeled-issue-event`, one of the kinds an issue's events list holds."""
    return {
        "id": event.event_id,
        "node_id": node_id("LabeledEvent", event.event_id),
        "url": f"{urls.repo_api(repo)}/issues/events/{event.event_id}",
        "actor": user_json(state.user(event.actor), urls),
        "event": event.event,
        "commit_id": None,
        "commit_url": None,
        "created_at": timestamp(event.created_at),
        "performed_via_github_app": None,
        "label": {"name": event.label.name, "color": event.label.color},
    }


def collaborator_json(state: HubState, repo: HubRepo, login: str, urls: Urls) -> Json:
    """A `repository-collaborator-permission`."""
    permission, role = state.permission_of(repo, login)
    flags = ("pull", "triage", "push", "maintain", "admin")
    rank = {"none": 0, "read": 1, "triage": 2, "write": 3, "maintain": 4, "admin": 5}[role]
    user = user_json(state.user(login), urls) | {
        "permissions": {flag: rank > i for i, flag in enumerate(flags)},
        "role_name": role,
    }
    return {"permission": permission, "role_name": role, "user": user}


def content_links(repo: HubRepo, urls: Urls, *, path: str, ref: str, sha: str, kind: str) -> Json:
    """`url`, `git_url`, `html_url` and `_links` of a contents entry."""
    api = f"{urls.repo_api(repo)}/contents/{quote(path)}?ref={quote(ref)}"
    git_kind = "trees" if kind == "dir" else "blobs"
    git_url = f"{urls.repo_api(repo)}/git/{git_kind}/{sha}"
    html = f"{urls.repo_html(repo)}/{'tree' if kind == 'dir' else 'blob'}/{ref}/{path}"
    return {
        "url": api,
        "git_url": git_url,
        "html_url": html,
        "_links": {"self": api, "git": git_url, "html": html},
    }


def encode_content(data: bytes) -> str:
    """Base64 the way GitHub sends file contents: wrapped at 60 characters."""
    text = base64.b64encode(data).decode()
    return "".join(text[i : i + 60] + "\n" for i in range(0, len(text), 60))


def pull_json(
    state: HubState, repo: HubRepo, issue: HubIssue, urls: Urls, *, stats: DiffStats | None
) -> Json:
    """A `pull-request`, or a `pull-request-simple` (as lists return) when `stats` is None."""
    assert issue.pull is not None, "pull_json needs a pull request"
    pull, api = issue.pull, f"{urls.repo_api(repo)}/pulls/{issue.number}"
    issue_body = issue_json(state, repo, issue, urls)
    html = issue_body["html_url"]
    links = _pull_links(repo, issue_body, urls, api=api, head_sha=pull.head_sha)
    body: Json = {
        **{key: issue_body[key] for key in _PULL_FROM_ISSUE},
        "id": issue.pull_id,
        "node_id": node_id("PullRequest", issue.pull_id),
        "url": api,
        "diff_url": f"{html}.diff",
        "patch_url": f"{html}.patch",
        "issue_url": issue_body["url"],
        "commits_url": links["commits"],
        "review_comments_url": links["review_comments"],
        "review_comment_url": links["review_comment"],
        "statuses_url": links["statuses"],
        "merged_at": timestamp(pull.merged_at),
        "merge_commit_sha": pull.merge_commit_sha,
        "requested_reviewers": [user_json(state.user(r), urls) for r in pull.reviews.requested],
        "requested_teams": [],
        "head": _branch_json(state, repo, urls, pull.head_ref, pull.head_sha, pull.head_owner),
        "base": _branch_json(state, repo, urls, pull.base_ref, pull.base_sha, repo.owner),
        "_links": {key: {"href": href} for key, href in links.items()},
        "auto_merge": None,
        "draft": pull.draft,
    }
    if stats is None:
        return body
    is_open = issue.state == "open"
    return body | {
        "merged": pull.merged_at is not None,
        "mergeable": True if is_open else None,
        "rebaseable": True if is_open else None,
        "mergeable_state": "clean" if is_open else "unknown",
        "merged_by": user_json(state.user(pull.merged_by), urls) if pull.merged_by else None,
        "comments": len(issue.comments),
        "review_comments": len(pull.reviews.comments),
        "maintainer_can_modify": pull.maintainer_can_modify,
        "commits": stats.commits,
        "additions": stats.additions,
        "deletions": stats.deletions,
        "changed_files": stats.changed_files,
    }


def _pull_links(repo: HubRepo, issue_body: Json, urls: Urls, *, api: str, head_sha: str) -> Json:
    return {
        "self": api,
        "html": issue_body["html_url"],
        "issue": issue_body["url"],
        "comments": issue_body["comments_url"],
        "review_comments": f"{api}/comments",
        "review_comment": f"{urls.repo_api(repo)}/pulls/comments{{/number}}",
        "commits": f"{api}/commits",
        "statuses": f"{urls.repo_api(repo)}/statuses/{head_sha}",
    }


_PULL_FROM_ISSUE = (
    "html_url",
    "comments_url",
    "number",
    "state",
    "locked",
    "title",
    "user",
    "body",
    "labels",
    "milestone",
    "active_lock_reason",
    "created_at",
    "updated_at",
    "closed_at",
    "assignee",
    "assignees",
    "author_association",
)


def _branch_json(
    state: HubState, repo: HubRepo, urls: Urls, ref: str, sha: str, owner: str
) -> Json:
    return {
        "label": f"{owner}:{ref}",
        "ref": ref,
        "sha": sha,
        "user": user_json(state.user(owner), urls),
        "repo": repo_json(state, repo, urls),
    }
