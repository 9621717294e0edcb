"""The shipped price table and the cost of model calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config.prices import (
    ModelPrice,
    PriceTable,
    cost_usd,
    load_prices,
    org_prices,
    shipped_prices,
)
from orchestrator.core.errors import ConfigError
from orchestrator.core.messages import Usage


def test_shipped_table_prices_every_model_the_shipped_organisation_uses() -> None:
    from orchestrator.config import load_organisation, shipped_org_dir

    prices = shipped_prices()
    assert prices.price("claude-sonnet-4-6") == ModelPrice(
        input=3, output=15, cache_read=0.30, cache_write=3.75
    )
    org = load_organisation(shipped_org_dir())
    used = {org.defaults.model, *(agent.model for agent in org.agents.values())}
    assert used <= set(prices.models)
    assert "claude-sonnet-4-5" not in used, "retires 2026-11-30"


def test_cost_counts_every_kind_of_token() -> None:
    usage = Usage(
        input_tokens=2_000, output_tokens=1_000, cache_read_tokens=50_000, cache_write_tokens=10_000
    )
    # Haiku 4.5: $1 in, $5 out, $0.10 cache read, $1.25 cache write per million tokens:
    # 0.002 + 0.005 + 0.005 + 0.0125
    assert cost_usd("claude-haiku-4-5", usage) == pytest.approx(0.0245)
    # Opus 4.1: $15 / $75 / $1.50 / $18.75: 0.03 + 0.075 + 0.075 + 0.1875
    assert cost_usd("claude-opus-4-1", usage) == pytest.approx(0.3675)


def test_a_dated_model_id_uses_its_alias_price() -> None:
    usage = Usage(input_tokens=1_000_000)
    assert cost_usd("claude-haiku-4-5-20251001", usage) == pytest.approx(1.0)


def test_unknown_model_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match=r"no price for model 'claude-foo'.*claude-haiku-4-5"):
        cost_usd("claude-foo", Usage(input_tokens=1))


def test_other_prices_can_be_given() -> None:
    table = PriceTable(models={"m": ModelPrice(input=2, output=0, cache_read=0, cache_write=0)})
    assert cost_usd("m", Usage(input_tokens=500_000), prices=table) == pytest.approx(1.0)


def test_an_invalid_price_file_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  m: {input: 1, output: -5, cache_read: 0, cache_write: 0}\n")
    with pytest.raises(ConfigError, match=r"models.yaml:2: models\.m\.output: must be at least 0"):
        load_prices(path)


async def test_the_organisations_own_prices_are_the_ones_jobs_cost_at(tmp_path: Path) -> None:
    import shutil

    from orchestrator.config import load_organisation, shipped_org_dir
    from orchestrator.jobs.office import Office
    from orchestrator.jobs.offline import DemoModel
    from orchestrator.sandbox.confine import Sandbox

    org_dir = tmp_path / "org"
    shutil.copytree(shipped_org_dir(), org_dir, ignore=shutil.ignore_patterns("__pycache__"))
    doubled = {
        model: price.model_copy(update={"input": price.input * 2})
        for model, price in shipped_prices().models.items()
    }
    (org_dir / "models.yaml").write_text(
        "models:\n"
        + "".join(f"  {m}: {p.model_dump()}\n".replace("'", "") for m, p in doubled.items())
    )
    assert org_prices(org_dir).models == doubled
    assert org_prices(tmp_path).models == shipped_prices().models, "no file: the shipped prices"
    org = load_organisation(org_dir)
    office = await Office.open(
        tmp_path / "home",
        org=org,
        projects=[],
        models=lambda _: DemoModel(),
        env={},
        sandbox=Sandbox("unavailable", "not needed"),
        scripted=True,
    )
    try:
        lead = next(address for address in org.agents if "office" in address)
        usage = Usage(input_tokens=1_000_000)
        model = org.agents[lead].model
        assert office.budget.price(lead, usage) == doubled[model].input
    finally:
        await office.close()


def test_each_shipped_model_says_the_smallest_prefix_its_cache_keeps() -> None:
    prices = shipped_prices()
    assert prices.price("claude-sonnet-4-6").min_cache == 1024
    assert prices.price("claude-haiku-4-5-20251001").min_cache == 4096
    assert all(price.min_cache in (1024, 2048, 4096) for price in prices.models.values())
