"""The proxy at the terminal (`teaparty run`'s LocalForge) and in the scripted demo model."""

from __future__ import annotations

from pathlib import Path

from fakes import FunctionModel
from local_repo import make_repo as repository
from proxy_support import SURE, drive, open_office, start

from bot.local_forge import LocalForge
from orchestrator.bus.gates import Gate
from orchestrator.core.messages import AssistantTurn, Message
from orchestrator.core.model import ModelRequest
from orchestrator.jobs.offline import DemoModel
from orchestrator.proxy.brief import Artifact, brief


async def test_the_terminal_shows_suggestions_then_the_proxys_own_answer(tmp_path: Path) -> None:
    repo = repository(tmp_path / "widgets")
    office = await open_office(tmp_path / "home", FunctionModel(lambda _: AssistantTurn(SURE)))
    lines: list[str] = []
    asked: list[int] = []

    async def approve(gate: Gate) -> str:
        asked.append(gate.gate_id)
        return "yes"

    try:
        forge = LocalForge(office, repo, decider="carol", approve=approve, say=lines.append)
        for n in range(1, 7):
            assert await drive(office, forge, await start(office, repo, n)) == "done"
        assert asked == [1, 2, 3, 4, 5]
        suggested = [line for line in lines if "the proxy suggests" in line]
        assert len(suggested) == 5
        assert suggested[-1] == (
            "  the proxy suggests: yes (stated confidence 0.93, measured 0.83; agreement with "
            "carol 0.83 over 4 comparable plan decisions; 4 of 5 comparable decisions "
            "so far)"
        )
        answered = lines[lines.index(next(x for x in lines if "the proxy answered" in x)) - 1 :]
        assert answered[0].startswith("gate 6 (plan, ")
        assert answered[1].startswith("  the proxy answered for carol: yes (stated confidence 0.93")
        assert answered[2] == "  its reasons: carol approved each of the last plans."
    finally:
        await office.close()


async def test_the_demo_model_plays_a_proxy_that_predicts_the_first_option() -> None:
    demo = DemoModel()
    for options, expected in ((("approve", "reject"), "approve"), ((), "yes")):
        text = brief(Artifact(1, "plan", "Go?", options), decider="d", history=[], learnings=None)
        request = ModelRequest(
            "proxy", "", (Message("proxy:1", 1, "engine", "user", {"text": text}),), ()
        )
        turn = await demo.complete(request)
        assert turn.text.startswith(f"answer: {expected}\nconfidence: 0.7\nreasons: ")


async def test_without_a_prediction_the_terminal_shows_the_question_alone(tmp_path: Path) -> None:
    repo = repository(tmp_path / "widgets")
    office = await open_office(tmp_path / "home", FunctionModel(lambda _: AssistantTurn("hm")))
    lines: list[str] = []

    async def approve(gate: Gate) -> str:
        return "yes"

    try:
        forge = LocalForge(office, repo, decider="carol", approve=approve, say=lines.append)
        assert await drive(office, forge, await start(office, repo, 1)) == "done"
        assert not [line for line in lines if "proxy" in line]
        assert "  carol answered: yes" in lines
    finally:
        await office.close()
