"""GitHub Actions in the local GitHub stand-in: a workflow dispatch is recorded, not run.

Runner mode starts its own continuation with `actions/create-workflow-dispatch`; the
stand-in keeps each dispatch (`HubState.workflow_dispatches`) for a test to run the next
workflow run itself, and answers 204 as GitHub does.
"""

from __future__ import annotations

from bot.fakehub.routes import Call, Reply, Routes, repo_for
from bot.fakehub.state import HubState

WORKFLOW_ROUTES = Routes()


@WORKFLOW_ROUTES.on("actions/create-workflow-dispatch", needs=("actions",), level="write")
async def create_workflow_dispatch(state: HubState, call: Call) -> Reply:
    """POST /repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches."""
    repo = repo_for(state, call)
    body = call.body if isinstance(call.body, dict) else {}
    with state.lock:
        state.workflow_dispatches.append(
            {
                "repository": f"{repo.owner}/{repo.name}",
                "workflow": call.params["workflow_id"],
                "ref": body.get("ref"),
                "inputs": dict(body.get("inputs") or {}),
            }
        )
    return Reply(204, None)
