"""The proxy end to end through the App and the local GitHub stand-in, with a fixed seed.

Six issues of one repository, one plan gate each, alice the decider: the first five
questions are posted with the proxy's suggestion and answered by alice; the sixth is
answered by the proxy in a comment that says it is the proxy, its answer, its figures and
how to override. After alice's override the seventh question is hers again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from app_harness import OWNER, app_settings, bodies, in_process, until, world
from fakes import FunctionModel
from local_repo import committed
from proxy_support import SEED, SURE

from bot.fakehub.hub import FakeGitHub
from orchestrator.api import AgentDef, AssistantTurn, DemoModel, Model, Sandbox

pytestmark = pytest.mark.timeout(240)
REPO = "gadgets"
NOWHERE = Sandbox("unavailable", "not needed: the model here runs no shell")


def source_repo(path: Path) -> Path:
    project = "humans: {decider: alice}\ngates: {plan: when_unsure}\n"
    return committed(path, {".teaparty/project.yaml": project, "README.md": "gadgets\n"})


async def one_issue(hub: FakeGitHub, n: int) -> tuple[list[str], list[str]]:
    """Open issue n, label it, answer `yes` if asked; its gate and proxy comments once its
    pull request is open and its job done."""
    number = hub.open_issue(OWNER, REPO, title=f"Add note {n}", body="Please.", author="alice")
    await hub.label_issue(OWNER, REPO, number, "teaparty", sender="alice")

    def asked_or_answered() -> bool:
        return bool(bodies(hub, number, "gate:", REPO) or bodies(hub, number, "proxy:", REPO))

    await until(asked_or_answered, what=f"issue {number}'s question or the proxy's answer")
    if bodies(hub, number, "gate:", REPO):
        await hub.comment_as(OWNER, REPO, number, "alice", "yes")
    await until(lambda: len(hub.pulls(OWNER, REPO)) == n, what=f"the pull request for {number}")

    def done() -> bool:
        return any("✅" in body for body in bodies(hub, number, "job:", REPO))

    await until(done, what=f"issue {number}'s job to be done")
    return bodies(hub, number, "gate:", REPO), bodies(hub, number, "proxy:", REPO)


async def test_the_proxy_earns_an_answer_on_github_and_loses_it_to_an_override(
    tmp_path: Path,
) -> None:
    hub, port, pem = world(tmp_path)
    hub.add_repo(OWNER, REPO, source=source_repo(tmp_path / "src"))
    demo, proxy = DemoModel(), FunctionModel(lambda _: AssistantTurn(SURE))

    def models(agent: AgentDef) -> Model:
        return proxy if agent.name == "proxy" else demo

    async with hub.serve() as api_url:
        settings = app_settings(hub, api_url, tmp_path / "home", pem)
        async with in_process(settings, models, port=port, sandbox=NOWHERE) as runtime:
            await runtime.office.proxy.use_seed(SEED)
            # Its band is trusted from the third agreement on: then all three count.
            for n, comparable in zip(range(1, 6), (0, 0, 0, 3, 4), strict=True):
                gates, answers = await one_issue(hub, n)
                assert answers == []
                (gate,) = gates
                assert "**The proxy suggests:** `yes`" in gate
                assert f"this one itself: {comparable} of 5 comparable decisions so far" in gate
                assert "**Its reasons:** carol approved each of the last plans." in gate

            gates, answers = await one_issue(hub, 6)
            assert gates == [], "the sixth question was never put to alice"
            (said,) = answers
            assert "🤖 **The proxy answered question 6**" in said
            assert "for @alice: `yes`" in said
            assert "This is TeaParty's proxy, not @alice. It answered because its measured" in said
            assert "agreement 0.86 over 5 comparable decisions" in said
            assert "confidence 0.93 stated, 0.86 measured at that level" in said
            assert "reply `/override <your answer>`" in said

            issues = list(hub.state.repo(OWNER, REPO).issues)
            sixth = max(issue for issue in issues if bodies(hub, issue, "proxy:", REPO))
            quoted = "> 🤖 **The proxy answered question 6** for @alice: `yes`\n/override no"
            order = await hub.comment_as(OWNER, REPO, sixth, "alice", quoted)
            await until(lambda: hub.comment_reactions(OWNER, REPO, order), what="the 👍")
            assert hub.comment_reactions(OWNER, REPO, order) == ["+1"]
            decision = await runtime.office.proxy.decision(6)
            assert decision is not None
            assert (decision.override, decision.agreed) == ("no", False)

            gates, answers = await one_issue(hub, 7)
            assert answers == []
            (gate,) = gates
            assert "**The proxy suggests:** `yes`" in gate
    assert len(proxy.requests) == 7
    assert hub.violations == []
