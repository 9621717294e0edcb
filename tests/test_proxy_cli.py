"""`teaparty proxy stats`: the figures of a real store, as a table and as JSON."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from fakes import FakeForge, FunctionModel
from local_repo import make_repo as repository
from proxy_support import SURE, drive, open_office, run_jobs, start

from bot.cli import main
from orchestrator.core.messages import AssistantTurn


async def a_store_with_history(tmp_path: Path) -> Path:
    """Six jobs of one decider: five asked and agreed, the sixth answered by the proxy."""
    home, repo = tmp_path / "home", repository(tmp_path / "widgets")
    office = await open_office(home, FunctionModel(lambda _: AssistantTurn(SURE)))
    try:
        forge = FakeForge(office, answers={"The plan:": "yes"})
        await run_jobs(office, forge, repo, range(1, 7))
        assert [gate for gate, _ in forge.proxy_answers] == [6]
        job_id = await start(office, repo, 7)
        forge.answers = {"The plan:": "no"}  # the decider disagrees with the proxy's "yes"
        await office.proxy.use_seed("s29")  # ... at gate 7, which the audit sends to them
        assert await drive(office, forge, job_id) == "done"
    finally:
        await office.close()
    return home


def test_stats_as_a_table_and_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = asyncio.run(a_store_with_history(tmp_path))
    assert main(["proxy", "stats", "--home", str(home), "--json"], environ={}) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row == {
        "project": "widgets",
        "decider": "carol",
        "kind": "plan",
        "gates": 7,
        "decisions": 6,
        "agreements": 5,
        "comparable": 0,  # the miss took the band to 6/8, below 0.8: none trusted now
        "agreement": 0.5,
        "alone": 1,
        "overrides": 0,
        "autonomy": False,
        "why_not": "0 of 5 comparable decisions so far",
        "trusted_bands": [],
    }
    assert main(["proxy", "stats"], environ={"TEAPARTY_HOME": str(home)}) == 0
    header, line = capsys.readouterr().out.splitlines()
    assert header.split() == [
        *("project", "decider", "kind", "gates", "decisions", "agreements", "agreement"),
        *("alone", "overrides", "autonomy"),
    ]
    assert line.split()[:10] == [
        *("widgets", "carol", "plan", "7", "6", "5", "0.50", "1", "0", "no:"),
    ]
    assert line.endswith("no: 0 of 5 comparable decisions so far")


def test_a_home_without_a_store_has_no_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["proxy", "stats", "--home", str(tmp_path)], environ={}) == 0
    assert capsys.readouterr().out == f"no gate has been put to the proxy in {tmp_path}\n"
    assert main(["proxy", "stats", "--home", str(tmp_path), "--json"], environ={}) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert not (tmp_path / "teaparty.db").exists(), "looking made no store"


async def test_counting_every_decision_a_group_may_qualify_with_no_trusted_band(
    tmp_path: Path,
) -> None:
    """Under the other reading of 'comparable', five agreements stated at 0.55 qualify on
    agreement while no band is trusted; stats say that is why it would not answer."""
    from orchestrator.proxy.autonomy import Rules
    from orchestrator.proxy.stats import proxy_stats

    unsure = "answer: yes\nconfidence: 0.55\nreasons: a guess."
    repo = repository(tmp_path / "widgets")
    office = await open_office(tmp_path / "home", FunctionModel(lambda _: AssistantTurn(unsure)))
    try:
        forge = FakeForge(office, answers={"The plan:": "yes"})
        await run_jobs(office, forge, repo, range(1, 6))
        (row,) = await proxy_stats(office.engine.store, rules=Rules(comparable="all"))
        assert (row.comparable, row.trusted_bands) == (5, ("0.5–0.6",))
        (row,) = await proxy_stats(
            office.engine.store, rules=Rules(comparable="all", confidence=0.9)
        )
        assert row.why_not == "no confidence band measured at 0.9 or more yet"
    finally:
        await office.close()
