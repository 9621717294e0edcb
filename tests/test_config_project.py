"""A repository's `.teaparty/project.yaml` loaded against the organisation: defaults and values."""

from __future__ import annotations

from textwrap import dedent

import pytest
from orgfiles import (
    SOURCE,
    assert_at,
    project_issue,
)

from orchestrator.api import load_project
from orchestrator.config import (
    ConfigError,
    Humans,
    Organisation,
    load_organisation,
    shipped_org_dir,
)

# --- load_project ---------------------------------------------------------------------------


def test_project_defaults(org: Organisation) -> None:
    project = load_project("humans: {decider: alice}\n", org=org, source=SOURCE, default_name="w")
    assert project.name == "w"
    assert project.lead.name == "project-lead"
    assert project.trigger_label == "teaparty"
    assert project.gates == {
        "intent": "never",
        "plan": "when_unsure",
        "question": "always",
        "budget": "always",
        "merge-conflict": "always",
        "secret": "always",
        "protected-path": "always",
        "network": "always",  # asked only where `sandbox.ask` is true
    }
    assert (project.sandbox.network, project.sandbox.ask) == ("off", False)


def test_sandbox_ask_and_an_unquoted_off(org: Organisation) -> None:
    text = "humans: {decider: alice}\nsandbox:\n  network: off\n  ask: true\n"
    project = load_project(text, org=org, source=SOURCE, default_name="w")
    assert (project.sandbox.network, project.sandbox.ask) == ("off", True)
    with pytest.raises(ConfigError, match="sandbox.ask"):
        load_project(text.replace("true", "perhaps"), org=org, source=SOURCE, default_name="w")
    assert (project.budget.max_usd, project.budget.max_tokens) == (10.0, None)
    assert [group.name for group in project.workgroups] == ["coding"]


def test_runner_summary_transcripts_are_off_unless_the_project_turns_them_on(
    org: Organisation,
) -> None:
    text = "humans: {decider: alice}\n"
    project = load_project(text, org=org, source=SOURCE, default_name="w")
    assert project.runner.summary_transcripts is False
    on = load_project(
        text + "runner: {summary_transcripts: true}\n", org=org, source=SOURCE, default_name="w"
    )
    assert on.runner.summary_transcripts is True
    issue = project_issue(text + "runner: {transcripts: yes}\n", org, "runner.transcripts")
    assert_at(issue, SOURCE, 2, "allowed keys: summary_transcripts")


def test_project_with_a_ref_and_an_inline_workgroup(org: Organisation) -> None:
    text = """\
        name: widgets
        lead: coding-lead
        humans: {decider: alice, advisors: [bob], informed: [carol]}
        workgroups:
          - ref: coding
            humans: {decider: dana}
          - name: docs
            lead: docs-lead
            members: [writer]
        agents:
          - name: docs-lead
            description: Leads the docs.
            prompt: Lead.
            tools: [send, task_get]
          - name: writer
            description: Writes the docs.
            prompt: Write.
            model: claude-haiku-4-5
            tools: [read_file, write_file]
          - name: implementer
            description: A project-specific implementer.
            prompt: Implement carefully.
            max_turns: 5
        trigger_label: agents
        gates: {plan: always, merge-conflict: when_unsure}
        budget: {max_usd: 2.5, max_tokens: 100000}
        """
    project = load_project(dedent(text), org=org, source=SOURCE, default_name="ignored")
    assert (
        f"{project.name} {project.lead.name} {project.trigger_label}"
        == "widgets coding-lead agents"
    )
    assert (project.humans.advisors, project.humans.informed) == (("bob",), ("carol",))
    coding, docs = project.workgroups
    assert coding.humans == Humans(decider="dana")
    assert coding.members[0].prompt == "Implement carefully."  # the project's own implementer
    assert coding.members[0].max_turns == 5
    assert coding.members[1] == org.agents["reviewer"]
    assert (docs.lead.name, docs.lead.model) == ("docs-lead", "claude-sonnet-4-5")
    assert docs.members[0].model == "claude-haiku-4-5"
    assert docs.members[0].max_turns == 40
    assert (docs.review_rounds, docs.description, docs.humans) == (3, "", None)
    assert (project.gates["plan"], project.gates["merge-conflict"]) == ("always", "when_unsure")
    assert project.gates["intent"] == "never"  # kinds left out keep their default
    assert (project.budget.max_usd, project.budget.max_tokens) == (2.5, 100000)


@pytest.mark.parametrize(
    ("budget", "key", "phrase"),
    [
        ("{max_usd: 0}", "budget.max_usd", "must be greater than 0"),
        ("{max_usd: ten}", "budget.max_usd", "expected a number, got 'ten'"),
        ("{max_tokens: -5}", "budget.max_tokens", "must be greater than 0"),
        ("{max_tokens: true}", "budget.max_tokens", "expected a whole number, got true"),
        ("{max_dollars: 3}", "budget.max_dollars", "allowed keys: max_usd, max_tokens"),
    ],
)
def test_budget_validation(org: Organisation, budget: str, key: str, phrase: str) -> None:
    issue = project_issue(f"humans: {{decider: a}}\nbudget: {budget}\n", org, key)
    assert_at(issue, SOURCE, 2, phrase)


def test_budget_without_caps(org: Organisation) -> None:
    text = "humans: {decider: a}\nbudget: {max_usd: null, max_tokens: 1000}\n"
    project = load_project(text, org=org, source=SOURCE, default_name="w")
    assert (project.budget.max_usd, project.budget.max_tokens) == (None, 1000)


def test_bad_gate_mode(org: Organisation) -> None:
    issue = project_issue("humans: {decider: a}\ngates:\n  plan: sometimes\n", org, "gates.plan")
    assert_at(issue, SOURCE, 3, "'always', 'when_unsure' or 'never'", "got 'sometimes'")


def test_project_reports_schema_and_reference_issues_in_one_run(org: Organisation) -> None:
    text = "humans: {decider: a}\ntrigger_label: ''\nworkgroups:\n  - ref: nothing\n"
    with pytest.raises(ConfigError) as caught:
        load_project(text, org=org, source=SOURCE, default_name="w")
    assert [issue.key for issue in caught.value.issues] == ["trigger_label", "workgroups[0].ref"]


def test_a_one_element_decider_list_is_that_decider() -> None:
    org = load_organisation(shipped_org_dir())
    project = load_project(
        "humans: {decider: [alice]}\n", org=org, source="project.yaml", default_name="w"
    )
    assert project.humans.decider == "alice"


def test_pull_request_draft_defaults_to_done_and_takes_early(org: Organisation) -> None:
    plain = load_project("humans: {decider: a}\n", org=org, source=SOURCE, default_name="w")
    assert plain.pull_request.draft == "done"
    text = "humans: {decider: a}\npull_request: {draft: early}\n"
    project = load_project(text, org=org, source=SOURCE, default_name="w")
    assert project.pull_request.draft == "early"
    issue = project_issue(text.replace("early", "soon"), org, "pull_request.draft")
    assert_at(issue, SOURCE, 2, "'done' or 'early'", "got 'soon'")
