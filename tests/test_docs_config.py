"""docs/configuration.md's table of the shipped organisation says what config/ holds."""

from __future__ import annotations

from pathlib import Path

from orchestrator.config import load_organisation, shipped_org_dir

DOC = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


def documented() -> dict[str, tuple[str, int, list[str]]]:
    """Each agent row of the table: its model, max_turns and tools as the doc writes them."""
    text = DOC.read_text()
    table = text[text.index("## The shipped organisation") :]
    rows = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) != 5 or cells[0] in ("agent", "---"):
            continue
        name, _role, model, turns, tools = cells
        rows[name] = (model.removesuffix(" (default)"), int(turns), tools.split(", "))
    return rows


def test_the_shipped_agents_table_matches_config() -> None:
    org = load_organisation(shipped_org_dir())
    shipped = {
        name: (agent.model, agent.max_turns, list(agent.tools))
        for name, agent in org.agents.items()
    }
    assert documented() == shipped
    assert f"Its defaults are `{org.defaults.model}` and {org.defaults.max_turns} turns" in (
        DOC.read_text()
    )
