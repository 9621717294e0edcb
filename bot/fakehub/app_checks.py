"""The App's own check runs in the local GitHub stand-in: `checks/create`, `checks/update` and
`checks/get`, as GitHub serves them to an App (shapes from GitHub's description).

A check run belongs to one commit (`head_sha`, which must be in the repository: 422 as
GitHub answers otherwise) and lives in the App's check suite of that commit, made with its
first run, beside CI's suites (bot/fakehub/ci_state.py), so `checks/list-for-ref` lists it
too. Both writes need the installation's `checks: write` (403 "Resource not accessible by
integration" without it); the body is checked against the description first, so an
`output.summary` or `output.text` past 65,535 characters is refused with 422. A status of
`completed` needs a conclusion, and a conclusion completes the run, as on GitHub.
"""

from __future__ import annotations

from dataclasses import replace

from bot.fakehub import git
from bot.fakehub.checks import run_json
from bot.fakehub.ci_state import Check, CheckRun, CheckSuite
from bot.fakehub.routes import Call, Reply, Routes, path_number, repo_for
from bot.fakehub.shapes import Json
from bot.fakehub.state import HubError, HubRepo, HubState, not_found

APP_CHECK_ROUTES = Routes()


def _suite(state: HubState, repo: HubRepo, sha: str) -> CheckSuite:
    """The App's suite of commit `sha`, made with its first run."""
    key = repo.full_name.lower()
    for suite in state.ci.of_commit(key, sha):
        if suite.app_id == state.app_id:
            return suite
    now = state.clock()
    suite = CheckSuite(
        state.next_id(),
        key,
        sha,
        None,
        None,
        state.app_slug,
        state.app_slug.replace("-", " ").title(),
        now,
        now,
        app_id=state.app_id,
    )
    state.ci.suites[suite.suite_id] = suite
    return suite


def _own_run(state: HubState, repo: HubRepo, call: Call) -> CheckRun:
    """The run the path names, when it is the App's in this repository (else 404)."""
    run = state.ci.runs.get(path_number(call, "check_run_id"))
    suite = None if run is None else state.ci.suites[run.suite_id]
    if run is None or suite is None or suite.repo != repo.full_name.lower():
        raise not_found()
    return run


def _apply(state: HubState, run: CheckRun, body: Json) -> None:
    """Set what the body says: name, status, conclusion, output, ids and links."""
    status, conclusion = body.get("status"), body.get("conclusion")
    if status == "completed" and conclusion is None and run.completed_at is None:
        raise HubError(422, "Invalid request.\n\nNo conclusion given for a completed check run.")
    output = body.get("output") or {}
    check = run.check
    check = replace(
        check,
        name=str(body.get("name", check.name)),
        conclusion=str(conclusion or check.conclusion),
        summary=output.get("summary", check.summary),
        text=output.get("text", check.text),
    )
    run.check = check
    run.title = output.get("title", run.title)
    run.external_id = str(body.get("external_id", run.external_id))
    run.details_url = body.get("details_url", run.details_url)
    if conclusion is not None or status == "completed":
        run.completed_at = run.completed_at or state.clock()
        run.queued = False
    elif status in ("queued", "in_progress"):
        run.completed_at = None
        run.queued = status == "queued"
    state.ci.suites[run.suite_id].updated_at = state.clock()


@APP_CHECK_ROUTES.on("checks/create", needs=("checks",), level="write")
async def create_run(state: HubState, call: Call) -> Reply:
    """POST /repos/{owner}/{repo}/check-runs: a new run on `head_sha` (`queued` unless said)."""
    repo = repo_for(state, call)
    body = call.body
    sha = str(body["head_sha"])
    if await git.resolve_commit(repo.path, sha) != sha:
        raise HubError(422, f"No commit found for SHA: {sha}")
    with state.lock:
        suite = _suite(state, repo, sha)
        now = state.clock()
        run = CheckRun(state.next_id(), suite.suite_id, Check(str(body["name"]), ""), now, None)
        run.queued = body.get("status", "queued") == "queued"
        _apply(state, run, body)
        state.ci.runs[run.run_id] = run
        suite.run_ids.append(run.run_id)
        return Reply(201, run_json(state, repo, run, call.urls))


@APP_CHECK_ROUTES.on("checks/update", needs=("checks",), level="write")
async def update_run(state: HubState, call: Call) -> Reply:
    """PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}."""
    repo = repo_for(state, call)
    with state.lock:
        run = _own_run(state, repo, call)
        if state.ci.suites[run.suite_id].app_id != state.app_id:
            raise HubError(403, "Invalid app_id `%d` - check run can only be modified by its app")
        _apply(state, run, call.body or {})
        return Reply(200, run_json(state, repo, run, call.urls))


@APP_CHECK_ROUTES.on("checks/get", needs=("checks",))
async def get_run(state: HubState, call: Call) -> Reply:
    """GET /repos/{owner}/{repo}/check-runs/{check_run_id}."""
    repo = repo_for(state, call)
    with state.lock:
        return Reply(200, run_json(state, repo, _own_run(state, repo, call), call.urls))
