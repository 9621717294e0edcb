"""A job's spend by level of the organisation, and the note at 80% of a cap, as the
tracking comment and the pull request show them."""

from __future__ import annotations

from bot.github.outbound import Outbound
from bot.github.tracking import level_table, pull_body, tracking_body
from orchestrator.core.messages import Usage
from orchestrator.jobs.budget import Spent
from orchestrator.jobs.driver import budget_note
from orchestrator.jobs.levels import by_level, level_of
from orchestrator.jobs.ports import JobStatus

LEADS = {"coding-lead"}


def test_each_agent_has_its_level_by_address() -> None:
    def level(address: str) -> str:
        return level_of(address, proxy="proxy", workgroup_leads=LEADS)

    assert level("office-manager") == "office manager"
    assert level("proxy") == "proxy"
    assert level("widgets/project-lead") == "project lead"
    assert level("widgets/coding/coding-lead") == "workgroup leads"
    assert level("widgets/coding/implementer") == "mini-teams"
    assert level("widgets/coding/quality-reviewer") == "mini-teams"


def test_levels_sum_their_agents_in_the_organisations_order_priced_per_agent() -> None:
    spent = {
        "widgets/coding/implementer": Usage(100, 10, 300, 0),
        "office-manager": Usage(50, 5),
        "widgets/coding/spec-reviewer": Usage(100, 10, 100, 0),
        "proxy": Usage(),
    }
    levels = by_level(
        spent, lambda agent, used: 0.001 * used.input_tokens, proxy="proxy", workgroup_leads=LEADS
    )
    assert [lvl.level for lvl in levels] == ["office manager", "mini-teams", "proxy"]
    teams = levels[1]
    assert teams.usage == Usage(200, 20, 400, 0)
    assert teams.usd == 0.2
    assert teams.cache_hit_rate == 400 / 600
    assert levels[2].cache_hit_rate is None
    assert levels[2].usd == 0.0


def test_the_note_comes_at_80_percent_of_either_cap() -> None:
    assert budget_note(Spent(Usage(100), 7.99), (10.0, None)) is None
    note = budget_note(Spent(Usage(100), 8.0), (10.0, None))
    assert note is not None
    assert note.startswith("$8.00 of its $10.00 used")
    both = budget_note(Spent(Usage(900), 9.0), (10.0, 1000))
    assert both is not None
    assert "$9.00 of its $10.00 and 900 of its 1,000 tokens used" in both
    assert budget_note(Spent(Usage(10**9), 10**6), (None, None)) is None


def status(state: str = "done", note: str | None = None) -> JobStatus:
    levels = by_level(
        {"office-manager": Usage(1000, 100, 3000), "widgets/coding/implementer": Usage(500, 50)},
        lambda agent, used: 0.5,
        proxy="proxy",
        workgroup_leads=LEADS,
    )
    return JobStatus(
        7,
        "Add it",
        state,
        state,
        (),
        Usage(1500, 150, 3000),
        1.0,
        "b",  # type: ignore[arg-type]
        levels=levels,
        budget_note=note,
    )


def test_the_final_tracking_comment_and_the_pull_request_show_cost_per_level() -> None:
    agent = Outbound("octo", "widgets", 1, "https://github.com")
    table = level_table(status())
    assert table[2] == "| office manager | 4,100 | 75% | $0.5000 |"
    assert table[3] == "| mini-teams | 550 | 0% | $0.5000 |"
    final = tracking_body(status(), branch_url=None, trigger_label="teaparty", agent=agent)
    assert "| office manager | 4,100 | 75% | $0.5000 |" in final
    working = tracking_body(
        status("working", "$8.00 of its $10.00 used"),
        branch_url=None,
        trigger_label="t",
        agent=agent,
    )
    assert "| office manager |" not in working  # per level once the job is done
    assert "**Budget:** ⚠️ $8.00 of its $10.00 used" in working
    assert "| mini-teams | 550 | 0% | $0.5000 |" in pull_body(status(), agent=agent)
