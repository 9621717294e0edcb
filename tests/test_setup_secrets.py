"""Which variables agents' processes and a repository's setup get, and which values the
engine knows for secrets: allowlists the operator extends by name, never a repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import SettingsError
from bot.runner.env import ActionEnv
from bot.settings import SETUP_SECRETS, Settings, setup_secret_names
from orchestrator.core.errors import SandboxError
from orchestrator.core.secrecy import KnownSecrets, agent_gets, engine_keeps, mask
from orchestrator.sandbox.confine import Sandbox
from orchestrator.workspace.shell import agent_env, setup_env

OFF = Sandbox("off", "tests")
ENGINE = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_TIME": "C",
    "TERM": "xterm",
    "TZ": "UTC",
    "GIT_AUTHOR_NAME": "TeaParty",
    "DATABASE_URL": "postgres://u:db-password@h/d",
    "SENTRY_DSN": "https://dsn-public@o1.ingest.sentry.io/2",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/slack-hook",
    "X_PW": "x-password",
    "NPM_TOKEN": "npm-token-for-setup",
    "ANTHROPIC_API_KEY": "sk-ant-model-key",
    "HTTPS_PROXY": "http://proxy:3128",
}


def test_agents_get_the_locale_terminal_and_identity_and_nothing_else() -> None:
    env = agent_env(ENGINE, sandbox=OFF)
    given = {"LANG", "LC_TIME", "TERM", "TZ", "GIT_AUTHOR_NAME"}
    fixed = {"PATH", "GIT_TERMINAL_PROMPT", "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_PARAMETERS"}
    assert set(env) == given | fixed
    assert {name: env[name] for name in given} == {name: ENGINE[name] for name in given}


def test_a_kept_variable_that_holds_a_secret_is_dropped() -> None:
    env = agent_env({**ENGINE, "TERM": f"x{ENGINE['NPM_TOKEN']}"}, sandbox=OFF)
    assert "TERM" not in env


def test_the_allowlists_never_take_a_secret_named_variable() -> None:
    assert engine_keeps("PYTHONPATH")
    assert engine_keeps("LC_ALL")
    assert not engine_keeps("PYTHON_KEYRING_PASSWORD")
    assert not engine_keeps("DATABASE_URL")
    assert agent_gets("LC_MESSAGES")
    assert not agent_gets("LC_TOKEN")
    assert not agent_gets("HTTPS_PROXY"), "the sandbox sets its own proxy, or none"


def test_the_operator_names_setup_secrets_and_a_setup_gets_only_those() -> None:
    names = setup_secret_names({SETUP_SECRETS: " NPM_TOKEN, DATABASE_URL,,NPM_TOKEN "})
    assert names == ("NPM_TOKEN", "DATABASE_URL")
    env = setup_env({**ENGINE, "UNSET_ONE": ""}, (*names, "UNSET_ONE"), sandbox=OFF)
    assert env == agent_env(ENGINE, sandbox=OFF) | {
        "NPM_TOKEN": ENGINE["NPM_TOKEN"],
        "DATABASE_URL": ENGINE["DATABASE_URL"],
    }
    assert "ANTHROPIC_API_KEY" not in env
    assert setup_secret_names({}) == ()


@pytest.mark.parametrize(
    "name",
    [
        "GITHUB_APP_PRIVATE_KEY",
        "GITHUB_APP_PRIVATE_KEY_PATH",
        "GITHUB_WEBHOOK_SECRET",
        "ANTHROPIC_API_KEY",
        "GITHUB_TOKEN",
        "ACTIONS_RUNTIME_TOKEN",
        "TEAPARTY_SECRETS_FD",
        "TEAPARTY_HOME",
    ],
)
def test_the_apps_own_credentials_are_refused_by_name(name: str) -> None:
    with pytest.raises(SettingsError) as refused:
        setup_secret_names({SETUP_SECRETS: f"NPM_TOKEN,{name}"})
    (problem,) = refused.value.problems
    assert problem.startswith(f"{SETUP_SECRETS}: {name} is one of the App's own")
    with pytest.raises(SandboxError, match=name):  # and the engine holds to it on its own
        setup_env(ENGINE, ("NPM_TOKEN", name), sandbox=OFF)


def test_a_name_that_is_no_variable_is_refused() -> None:
    with pytest.raises(SettingsError, match="'NPM TOKEN' is not a variable name"):
        setup_secret_names({SETUP_SECRETS: "NPM TOKEN"})


def test_serve_and_runner_mode_list_a_refused_name_with_their_other_problems(
    tmp_path: Path,
) -> None:
    with pytest.raises(SettingsError) as served:
        Settings.from_env({SETUP_SECRETS: "GITHUB_TOKEN"}, home=tmp_path)
    assert f"{SETUP_SECRETS}: GITHUB_TOKEN is one of the App's own credentials or settings" in (
        served.value.problems
    )
    with pytest.raises(SettingsError) as run:
        ActionEnv.from_env({SETUP_SECRETS: "ANTHROPIC_API_KEY"}, home=tmp_path)
    assert any(p.startswith(f"{SETUP_SECRETS}: ANTHROPIC_API_KEY") for p in run.value.problems)
    assert any(p.startswith("GITHUB_EVENT_NAME") for p in run.value.problems)


def test_known_secrets_are_secret_named_values_setup_secrets_and_what_the_edge_adds() -> None:
    known = KnownSecrets.of(ENGINE, setup=("DATABASE_URL",))
    key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1\nshort\n-----END RSA PRIVATE KEY-----"
    known.add(key, "GITHUB_APP_PRIVATE_KEY")
    known.add("ghs_minted", "an installation token")
    assert known.values() == {
        ENGINE["NPM_TOKEN"]: "NPM_TOKEN",
        ENGINE["ANTHROPIC_API_KEY"]: "ANTHROPIC_API_KEY",
        ENGINE["DATABASE_URL"]: "DATABASE_URL",
        "MIIEowIBAAKCAQEA1": "GITHUB_APP_PRIVATE_KEY",  # a line of it: a diff shows lines
        "ghs_minted": "an installation token",
    }
    assert known.setup == ("DATABASE_URL",)


def test_a_value_is_masked_to_a_short_prefix_and_its_length() -> None:
    assert mask("ghp_" + "a" * 36) == "ghp_…(40 characters)"
    assert mask("short-secret") == "…(12 characters)"
