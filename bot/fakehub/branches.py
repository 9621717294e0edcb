"""Branches of the local GitHub stand-in: `repos/get-branch`, read from the bare remote.

The App asks it whether a pull request's head branch is still there (404 once it is deleted).
The stand-in protects no branch: `protected` is false and the protection is GitHub's answer
for an unprotected branch.
"""

from __future__ import annotations

from datetime import UTC, datetime

from bot.fakehub import git
from bot.fakehub.routes import Call, Reply, Routes, repo_for
from bot.fakehub.shapes import Json, Urls
from bot.fakehub.state import HubError, HubRepo, HubState

BRANCH_ROUTES = Routes()
_FORMAT = "%T%n%P%n%an%n%ae%n%at%n%cn%n%ce%n%ct%n%B"


@BRANCH_ROUTES.on("repos/get-branch", needs=("contents",))
async def get_branch(state: HubState, call: Call) -> Reply:
    """GET /repos/{owner}/{repo}/branches/{branch}: the branch and its tip, or 404."""
    repo = repo_for(state, call)
    name = call.params["branch"]
    sha = await git.branch_sha(repo.path, name)
    if sha is None:
        raise HubError(404, "Branch not found")
    status, out = await git.git(repo.path, "show", "-s", f"--format={_FORMAT}", sha)
    if status != 0:
        raise HubError(404, "Branch not found")
    return Reply(200, branch_json(repo, name, sha, out.decode(), call.urls))


def branch_json(repo: HubRepo, name: str, sha: str, shown: str, urls: Urls) -> Json:
    """A `branch-with-protection` from `git show -s --format=_FORMAT` of its tip."""
    tree, parents, an, ae, at, cn, ce, ct, message = shown.split("\n", 8)
    api, html = urls.repo_api(repo), urls.repo_html(repo)
    commit = {
        "url": f"{api}/commits/{sha}",
        "sha": sha,
        "node_id": f"C_{sha[:20]}",
        "html_url": f"{html}/commit/{sha}",
        "comments_url": f"{api}/commits/{sha}/comments",
        "commit": {
            "url": f"{api}/git/commits/{sha}",
            "author": {"name": an, "email": ae, "date": _iso(at)},
            "committer": {"name": cn, "email": ce, "date": _iso(ct)},
            "message": message.rstrip("\n"),
            "comment_count": 0,
            "tree": {"sha": tree, "url": f"{api}/git/trees/{tree}"},
        },
        "author": None,  # GitHub's account of the author: the stand-in does not match emails
        "committer": None,
        "parents": [
            {"sha": p, "url": f"{api}/commits/{p}", "html_url": f"{html}/commit/{p}"}
            for p in parents.split()
        ],
    }
    protection_url = f"{api}/branches/{name}/protection"
    return {
        "name": name,
        "commit": commit,
        "_links": {"self": f"{api}/branches/{name}", "html": f"{html}/tree/{name}"},
        "protected": False,
        "protection": {
            "enabled": False,
            "required_status_checks": {"enforcement_level": "off", "contexts": [], "checks": []},
        },
        "protection_url": protection_url,
    }


def _iso(epoch: str) -> str:
    return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
