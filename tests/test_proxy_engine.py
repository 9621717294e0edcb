"""The proxy in the engine: real jobs, a real store, the JobDriver and a FakeForge.

With a fixed seed: after four agreeing decisions the proxy asks; after five it answers
alone (the forge is told, the agent wakes on its answer); after an override it asks again,
and the agent that asked reads the decider's correction.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import FakeForge, FunctionModel, one_forge
from local_repo import make_repo as repository
from proxy_support import (
    AUDITS_GATE_6,
    NOWHERE,
    SURE,
    drive,
    open_office,
    run_jobs,
    start,
    widgets,
)

from orchestrator.core.errors import NotProxyAnsweredError
from orchestrator.core.messages import AssistantTurn
from orchestrator.core.model import ModelRequest
from orchestrator.jobs.office import Office
from orchestrator.proxy.stats import proxy_stats


def sure(_: ModelRequest) -> AssistantTurn:
    return AssistantTurn(text=SURE)


async def asking(office: Office, repo: Path, *, auto: bool = False) -> int:
    """Job 1 on `repo` (`auto`: the proxy may answer its every eligible gate), run until it
    waits on its first gate; its id."""
    job_id = await start(office, repo, 1)
    if auto:
        await office.proxy.set_auto(job_id, on=True, by="carol")
    await office.prepare(job_id)
    await office.run_until_idle()
    return job_id


async def test_it_asks_after_four_agreements_answers_after_five_and_asks_after_an_override(
    tmp_path: Path,
) -> None:
    model = FunctionModel(sure)
    async with widgets(tmp_path, model) as (office, repo):
        forge = FakeForge(office, answers={"The plan:": "yes"})
        await run_jobs(office, forge, repo, range(1, 6))
        assert forge.asked == [1, 2, 3, 4, 5], "four agreeing decisions, then a fifth ask"
        fifth = forge.suggestions[5]
        assert (fifth.answer, fifth.alone, fifth.comparable) == ("yes", False, 4)
        assert fifth.why == "4 of 5 comparable decisions so far"
        assert forge.proxy_answers == []

        job_id = await start(office, repo, 6)
        corrected = []

        async def override_once_answered() -> None:
            if forge.proxy_answers and not corrected:
                corrected.append(await office.proxy.record_override(6, "no", "carol"))

        assert await drive(office, forge, job_id, after_sync=override_once_answered) == "done"
        assert forge.asked == [1, 2, 3, 4, 5], "the sixth gate never reached the decider"
        ((gate_id, decision),) = forge.proxy_answers
        assert (gate_id, decision.answer, decision.alone) == (6, "yes", True)
        assert decision.comparable == 5
        assert decision.agreement == pytest.approx(6 / 7)
        assert decision.measured == pytest.approx(6 / 7)
        assert decision.reasons == "carol approved each of the last plans."
        gate = await office.engine.store.read(
            lambda tx: tx.execute(
                "SELECT answer, answered_by, answered_via, conversation_id FROM gates"
                " WHERE gate_id = 6"
            ).fetchone()
        )
        assert gate[:3] == ("yes", "proxy", "proxy")
        (override,) = corrected
        assert (override.agreed, override.delivered_to) == (False, gate[3])
        lead = await office.engine.bus.transcript(gate[3])
        (correction,) = [m for m in lead if m.text.startswith("carol, the decider, overrides")]
        (ran,) = [m for m in lead if m.role == "tool" and m.call_id == "run1"]  # the plan ran
        assert ran.seq < correction.seq
        correction = correction.text
        assert "The proxy answered 'yes'; their answer is: no" in correction

        await run_jobs(office, forge, repo, range(7, 8))
        assert forge.asked == [1, 2, 3, 4, 5, 7], "after the override it asks again"
        assert not forge.suggestions[7].alone
        (stats,) = await proxy_stats(office.engine.store)
        assert (stats.gates, stats.decisions, stats.agreements) == (7, 7, 6)
        assert (stats.alone, stats.overrides, stats.autonomy) == (1, 1, False)
        assert len(model.requests) == 7, "one model call per gate, however often it is synced"


async def test_an_audited_gate_goes_to_the_decider_though_the_proxy_has_earned_it(
    tmp_path: Path,
) -> None:
    async with widgets(tmp_path, FunctionModel(sure)) as (office, repo):
        await office.proxy.use_seed(AUDITS_GATE_6)
        forge = FakeForge(office, answers={"The plan:": "yes"})
        await run_jobs(office, forge, repo, range(1, 8))
        assert forge.asked == [1, 2, 3, 4, 5, 6]
        assert forge.suggestions[6].why == "one of the eligible gates that still go to the decider"
        assert [gate for gate, _ in forge.proxy_answers] == [7]


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("Probably yes, she likes small plans.", "the proxy's reply was not in its shape"),
        ("answer: maybe\nconfidence: 0.9", "the proxy's reply was not in its shape"),
        ("answer: yes\nconfidence: 9", "the proxy's reply was not in its shape"),
        (None, "the proxy's model failed (no scripted turn left for 'proxy'"),
    ],
)
async def test_garbage_from_the_model_leaves_the_gate_to_the_decider(
    tmp_path: Path, reply: str | None, why: str
) -> None:
    from orchestrator.models.scripted import ScriptedModel

    model = ScriptedModel({}) if reply is None else FunctionModel(lambda _: AssistantTurn(reply))
    async with widgets(tmp_path, model) as (office, repo):
        forge = FakeForge(office, answers={"The plan:": "yes"})
        await run_jobs(office, forge, repo, range(1, 2))
        assert forge.asked == [1]
        assert forge.suggestions[1] is None
        decision = await office.proxy.decision(1)
        assert decision is not None
        assert decision.answer is None
        assert decision.why.startswith(f"no prediction: {why}")
        (stats,) = await proxy_stats(office.engine.store)
        assert (stats.gates, stats.decisions, stats.alone) == (1, 0, 0), "no prediction to judge"


async def test_a_tool_call_instead_of_a_prediction_is_no_prediction(tmp_path: Path) -> None:
    from orchestrator.core.messages import ToolCall

    turn = AssistantTurn(tool_calls=(ToolCall("c1", "read_file", {"path": "README.md"}),))
    async with widgets(tmp_path, FunctionModel(lambda _: turn)) as (office, repo):
        forge = FakeForge(office, answers={"The plan:": "yes"})
        await run_jobs(office, forge, repo, range(1, 2))
        assert forge.suggestions[1] is None


async def test_an_auto_job_is_answered_by_the_proxy_from_its_first_gate(tmp_path: Path) -> None:
    async with widgets(tmp_path, FunctionModel(sure)) as (office, repo):
        forge = FakeForge(office, answers={})  # any gate put to the decider fails the test
        job_id = await start(office, repo, 1)
        await office.proxy.set_auto(job_id, on=True, by="carol")
        assert await drive(office, forge, job_id) == "done"
        ((gate_id, decision),) = forge.proxy_answers
        assert decision.why == "the job lets the proxy answer every eligible gate"
        assert forge.delivered, "the job went on from the proxy's answer to its pull request"


async def test_auto_does_not_override_a_policy_of_always_asking(tmp_path: Path) -> None:
    always = "humans: {decider: carol}\ngates: {plan: always}\n"
    async with widgets(tmp_path, FunctionModel(sure), project=always) as (office, repo):
        forge = FakeForge(office, answers={"The plan:": "yes"})
        job_id = await start(office, repo, 1, project=always)
        await office.proxy.set_auto(job_id, on=True, by="carol")
        assert await drive(office, forge, job_id) == "done"
        assert forge.asked == [1]
        assert forge.suggestions[1].why == "the project's policy for plan gates is always"
        (stats,) = await proxy_stats(office.engine.store)
        assert stats.why_not == "the project's policy for plan gates is always"


@pytest.mark.parametrize("kind", ["protected-path", "budget"])
async def test_protected_kinds_are_never_answered_alone_even_earned_and_auto(
    tmp_path: Path, kind: str
) -> None:
    """The gate rows of these kinds come with the gate rework; the proxy reads the kind from
    the gate it is given, so a question gate stands in for one here."""
    from dataclasses import replace

    project = "humans: {decider: carol}\ngates: {question: when_unsure}\n"
    async with widgets(tmp_path, FunctionModel(sure), project=project) as (office, repo):
        loaded = office.projects["widgets"]
        job_id = await asking(office, repo, auto=True)
        (gate,) = await office.open_gates(job_id)
        guarded = replace(gate, kind=kind)
        decision = await office.proxy.consult(guarded, project=loaded)
        assert not decision.alone
        assert decision.why == f"never alone on {kind} gates"
        assert await office.open_gates(job_id) == [gate], "still open for the decider"
        (stats,) = await proxy_stats(office.engine.store)
        assert stats.why_not == f"never alone on {kind} gates"


async def test_an_answer_given_but_not_said_is_said_at_the_next_sync(tmp_path: Path) -> None:
    """A crash between the proxy's answer (a row) and the forge's comment loses neither."""
    async with widgets(tmp_path, FunctionModel(sure)) as (office, repo):
        job_id = await asking(office, repo, auto=True)
        (gate,) = await office.open_gates(job_id)
        decided = await office.proxy.consult(gate, project=office.projects["widgets"])
        assert decided.alone
        forge = FakeForge(office)
        assert await drive(office, forge, job_id) == "done"
        assert [g for g, _ in forge.proxy_answers] == [gate.gate_id]
        assert await office.proxy.unannounced(job_id) == []


async def test_overrides_are_refused_repeated_or_agreeing_as_the_case_may_be(
    tmp_path: Path,
) -> None:
    async with widgets(tmp_path, FunctionModel(sure)) as (office, repo):
        forge = FakeForge(office, answers={"The plan:": "yes"})
        (asked,) = await run_jobs(office, forge, repo, range(1, 2))
        with pytest.raises(NotProxyAnsweredError, match="gate 1: the proxy did not answer"):
            await office.proxy.record_override(1, "no", "carol")
        with pytest.raises(NotProxyAnsweredError):
            await office.proxy.record_override(99, "no", "carol")

        job_id = await start(office, repo, 2)
        await office.proxy.set_auto(job_id, on=True, by="carol")
        assert await drive(office, forge, job_id) == "done"
        (answered,) = await office.proxy.alone_answers(job_id)
        same = await office.proxy.record_override(answered.gate_id, "Yes.", "carol", ref="c1")
        assert (same.agreed, same.delivered_to, same.repeated) == (True, None, False)
        again = await office.proxy.record_override(answered.gate_id, "no", "carol", ref="c1")
        assert again.repeated, "the same comment seen twice changes nothing"
        late = await office.proxy.record_override(answered.gate_id, "no", "carol", ref="c2")
        assert (late.agreed, late.delivered_to) == (False, None), "the job has ended"
        assert (await office.proxy.record_override(answered.gate_id, "NO", "carol")).repeated
        (stats,) = await proxy_stats(office.engine.store)
        assert (stats.decisions, stats.agreements, stats.overrides) == (2, 1, 1)
        del asked


async def test_a_spent_budget_makes_no_model_call(tmp_path: Path) -> None:
    model = FunctionModel(sure)
    async with widgets(tmp_path, model) as (office, repo):
        job_id = await asking(office, repo)
        (gate,) = await office.open_gates(job_id)
        project = office.projects["widgets"]
        decided = await office.proxy.consult(gate, project=project, spent="budget: all of it")
        assert decided.why == "no prediction: budget: all of it"
        assert model.requests == []


async def test_a_correction_goes_to_the_job_when_the_asker_has_ended(tmp_path: Path) -> None:
    from orchestrator.core.messages import job_conversation_id

    async with widgets(tmp_path, FunctionModel(sure)) as (office, repo):
        job_id = await asking(office, repo, auto=True)
        (gate,) = await office.open_gates(job_id)
        project = office.projects["widgets"]
        decided = await office.proxy.consult(gate, project=project)
        assert decided.alone
        assert await office.proxy.consult(gate, project=project) == decided, "made once"
        await office.engine.bus.close(gate.conversation_id)
        told = await office.proxy.record_override(gate.gate_id, "no", "carol")
        assert told.delivered_to == job_conversation_id(job_id)
        root = await office.engine.bus.peek(job_conversation_id(job_id))
        assert "their answer is: no" in root[-1].content["text"]
        await office.engine.bus.close(job_conversation_id(job_id))
        again = await office.proxy.record_override(gate.gate_id, "later, maybe", "carol")
        assert (again.agreed, again.delivered_to) == (False, None)


async def test_a_job_whose_project_is_not_served_is_asked_without_the_proxy(
    tmp_path: Path,
) -> None:
    """After a restart, before its project is back (`resume`), a job's gate is still asked."""
    from orchestrator.config import load_organisation, shipped_org_dir
    from orchestrator.jobs.driver import JobDriver

    repo, home = repository(tmp_path / "widgets"), tmp_path / "home"
    model = FunctionModel(sure)
    office = await open_office(home, model)
    try:
        job_id = await asking(office, repo)
    finally:
        await office.close()
    org = load_organisation(shipped_org_dir())
    office = await Office.open(
        home, org=org, projects=[], models=lambda _: model, env={}, sandbox=NOWHERE
    )
    try:
        forge = FakeForge(office, answers={"The plan:": "yes"})

        assert await JobDriver(office, one_forge(forge)).sync(job_id) == "waiting"
        assert forge.asked == [1]
        assert forge.suggestions == {1: None}
        assert await office.proxy.decision(1) is None
        assert model.requests == []
    finally:
        await office.close()


async def test_an_answer_that_came_while_the_proxy_thought_is_the_deciders(
    tmp_path: Path,
) -> None:
    async with widgets(tmp_path, FunctionModel(sure)) as (office, repo):
        job_id = await asking(office, repo, auto=True)
        (asked,) = await office.open_gates(job_id)
        await office.answer_gate(asked.gate_id, text="no", answered_by="carol")
        decided = await office.proxy.consult(asked, project=office.projects["widgets"])
        assert (decided.alone, decided.answer) == (False, "yes")
        assert decided.why == "the decider answered before the proxy was done"
        (stats,) = await proxy_stats(office.engine.store)
        assert (stats.decisions, stats.agreements, stats.alone) == (1, 0, 0)


async def test_a_paused_job_gets_no_model_call_from_the_proxy(tmp_path: Path) -> None:
    from orchestrator.jobs.driver import JobDriver

    model = FunctionModel(sure)
    async with widgets(tmp_path, model) as (office, repo):
        job_id = await asking(office, repo)
        assert await office.control.pause(job_id, by="carol")
        forge = FakeForge(office, answers={"The plan:": "yes"})

        assert await JobDriver(office, one_forge(forge)).sync(job_id) == "waiting"
        decision = await office.proxy.decision(1)
        assert decision is not None
        assert decision.why == "no prediction: the job is paused by carol"
        assert model.requests == []
        assert forge.asked == [1], "the decider is still asked"


async def test_a_gate_closed_while_the_proxy_thought_is_left_closed(tmp_path: Path) -> None:
    from orchestrator.jobs.withdraw import withdraw

    async with widgets(tmp_path, FunctionModel(sure)) as (office, repo):
        job_id = await asking(office, repo, auto=True)
        (asked,) = await office.open_gates(job_id)
        await withdraw(office, job_id, by="carol")
        decided = await office.proxy.consult(asked, project=office.projects["widgets"])
        assert not decided.alone
        assert decided.why == "the gate was closed (its job cancelled) before the proxy was done"


async def test_the_deciders_remembered_preferences_reach_the_proxy(tmp_path: Path) -> None:
    model = FunctionModel(sure)
    async with widgets(tmp_path, model) as (office, repo):
        job_id = await start(office, repo, 1)
        assert await office.remember(job_id, "Plans that add docs are always fine.", by="carol")
        assert (
            await drive(office, FakeForge(office, answers={"The plan:": "yes"}), job_id) == "done"
        )
        (request,) = model.requests
        assert "- Plans that add docs are always fine." in request.messages[0].text
        assert "<question>" in request.messages[0].text
        assert "project-lead" not in request.messages[0].text, "not the asker's transcript"
