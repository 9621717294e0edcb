"""Checks and Actions jobs in the local GitHub stand-in: the REST operations an App reads CI
with, and the webhooks CI sends (shapes from GitHub's description and octokit's payloads).

Served: `checks/list-suites-for-ref`, `checks/list-for-ref`, `checks/list-annotations`,
`checks/rerequest-run` (another app's check run), `actions/re-run-job-for-workflow-run` and
`actions/download-job-logs-for-workflow-run`, which answers 302 to a short-lived download URL
on another host (`localhost` for the hub's `127.0.0.1`), as GitHub sends logs from blob
storage: the stand-in records whether that download carried a token (`HubCi.log_reads`).
A re-run completes at once with what a test planned, and its suite's `check_suite.completed`
(and, for Actions, `workflow_run.completed`) follows.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from bot.fakehub.ci_state import ACTIONS_APP, ACTIONS_APP_ID, CheckRun, CheckSuite
from bot.fakehub.routes import Call, Reply, Routes, paginate, path_number, repo_for
from bot.fakehub.shapes import Json, Urls, node_id, repo_json, timestamp, user_json
from bot.fakehub.state import HubError, HubRepo, HubState, not_found
from bot.fakehub.webhooks import Outgoing, build_payload

CHECK_ROUTES = Routes()
LOG_PATH = "/_logs"  # where the stand-in's log downloads live (outside the API)


def _suite_of(state: HubState, repo: HubRepo, run: CheckRun) -> CheckSuite:
    return state.ci.suites[run.suite_id]


def _run(state: HubState, repo: HubRepo, call: Call, name: str) -> CheckRun:
    run = state.ci.runs.get(path_number(call, name))
    if run is None or _suite_of(state, repo, run).repo != repo.full_name.lower():
        raise not_found()
    return run


@CHECK_ROUTES.on("checks/list-suites-for-ref", needs=("checks",))
async def list_suites(state: HubState, call: Call) -> Reply:
    """GET /repos/{owner}/{repo}/commits/{ref}/check-suites (a commit SHA)."""
    repo = repo_for(state, call)
    with state.lock:
        suites = state.ci.of_commit(repo.full_name.lower(), call.params["ref"])
        items = [suite_json(state, repo, s, call.urls) for s in suites]
    page, headers = paginate(items, call, f"repos/{repo.full_name}/commits/{call.params['ref']}")
    return Reply(200, {"total_count": len(items), "check_suites": page}, headers)


@CHECK_ROUTES.on("checks/list-for-ref", needs=("checks",))
async def list_runs(state: HubState, call: Call) -> Reply:
    """GET /repos/{owner}/{repo}/commits/{ref}/check-runs: the latest run of each name unless
    `filter=all`; `status`, `check_name` and `app_id` narrow it."""
    repo = repo_for(state, call)
    every = call.query.get("filter") == "all"
    with state.lock:
        runs = [
            run
            for suite in state.ci.of_commit(repo.full_name.lower(), call.params["ref"])
            for run in (
                [state.ci.runs[i] for i in suite.run_ids] if every else state.ci.latest(suite)
            )
        ]
        runs = [r for r in runs if call.query.get("status", r.status) == r.status]
        runs = [r for r in runs if call.query.get("check_name", r.check.name) == r.check.name]
        if (app := call.query.get("app_id")) is not None:
            runs = [
                r for r in runs if str(app_of(state.ci.suites[r.suite_id], call.urls)["id"]) == app
            ]
        items = [run_json(state, repo, r, call.urls) for r in runs]
    page, headers = paginate(items, call, f"repos/{repo.full_name}/commits/{call.params['ref']}")
    return Reply(200, {"total_count": len(items), "check_runs": page}, headers)


@CHECK_ROUTES.on("checks/list-annotations", needs=("checks",))
async def list_annotations(state: HubState, call: Call) -> Reply:
    """GET /repos/{owner}/{repo}/check-runs/{check_run_id}/annotations."""
    repo = repo_for(state, call)
    with state.lock:
        run = _run(state, repo, call, "check_run_id")
        items = [
            {
                "path": a.path,
                "start_line": a.line,
                "end_line": a.line,
                "start_column": None,
                "end_column": None,
                "annotation_level": a.level,
                "title": a.title,
                "message": a.message,
                "raw_details": None,
                "blob_href": f"{call.urls.repo_html(repo)}/blob/"
                f"{state.ci.suites[run.suite_id].head_sha}/{a.path}",
            }
            for a in run.check.annotations
        ]
    path = f"repos/{repo.full_name}/check-runs/{run.run_id}/annotations"
    page, headers = paginate(items, call, path)
    return Reply(200, page, headers)


@CHECK_ROUTES.on("actions/download-job-logs-for-workflow-run", needs=("actions",))
async def download_log(state: HubState, call: Call) -> Reply:
    """GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs: 302 to the log's download URL,
    on another host, as GitHub answers (the URL itself is the credential)."""
    repo = repo_for(state, call)
    with state.lock:
        run = _run(state, repo, call, "job_id")
        if not _suite_of(state, repo, run).actions or run.completed_at is None:
            raise not_found()
        key = run.log_key
    return Reply(302, None, {"Location": log_url(call.urls, run.run_id, key)})


def log_url(urls: Urls, job_id: int, key: str) -> str:
    """The download URL of a job's log: the API's host named otherwise (127.0.0.1 becomes
    localhost), so a client that follows it with the API token sends it to another host."""
    parts = urlsplit(urls.api)
    host = "localhost" if parts.hostname == "127.0.0.1" else "127.0.0.1"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, f"{LOG_PATH}/{job_id}/{key}", "", ""))


def read_log(state: HubState, job_id: int, key: str, *, authorization: str) -> bytes | None:
    """A job's log for its download URL (None: no such log), noting whether a token came."""
    with state.lock:
        run = state.ci.runs.get(job_id)
        if run is None or run.log_key != key:
            return None
        state.ci.log_reads.append((job_id, bool(authorization)))
        return run.check.log.encode()


@CHECK_ROUTES.on("actions/re-run-job-for-workflow-run", needs=("actions",), level="write")
async def rerun_job(state: HubState, call: Call) -> Reply:
    """POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun: a new attempt of the job."""
    repo = repo_for(state, call)
    with state.lock:
        run = _run(state, repo, call, "job_id")
        if not _suite_of(state, repo, run).actions:
            raise not_found()
        if run.completed_at is None:
            raise HubError(403, "This job is already running")
        state.ci.reruns.append(("actions/re-run-job-for-workflow-run", run.run_id))
        deliveries = rerun(state, repo, run, call.urls)
    return Reply(201, {}, deliveries=deliveries)


@CHECK_ROUTES.on("checks/rerequest-run", needs=("checks",), level="write")
async def rerequest_run(state: HubState, call: Call) -> Reply:
    """POST /repos/{owner}/{repo}/check-runs/{check_run_id}/rerequest: another app's check
    runs again (GitHub asks that app with `check_run.rerequested`; the stand-in plays it)."""
    repo = repo_for(state, call)
    with state.lock:
        run = _run(state, repo, call, "check_run_id")
        if _suite_of(state, repo, run).actions:  # Actions' jobs re-run through Actions
            raise HubError(403, "Resource not accessible by integration")
        if run.completed_at is None:
            raise HubError(422, "This check run is not completed")
        state.ci.reruns.append(("checks/rerequest-run", run.run_id))
        deliveries = rerun(state, repo, run, call.urls)
    return Reply(201, {}, deliveries=deliveries)


def rerun(state: HubState, repo: HubRepo, run: CheckRun, urls: Urls) -> list[Outgoing]:
    """Run `run` again in its suite (completed at once with the planned result) and the
    webhooks the suite's completion sends."""
    suite = state.ci.suites[run.suite_id]
    result = state.ci.rerun_result(suite.repo, run)
    now = state.clock()
    again = CheckRun(state.next_id(), suite.suite_id, result, now, now, attempt=run.attempt + 1)
    state.ci.runs[again.run_id] = again
    suite.run_ids.append(again.run_id)
    suite.updated_at = now
    return completed(state, repo, suite, urls)


def completed(state: HubState, repo: HubRepo, suite: CheckSuite, urls: Urls) -> list[Outgoing]:
    """The webhooks a completed suite sends: `check_suite.completed`, and for Actions
    `workflow_run.completed`."""
    sender = user_json(state.user("github-actions[bot]", kind="Bot"), urls)
    objects = {
        "check_suite": _suite_payload(state, repo, suite, urls),
        "repository": repo_json(state, repo, urls),
        "sender": sender,
    }
    out: list[Outgoing] = [
        (
            "check_suite",
            build_payload(
                "check_suite", "completed", objects=objects, installation_id=repo.installation_id
            ),
        )
    ]
    if suite.actions and suite.workflow_run_id is not None:
        run_objects = {
            "workflow_run": workflow_run_json(state, repo, suite, urls),
            "workflow": _workflow_json(repo, suite, urls),
            "repository": repo_json(state, repo, urls),
            "sender": sender,
        }
        payload = build_payload(
            "workflow_run", "completed", objects=run_objects, installation_id=repo.installation_id
        )
        out.append(("workflow_run", payload))
    return out


# --- shapes -------------------------------------------------------------------------------


def app_of(suite: CheckSuite, urls: Urls) -> Json:
    """The `integration` that made the suite (GitHub Actions, or another CI app)."""
    app_id = ACTIONS_APP_ID if suite.actions else 90000 + sum(map(ord, suite.app))
    app_id = suite.app_id or app_id
    owner = {
        "login": "github" if suite.actions else suite.app,
        "id": 9919 if suite.actions else app_id,
        "node_id": node_id("Organization", app_id),
        "avatar_url": "",
        "gravatar_id": "",
        "url": f"{urls.api}users/{suite.app}",
        "html_url": f"{urls.server}/{suite.app}",
        **{
            key: f"{urls.api}users/{suite.app}/{key.removesuffix('_url')}"
            for key in (
                "followers_url",
                "following_url",
                "gists_url",
                "starred_url",
                "subscriptions_url",
                "organizations_url",
                "repos_url",
                "events_url",
                "received_events_url",
            )
        },
        "type": "Organization",
        "site_admin": False,
    }
    when = timestamp(suite.created_at)
    return {
        "id": app_id,
        "slug": suite.app,
        "node_id": node_id("Integration", app_id),
        "owner": owner,
        "name": suite.app_name,
        "description": "",
        "external_url": f"{urls.server}/apps/{suite.app}",
        "html_url": f"{urls.server}/apps/{suite.app}",
        "created_at": when,
        "updated_at": when,
        "permissions": {"checks": "write", "metadata": "read"},
        "events": [],
    }


def _pulls_of(state: HubState, repo: HubRepo, suite: CheckSuite, urls: Urls) -> list[Json]:
    """The open pull requests whose head is the suite's commit and branch (pull-request-minimal)."""
    found = []
    for issue in repo.issues.values():
        pull = issue.pull
        if pull is None or issue.state != "open" or pull.head_sha != suite.head_sha:
            continue
        if suite.head_branch is not None and pull.head_ref != suite.head_branch:
            continue
        ref = {"id": repo.repo_id, "url": urls.repo_api(repo), "name": repo.name}
        found.append(
            {
                "url": f"{urls.repo_api(repo)}/pulls/{issue.number}",
                "id": issue.pull_id or issue.issue_id,
                "number": issue.number,
                "head": {"ref": pull.head_ref, "sha": pull.head_sha, "repo": ref},
                "base": {"ref": pull.base_ref, "sha": pull.base_sha, "repo": ref},
            }
        )
    return found


def suite_json(state: HubState, repo: HubRepo, suite: CheckSuite, urls: Urls) -> Json:
    """A `check-suite` as the REST API returns it."""
    api = f"{urls.repo_api(repo)}/check-suites/{suite.suite_id}"
    return {
        "id": suite.suite_id,
        "node_id": node_id("CheckSuite", suite.suite_id),
        "head_branch": suite.head_branch,
        "head_sha": suite.head_sha,
        "status": state.ci.status(suite),
        "conclusion": state.ci.conclusion(suite),
        "url": api,
        "before": suite.before,
        "after": suite.head_sha,
        "pull_requests": _pulls_of(state, repo, suite, urls),
        "app": app_of(suite, urls),
        "repository": repo_json(state, repo, urls),
        "created_at": timestamp(suite.created_at),
        "updated_at": timestamp(suite.updated_at),
        "head_commit": head_commit(suite),
        "latest_check_runs_count": len(state.ci.latest(suite)),
        "check_runs_url": f"{api}/check-runs",
        "rerequestable": True,
        "runs_rerequestable": True,
    }


def head_commit(suite: CheckSuite) -> Json:
    """The suite's commit as a `simple-commit` (the stand-in does not read its message)."""
    who = {"name": "GitHub", "email": "noreply@github.com"}
    return {
        "id": suite.head_sha,
        "tree_id": suite.head_sha,
        "message": f"Commit {suite.head_sha[:7]}",
        "timestamp": timestamp(suite.created_at),
        "author": who,
        "committer": who,
    }


def _suite_payload(state: HubState, repo: HubRepo, suite: CheckSuite, urls: Urls) -> Json:
    body = suite_json(state, repo, suite, urls)
    del body["repository"], body["rerequestable"], body["runs_rerequestable"]
    return body


def run_json(state: HubState, repo: HubRepo, run: CheckRun, urls: Urls) -> Json:
    """A `check-run` as the REST API returns it."""
    suite = state.ci.suites[run.suite_id]
    api = f"{urls.repo_api(repo)}/check-runs/{run.run_id}"
    html = f"{urls.repo_html(repo)}/runs/{run.run_id}"
    if suite.actions:
        html = f"{urls.repo_html(repo)}/actions/runs/{suite.workflow_run_id}/job/{run.run_id}"
    check = run.check
    return {
        "id": run.run_id,
        "head_sha": suite.head_sha,
        "node_id": node_id("CheckRun", run.run_id),
        "external_id": run.external_id,
        "url": api,
        "html_url": html,
        "details_url": run.details_url or html,
        "status": run.status,
        "conclusion": run.conclusion,
        "started_at": timestamp(run.started_at),
        "completed_at": timestamp(run.completed_at),
        "output": {
            "title": run.title or (check.conclusion if run.completed_at else None),
            "summary": check.summary,
            "text": check.text,
            "annotations_count": len(check.annotations),
            "annotations_url": f"{api}/annotations",
        },
        "name": check.name,
        "check_suite": {"id": suite.suite_id},
        "app": app_of(suite, urls),
        "pull_requests": _pulls_of(state, repo, suite, urls),
    }


def workflow_run_json(state: HubState, repo: HubRepo, suite: CheckSuite, urls: Urls) -> Json:
    """The `workflow_run` of an Actions suite, as its webhook carries it."""
    run_id = suite.workflow_run_id or 0
    api = f"{urls.repo_api(repo)}/actions/runs/{run_id}"
    attempt = max((state.ci.runs[i].attempt for i in suite.run_ids), default=1)
    actor = user_json(state.user(repo.owner), urls)
    return {
        "id": run_id,
        "name": suite.workflow or "CI",
        "node_id": node_id("WorkflowRun", run_id),
        "head_branch": suite.head_branch,
        "head_sha": suite.head_sha,
        "path": f".github/workflows/{(suite.workflow or 'ci').lower()}.yml",
        "display_title": suite.workflow or "CI",
        "run_number": suite.run_number,
        "run_attempt": attempt,
        "event": suite.event,
        "status": "completed",
        "conclusion": state.ci.conclusion(suite),
        "workflow_id": _workflow_id(suite),
        "check_suite_id": suite.suite_id,
        "check_suite_node_id": node_id("CheckSuite", suite.suite_id),
        "url": api,
        "html_url": f"{urls.repo_html(repo)}/actions/runs/{run_id}",
        "pull_requests": _pulls_of(state, repo, suite, urls),
        "created_at": timestamp(suite.created_at),
        "updated_at": timestamp(suite.updated_at),
        "run_started_at": timestamp(suite.created_at),
        "actor": actor,
        "triggering_actor": actor,
        "jobs_url": f"{api}/jobs",
        "logs_url": f"{api}/logs",
        "check_suite_url": f"{urls.repo_api(repo)}/check-suites/{suite.suite_id}",
        "artifacts_url": f"{api}/artifacts",
        "cancel_url": f"{api}/cancel",
        "rerun_url": f"{api}/rerun",
        "previous_attempt_url": f"{api}/attempts/{attempt - 1}" if attempt > 1 else None,
        "workflow_url": f"{urls.repo_api(repo)}/actions/workflows/{_workflow_id(suite)}",
        "head_commit": head_commit(suite) | {"tree_id": suite.head_sha},
        "repository": repo_json(state, repo, urls),
        "head_repository": repo_json(state, repo, urls),
    }


def _workflow_id(suite: CheckSuite) -> int:
    return 70000 + sum(map(ord, suite.workflow or "CI"))


def _workflow_json(repo: HubRepo, suite: CheckSuite, urls: Urls) -> Json:
    path = f".github/workflows/{(suite.workflow or 'ci').lower()}.yml"
    when = timestamp(suite.created_at)
    return {
        "badge_url": f"{urls.repo_html(repo)}/workflows/{suite.workflow}/badge.svg",
        "created_at": when,
        "html_url": f"{urls.repo_html(repo)}/blob/{repo.default_branch}/{path}",
        "id": _workflow_id(suite),
        "name": suite.workflow or "CI",
        "node_id": node_id("Workflow", _workflow_id(suite)),
        "path": path,
        "state": "active",
        "updated_at": when,
        "url": f"{urls.repo_api(repo)}/actions/workflows/{_workflow_id(suite)}",
    }


__all__ = ["ACTIONS_APP", "CHECK_ROUTES", "completed", "read_log", "suite_json"]
