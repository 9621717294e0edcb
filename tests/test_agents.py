"""Agents from configuration, and context discipline: a child sees its brief, not our history."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import calls, say, send

from orchestrator.agents.engine import Engine
from orchestrator.agents.roster import ConfigAgents, UnknownAgentError
from orchestrator.agents.tools import BUS_SPECS
from orchestrator.api import load_project
from orchestrator.bus.routing import Router, organisation_teams
from orchestrator.config import load_organisation, shipped_org_dir
from orchestrator.core.errors import OrchestratorError
from orchestrator.core.model import Model, ModelRequest
from orchestrator.core.tools import ToolSpec
from orchestrator.models.scripted import FunctionModel
from orchestrator.teams.transactions import DISPATCH, DISPATCH_SPEC

ALL_TOOLS = {
    **BUS_SPECS,
    DISPATCH: DISPATCH_SPEC,
    **{
        name: ToolSpec(name, name)
        for name in (
            "read_file",
            "list_files",
            "search",
            "write_file",
            "edit_file",
            "shell",
            "task_create",
            "task_get",
            "task_update",
            "task_list",
        )
    },
}


def config_agents(model: Model, **kwargs: object) -> ConfigAgents:
    org = load_organisation(shipped_org_dir())
    project = load_project(
        "humans: {decider: alice}\n", org=org, source="p.yaml", default_name="widgets"
    )
    router = Router(organisation_teams(org, [project]))
    return ConfigAgents(
        org,
        [project],
        router=router,
        models=lambda agent: model,
        tool_specs=kwargs.pop("tool_specs", ALL_TOOLS),  # type: ignore[arg-type]
        **kwargs,
    )  # type: ignore[arg-type]


def test_an_agent_gets_its_role_prompt_position_routes_tools_and_learnings() -> None:
    model = FunctionModel(lambda r: say("x"))
    agents = config_agents(model, learnings={"widgets": "Run `make lint` before committing."})
    lead = agents.spec("widgets/coding/coding-lead")
    org = load_organisation(shipped_org_dir())
    assert lead.system.startswith(org.workgroups["coding"].lead.prompt.strip())
    assert "You are coding-lead, the lead of workgroup coding in project widgets." in lead.system
    assert "You can send to: implementer, phase-reviewer, project-lead," in lead.system
    assert "Run `make lint` before committing." in lead.system
    assert [t.name for t in lead.tools] == list(org.workgroups["coding"].lead.tools)
    assert lead.max_turns == org.workgroups["coding"].lead.max_turns
    worker = agents.spec("widgets/coding/implementer")
    assert "You can send to" not in worker.system, "members have no send tool"


def test_unknown_addresses_and_unimplemented_tools_are_clear_errors() -> None:
    agents = config_agents(FunctionModel(lambda r: say("x")))
    with pytest.raises(UnknownAgentError, match="no agent at 'widgets/art/painter'"):
        agents.spec("widgets/art/painter")
    partial = config_agents(FunctionModel(lambda r: say("x")), tool_specs=BUS_SPECS)
    with pytest.raises(OrchestratorError, match="'implementer': no implementation of tools"):
        partial.spec("widgets/coding/implementer")


async def test_a_child_sees_only_the_brief_never_the_senders_history(tmp_path: Path) -> None:
    def fn(request: ModelRequest) -> object:
        if request.agent == "widgets/coding/coding-lead":
            if len(request.messages) == 1:
                return calls(
                    send("s", "implementer", "Brief: fix parse() for empty input."),
                    text="Secret deliberation about three options.",
                )
            return say("done")
        return say("fixed")

    model = FunctionModel(fn)  # type: ignore[arg-type]
    agents = config_agents(model)
    engine = await Engine.open(tmp_path / "s.db", agents=agents, router=agents.router)
    await engine.bus.start_job(
        job_key="k",
        project="widgets",
        title="t",
        agent="widgets/coding/coding-lead",
        brief="Issue #4: parse bug",
    )
    await engine.scheduler.run_until_idle()
    (child,) = model.requests_of("widgets/coding/implementer")
    assert [m.text for m in child.messages] == ["Brief: fix parse() for empty input."]
    assert "Secret deliberation" not in child.system
    assert "Issue #4" not in child.system
    assert child.system == agents.spec("widgets/coding/implementer").system
    await engine.close()
