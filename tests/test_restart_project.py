"""A restarted App runs each job under the project file it started with, not the defaults.

The repository's `.teaparty/project.yaml` replaces the shipped project lead with its own,
adds a workgroup of its own and sets a token budget (with no budget gate: a turn past it
stops); `.teaparty/learnings.md` holds the project's standing learnings. The job is
stopped mid-turn; a new runtime over the same state directory must put all four back in
force.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from app_harness import OWNER, app_settings, in_process, make_hub, until
from fakes import FunctionModel, calls
from local_repo import committed

from bot.demo import free_port, private_key_pem
from bot.handlers.repos import project_name
from orchestrator.core.messages import AssistantTurn, ToolCall, Usage
from orchestrator.core.model import ModelRequest
from orchestrator.jobs.flat_lead import TRIAGE
from orchestrator.sandbox.confine import Sandbox

PROJECT_YAML = """\
humans: {decider: alice}
budget: {max_usd: null, max_tokens: 150}
gates: {budget: never}
agents:
  - name: project-lead
    description: Leads the widgets project.
    prompt: "You lead widgets. WIDGETS-OWN-LEAD-PROMPT"
    tools: [send, dispatch, message, task_create, task_get, task_update, task_list, ask_human]
  - name: docs-lead
    description: Leads the docs team.
    prompt: Lead the docs team.
    tools: [send, dispatch, message, task_get, task_update, task_list]
  - name: docs-writer
    description: Writes the docs.
    prompt: Write the docs.
    tools: [read_file, write_file, task_get]
workgroups:
  - ref: coding
  - name: docs
    description: Writes the documentation.
    lead: docs-lead
    members: [docs-writer]
"""
LEARNINGS = "WIDGETS-LEARNING: run `make check` before you reply.\n"
NOWHERE = Sandbox("unavailable", "not needed: the model here runs no shell")


def source_repo(path: Path) -> Path:
    files = {".teaparty/project.yaml": PROJECT_YAML, ".teaparty/learnings.md": LEARNINGS}
    return committed(path, {**files, "README.md": "widgets\n"})


def short(request: ModelRequest) -> str:
    return request.agent.rsplit("/", 1)[-1]


async def test_a_restart_keeps_the_project_file_agents_workgroups_budget_and_learnings(
    tmp_path: Path,
) -> None:
    pem, port = private_key_pem(), free_port()
    hub = make_hub(tmp_path / "hub", port=port, pem=pem)
    hub.add_repo(OWNER, "gadgets", source=source_repo(tmp_path / "src"))
    hub.add_user("alice", "admin")
    stuck = asyncio.Event()  # never set: the lead's first turn is cut by the "crash"

    async def before(request: ModelRequest) -> AssistantTurn:
        # (the office manager's hand-over is the engine's turn: jobs/flat_manager.py)
        if request.system == TRIAGE:  # jobs/flat_lead.py: the job needs the lead's plan
            return AssistantTurn(text="plan")
        await stuck.wait()
        raise AssertionError("unreachable")

    def after(request: ModelRequest) -> AssistantTurn:
        if request.system == TRIAGE:
            return AssistantTurn(text="plan")
        turns = [r for r in model.requests_of(request.agent) if r.tools]
        if short(request) == "project-lead" and len(turns) == 1:
            turn = calls(ToolCall("t1", "task_list", {}))
            return AssistantTurn(tool_calls=turn.tool_calls, usage=Usage(input_tokens=200))
        raise AssertionError(f"no call expected once the budget is spent: {request.agent}")

    async with hub.serve() as api_url:
        settings = app_settings(hub, api_url, tmp_path / "home", pem)
        first = FunctionModel(before)
        async with in_process(settings, lambda _: first, port=port, sandbox=NOWHERE):
            number = hub.open_issue(
                OWNER, "gadgets", title="Docs", body="Write docs.", author="alice"
            )
            await hub.label_issue(OWNER, "gadgets", number, "teaparty", sender="alice")
            await until(
                lambda: [r for r in first.requests if short(r) == "project-lead" and r.tools],
                what="the project lead's first turn",
            )
        (lead_request,) = [r for r in first.requests if short(r) == "project-lead" and r.tools]
        assert "WIDGETS-LEARNING" in lead_request.system, "read from the job's clone"
        assert not [r for r in hub.requests if r.path.endswith("learnings.md")], "not the API"
        lead = lead_request.agent
        conversation = lead_request.messages[0].conversation_id

        model = FunctionModel(after)
        async with in_process(settings, lambda _: model, port=port, sandbox=NOWHERE) as runtime:

            def turns() -> list[ModelRequest]:  # the lead's, not its triage's
                return [r for r in model.requests_of(lead) if r.tools]

            await until(turns, what="the lead's turn after the restart")
            system = turns()[0].system
            assert "WIDGETS-OWN-LEAD-PROMPT" in system, (
                "the project's own lead, not the shipped one"
            )
            assert "WIDGETS-LEARNING" in system, "the project's learnings"
            assert "docs-lead" in system, "the project's own workgroup is reachable"

            async def stopped() -> str:
                transcript = await runtime.office.engine.bus.transcript(conversation)
                said = [m.text for m in transcript if m.role == "assistant"]
                return next((text for text in said if "budget:" in text), "")

            await until(stopped, what="the lead to stop on the budget")
            assert "budget: the job used 200 of its 150 tokens" in await stopped()
    assert project_name(OWNER, "gadgets") in lead
    assert len([r for r in model.requests_of(lead) if r.tools]) == 1
