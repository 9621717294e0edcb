"""The model agents run on, as the commands choose it: the scripted stand-in or Anthropic,
and the identity agents commit under."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal

from orchestrator.config import AgentDef
from orchestrator.core.model import Model
from orchestrator.jobs.offline import DemoModel
from orchestrator.workspace.git import IDENTITY

ModelKind = Literal["scripted", "anthropic"]
AGENT_IDENTITY = {
    "GIT_AUTHOR_NAME": IDENTITY[0],
    "GIT_AUTHOR_EMAIL": IDENTITY[1],
    "GIT_COMMITTER_NAME": IDENTITY[0],
    "GIT_COMMITTER_EMAIL": IDENTITY[1],
}


async def check_model(kind: ModelKind, env: Mapping[str, str]) -> None:
    """Before a job starts: the Anthropic key is there and accepted (ModelError if not)."""
    if kind != "anthropic":
        return
    from orchestrator.models.anthropic import AnthropicModel

    await AnthropicModel.from_env(env, model="").check()


def models(
    kind: ModelKind, env: Mapping[str, str], *, demo: DemoModel | None = None
) -> Callable[[AgentDef], Model]:
    """The model each agent runs on: the scripted stand-in, or Anthropic (one client per
    model name; `anthropic` is imported only here, as it costs 1.7 s)."""
    if kind == "scripted":
        scripted = demo or DemoModel()
        return lambda agent: scripted
    from orchestrator.models.anthropic import AnthropicModel

    cache: dict[str, Model] = {}

    def model_for(agent: AgentDef) -> Model:
        if agent.model not in cache:
            cache[agent.model] = AnthropicModel.from_env(env, model=agent.model)
        return cache[agent.model]

    return model_for
