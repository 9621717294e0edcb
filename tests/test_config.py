"""The organisation and project configuration: loading, defaults, and every class of error."""

from __future__ import annotations

import tomllib
from pathlib import Path
from textwrap import dedent

import pytest
from orgfiles import (
    CODING_YAML,
    ORG_YAML,
    SOURCE,
    agent_yaml,
    assert_at,
    org_issue,
    project_issue,
    write,
)

from bot.cli import main
from orchestrator.api import load_project
from orchestrator.config import (
    KNOWN_TOOLS,
    ConfigError,
    ConfigIssue,
    Humans,
    Organisation,
    load_organisation,
    shipped_org_dir,
)

ROOT = Path(__file__).resolve().parent.parent
# --- the shipped default organisation -------------------------------------------------------


def test_shipped_organisation_loads() -> None:
    org = load_organisation(shipped_org_dir())
    assert org.office_manager.name == "office-manager"
    assert org.proxy.name == "proxy"
    assert org.project_lead in org.agents
    assert set(org.workgroups) == {"coding", "research"}
    coding = {member.name for member in org.workgroups["coding"].members}
    assert coding >= {"implementer", "spec-reviewer", "quality-reviewer"}
    leads = {org.office_manager.name, org.project_lead} | {
        group.lead.name for group in org.workgroups.values()
    }
    for agent in org.agents.values():
        assert 10 <= len(agent.prompt.splitlines()) <= 30, agent.name
        assert set(agent.tools) <= KNOWN_TOOLS
        assert ("send" in agent.tools) == (agent.name in leads), agent.name


def test_config_check_on_the_shipped_organisation_exits_0(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["config", "check", str(shipped_org_dir())]) == 0
    out, err = capsys.readouterr()
    assert out == f"ok: {shipped_org_dir()} (2 workgroups, 10 agents)\n"
    assert err == ""


def test_config_check_defaults_to_the_shipped_organisation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TEAPARTY_CONFIG", raising=False)
    assert main(["config", "check"]) == 0
    assert f"ok: {shipped_org_dir()} " in capsys.readouterr().out


def test_pyproject_lists_every_package_and_ships_the_config() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {
        ".".join(path.parent.relative_to(ROOT).parts)
        for top in ("bot", "orchestrator")
        for path in (ROOT / top).rglob("__init__.py")
    }
    assert on_disk <= set(setuptools["packages"])
    assert setuptools["package-dir"] == {"teaparty_config": "config"}


# --- 1. bad YAML ----------------------------------------------------------------------------


def test_yaml_syntax_error_names_the_line(org_dir: Path) -> None:
    write(org_dir / "workgroups/coding.yaml", "name: coding\nlead: coding-lead\nmembers: [a, b\n")
    issue = org_issue(org_dir, "(syntax)")
    assert_at(issue, "workgroups/coding.yaml", 4, "invalid YAML")


def test_top_level_that_is_not_a_mapping(org_dir: Path) -> None:
    write(org_dir / "agents/reviewer.yaml", "- name: reviewer\n- tools: []\n")
    issue = org_issue(org_dir, "(top level)")
    assert_at(issue, "agents/reviewer.yaml", 1, "expected a mapping", "got a list")


@pytest.mark.parametrize(
    ("text", "key", "line", "says"),
    [
        ("humans:\n  decider: alice\n bad: indent\n", "(syntax)", 3, "invalid YAML"),
        ("humans: {decider: a}\ntrigger_label: x\ntrigger_label: y\n", "trigger_label", 3, "twice"),
        (
            "humans: {decider: a}\nname: \x07\n",
            "(syntax)",
            2,
            "special characters are not allowed",
        ),
    ],
    ids=["yaml-syntax-error", "duplicate-key", "control-character"],
)
def test_a_project_file_that_is_no_yaml_names_its_line(
    org: Organisation, text: str, key: str, line: int, says: str
) -> None:
    assert_at(project_issue(text, org, key), SOURCE, line, says)


def test_python_tags_are_refused(org: Organisation) -> None:
    text = "humans: {decider: a}\nname: !!python/object:os.system x\n"
    issue = project_issue(text, org, "(syntax)")
    assert_at(issue, SOURCE, 2, "could not determine a constructor")


def test_merge_keys_are_not_duplicates(org: Organisation) -> None:
    text = """\
        humans: &people {decider: alice, advisors: [bob]}
        workgroups:
          - ref: coding
            humans:
              <<: *people
              decider: carol
        """
    project = load_project(dedent(text), org=org, source=SOURCE, default_name="w")
    assert project.workgroups[0].humans == Humans(decider="carol", advisors=("bob",))


def test_empty_project_file_needs_humans(org: Organisation) -> None:
    with pytest.raises(ConfigError) as caught:
        load_project("", org=org, source=SOURCE, default_name="w")
    assert str(caught.value) == f"{SOURCE}: humans: missing required key"


# --- 2. unknown keys ------------------------------------------------------------------------


def test_unknown_key_in_a_workgroup_file(org_dir: Path) -> None:
    write(org_dir / "workgroups/coding.yaml", CODING_YAML + "review_round: 2\n")
    issue = org_issue(org_dir, "review_round")
    assert_at(issue, "workgroups/coding.yaml", 7, "unknown key", "did you mean 'review_rounds'")


def test_unknown_nested_key_in_the_org_file(org_dir: Path) -> None:
    text = ORG_YAML.replace("  decider: boss\n", "  decider: boss\n  advisor: [amy]\n")
    write(org_dir / "teaparty.yaml", text)
    issue = org_issue(org_dir, "humans.advisor")
    assert_at(issue, "teaparty.yaml", 7, "unknown key", "advisors")


def test_unknown_key_in_an_inline_project_workgroup(org: Organisation) -> None:
    text = """\
        humans: {decider: alice}
        workgroups:
          - ref: coding
          - name: docs
            lead: coding-lead
            members: [implementer]
            lede: nobody
        """
    issue = project_issue(text, org, "workgroups[1].lede")
    assert_at(issue, SOURCE, 7, "unknown key", "allowed keys: name, description, lead")


# --- 3. references to nothing ---------------------------------------------------------------


def test_ref_to_a_workgroup_not_in_the_catalog(org: Organisation) -> None:
    text = "humans: {decider: alice}\nworkgroups:\n  - ref: coding\n  - ref: research\n"
    issue = project_issue(text, org, "workgroups[1].ref")
    assert_at(issue, SOURCE, 4, "'research'", "known: coding")


def test_org_names_an_agent_that_has_no_file(org_dir: Path) -> None:
    write(org_dir / "teaparty.yaml", ORG_YAML.replace("proxy: proxy", "proxy: butler"))
    issue = org_issue(org_dir, "proxy")
    assert_at(issue, "teaparty.yaml", 3, "no agent named 'butler'", "known agents: coding-lead")


def test_workgroup_member_that_has_no_file(org_dir: Path) -> None:
    write(org_dir / "workgroups/coding.yaml", CODING_YAML.replace("reviewer", "critic"))
    issue = org_issue(org_dir, "members[1]")
    assert_at(issue, "workgroups/coding.yaml", 6, "no agent named 'critic'")


def test_catalog_path_that_does_not_exist(org_dir: Path) -> None:
    write(org_dir / "teaparty.yaml", ORG_YAML + "  research: workgroups/research.yaml\n")
    issue = org_issue(org_dir, "workgroups.research")
    assert_at(issue, "teaparty.yaml", 10, "no workgroup file 'workgroups/research.yaml'")


def test_unknown_lead(org: Organisation) -> None:
    issue = project_issue("humans: {decider: a}\nlead: boss-agent\n", org, "lead")
    assert_at(issue, SOURCE, 2, "no agent named 'boss-agent'")


def test_missing_organisation_file(org_dir: Path) -> None:
    (org_dir / "teaparty.yaml").unlink()
    with pytest.raises(ConfigError) as caught:
        load_organisation(org_dir)
    assert str(caught.value) == f"{org_dir / 'teaparty.yaml'}: file not found"


def test_organisation_without_agents(org_dir: Path) -> None:
    for path in (org_dir / "agents").iterdir():
        path.unlink()
    issue = org_issue(org_dir, "office_manager")
    assert_at(issue, "teaparty.yaml", 2, "known agents: (none)")


def test_unreadable_agent_file(org_dir: Path) -> None:
    (org_dir / "agents/extra.yaml").mkdir()
    with pytest.raises(ConfigError) as caught:
        load_organisation(org_dir)
    [issue] = caught.value.issues
    assert (issue.line, issue.key) == (None, "")
    assert issue.message.startswith("cannot read")


def test_workgroup_name_differs_from_catalog_key(org_dir: Path) -> None:
    write(org_dir / "workgroups/coding.yaml", CODING_YAML.replace("name: coding", "name: code"))
    issue = org_issue(org_dir, "name")
    assert_at(issue, "workgroups/coding.yaml", 1, "'code'", "catalog key 'coding'")


# --- 4. deciders ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key", "line", "says"),
    [
        ("name: w\nhumans:\n  advisors: [bob]\n", "humans.decider", 2, ["missing required key"]),
        (
            "humans:\n  decider: [alice, bob]\n",
            "humans.decider",
            2,
            ["exactly one decider", "alice, bob"],
        ),
        ("name: w\n", "humans", 1, ["missing required key"]),
    ],
    ids=["no-decider", "two-deciders", "no-humans"],
)
def test_a_project_names_exactly_one_decider(
    org: Organisation, text: str, key: str, line: int, says: list[str]
) -> None:
    assert_at(project_issue(text, org, key), SOURCE, line, *says)


def test_decider_who_is_also_an_advisor(org_dir: Path) -> None:
    text = CODING_YAML + "humans:\n  decider: amy\n  advisors: [bob, amy]\n"
    write(org_dir / "workgroups/coding.yaml", text)
    issue = org_issue(org_dir, "humans.advisors")
    assert_at(issue, "workgroups/coding.yaml", 9, "'amy' is already the decider")


# --- 5. tools -------------------------------------------------------------------------------


def test_unknown_tool(org_dir: Path) -> None:
    write(org_dir / "agents/reviewer.yaml", agent_yaml("reviewer", "[read_file, browse]"))
    issue = org_issue(org_dir, "tools[1]")
    assert_at(issue, "agents/reviewer.yaml", 3, "unknown tool 'browse'", "read_file, search")


def test_send_on_a_member_that_leads_nothing(org_dir: Path) -> None:
    text = agent_yaml("implementer", "[read_file,\n  shell,\n  send]")
    write(org_dir / "agents/implementer.yaml", text)
    issue = org_issue(org_dir, "tools[2]")
    assert_at(issue, "agents/implementer.yaml", 5, "send is a lead-only tool", "with message")


def test_send_on_an_inline_member_in_a_project(org: Organisation) -> None:
    text = """\
        humans: {decider: alice}
        agents:
          - {name: writer, description: Writes., prompt: Write., tools: [send]}
        workgroups:
          - {name: docs, lead: coding-lead, members: [writer]}
        """
    issue = project_issue(text, org, "workgroups[0]")
    assert_at(issue, SOURCE, 5, "'writer'", "lead-only")


# --- types, names, rosters ------------------------------------------------------------------


def test_wrong_type_is_short_and_human(org_dir: Path) -> None:
    text = agent_yaml("reviewer", "[read_file]") + "max_turns: lots\n"
    write(org_dir / "agents/reviewer.yaml", text)
    issue = org_issue(org_dir, "max_turns")
    assert issue.message == "expected a whole number, got 'lots'"
    assert_at(issue, "agents/reviewer.yaml", 6)


def test_missing_required_key(org_dir: Path) -> None:
    write(org_dir / "agents/reviewer.yaml", "# a reviewer\nname: reviewer\ndescription: R.\n")
    issue = org_issue(org_dir, "prompt")
    assert_at(issue, "agents/reviewer.yaml", 2, "missing required key")


def test_agent_name_differs_from_file_name(org_dir: Path) -> None:
    write(org_dir / "agents/reviewer.yaml", agent_yaml("critic", "[]"))
    issue = org_issue(org_dir, "name")
    assert_at(issue, "agents/reviewer.yaml", 1, "'critic'", "reviewer.yaml")


def test_lead_who_is_also_a_member(org_dir: Path) -> None:
    write(org_dir / "workgroups/coding.yaml", CODING_YAML + "  - coding-lead\n")
    issue = org_issue(org_dir, "members[2]")
    assert_at(issue, "workgroups/coding.yaml", 7, "'coding-lead' is already on this team as lead")


def test_member_listed_twice(org: Organisation) -> None:
    text = """\
        humans: {decider: alice}
        workgroups:
          - name: docs
            lead: coding-lead
            members: [implementer, reviewer,
                      implementer]
        """
    issue = project_issue(text, org, "workgroups[0].members[2]")
    assert_at(issue, SOURCE, 6, "already on this team as a member")


def test_project_roster_mistakes(org: Organisation) -> None:
    text = """\
        humans: {decider: a}
        agents:
          - {name: scribe, description: S., prompt: P.}
          - {name: scribe, description: S., prompt: P.}
          - {name: broken, description: B., prompt: P., tools: [teleport]}
        workgroups:
          - {ref: coding}
          - {ref: coding}
          - {ref: coding, lead: scribe}
          - {name: docs, lead: broken, members: [scribe]}
        """
    with pytest.raises(ConfigError) as caught:
        load_project(dedent(text), org=org, source=SOURCE, default_name="w")
    assert [(issue.line, issue.key, issue.message[:24]) for issue in caught.value.issues] == [
        (4, "agents[1].name", "'scribe' is defined twic"),
        (5, "agents[2].tools[0]", "unknown tool 'teleport';"),
        (8, "workgroups[1]", "workgroup 'coding' appea"),
        (9, "workgroups[2].lead", "unknown key; allowed key"),
    ]


def test_long_and_null_values_are_described_briefly(org: Organisation) -> None:
    text = f"humans: {{decider: null}}\ntrigger_label: {'x' * 60}\n"
    with pytest.raises(ConfigError) as caught:
        load_project(text, org=org, source=SOURCE, default_name="w")
    assert [issue.message for issue in caught.value.issues] == [
        "expected a string, got nothing (null)",
        f"must be at most 50 characters, got '{'x' * 36}...",
    ]


def test_issues_from_several_files_are_reported_together(org_dir: Path) -> None:
    write(org_dir / "agents/reviewer.yaml", agent_yaml("reviewer", "[fly]"))
    write(org_dir / "teaparty.yaml", ORG_YAML.replace("proxy: proxy", "proxy: butler"))
    with pytest.raises(ConfigError) as caught:
        load_organisation(org_dir)
    assert {issue.key for issue in caught.value.issues} == {"tools[0]", "proxy"}
    assert len(str(caught.value).splitlines()) == 2


def test_issue_without_a_line() -> None:
    assert str(ConfigIssue("a.yaml", None, "", "file not found")) == "a.yaml: file not found"
    assert str(ConfigIssue("a.yaml", 3, "humans", "x")) == "a.yaml:3: humans: x"
