"""Runner mode and the environment agents work in (issue 28): TeaParty's own Python never
shadows the caller's, the environments `setup:` prepared are restored before `teaparty action`
and saved after it under the name it gives, and the example composite caller prepares a
Python project's test dependencies before the action."""

from __future__ import annotations

import re
from typing import Any

import pytest
from workflow_files import (
    CALLER,
    COMPOSITE,
    COMPOSITE_CALLER,
    REUSABLE,
    TEAPARTY_STEP,
    load,
    step,
)

from orchestrator.setup.cache import BOUND_VARIABLE, bound_from_env

PREFIX = "teaparty-setup-${{ runner.os }}-${{ runner.arch }}-"  # the newest copy comes back
CACHE_PATH = "${{ runner.temp }}/teaparty/setup"
SETUP_KEY = "steps.teaparty.outputs.setup-key"
SAVE_IF = (
    f"{SETUP_KEY} != '' && !endsWith(steps.setup-cache.outputs.cache-matched-key, {SETUP_KEY})"
)
ACTION_USES = re.compile(r"[^/\s]+/[^/\s]+/\.github/actions/teaparty@\S+")


def steps_of(name: str) -> list[dict[str, Any]]:
    if name == "workflow":
        (job,) = load(REUSABLE)["jobs"].values()
        return list(job["steps"])
    return list(load(COMPOSITE)["runs"]["steps"])


BOTH = pytest.mark.parametrize("name", ["workflow", "composite"])


@BOTH
def test_teapartys_python_is_never_put_on_path(name: str) -> None:
    steps = steps_of(name)
    python = step(steps, "python")
    assert python["uses"].startswith("actions/setup-python@")
    # setup-python would otherwise prepend its Python to PATH (and set LD_LIBRARY_PATH,
    # pythonLocation): the agents would find it, and TeaParty's packages, before the caller's
    assert python["with"]["update-environment"] in (False, "false")
    (install,) = [each for each in steps if each.get("name", "").startswith("Install TeaParty")]
    assert install["env"]["TEAPARTY_PYTHON"] == "${{ steps.python.outputs.python-path }}"
    for each in steps:  # nothing adds to PATH or the job's environment for later steps
        assert "GITHUB_PATH" not in each.get("run", "")
        assert "GITHUB_ENV" not in each.get("run", "")
    assert step(steps, TEAPARTY_STEP)["run"].startswith('"$RUNNER_TEMP/teaparty-venv/bin/')


@BOTH
def test_the_prepared_environments_are_restored_before_the_run_and_saved_after(
    name: str,
) -> None:
    steps = steps_of(name)
    restore, run = step(steps, "setup-cache"), step(steps, TEAPARTY_STEP)
    (save,) = [each for each in steps if each.get("uses", "").startswith("actions/cache/save@")]
    assert steps.index(restore) < steps.index(run) < steps.index(save)
    # where the engine keeps them: their records hold absolute paths
    assert run["env"]["TEAPARTY_HOME"] + "/setup" == CACHE_PATH
    assert restore["with"]["path"] == save["with"]["path"] == CACHE_PATH
    assert restore["uses"].startswith("actions/cache/restore@")
    assert restore["uses"].split("@")[1] == save["uses"].split("@")[1]  # one release of both
    # no copy is ever saved under the run's own key: the newest copy comes back by its prefix
    assert restore["with"]["key"] == PREFIX + "run-${{ github.run_id }}"
    assert restore["with"]["restore-keys"] == PREFIX
    # saved under the name `teaparty action` gives what the cache holds, only when there is
    # one (a project with setup) and it is not the copy that came back
    assert save["with"]["key"] == PREFIX + "${{ " + SETUP_KEY + " }}"
    assert save["if"] == SAVE_IF


def test_the_cache_bound_is_small_by_default_and_reaches_the_engine() -> None:
    workflow_input = load(REUSABLE)["on"]["workflow_call"]["inputs"]["setup-cache-mb"]
    assert (workflow_input["type"], workflow_input["default"]) == ("number", 2048)
    assert load(COMPOSITE)["inputs"]["setup-cache-mb"]["default"] == "2048"
    assert bound_from_env({BOUND_VARIABLE: "2048"}) == 2048
    for name in ("workflow", "composite"):
        run = step(steps_of(name), TEAPARTY_STEP)
        assert run["env"][BOUND_VARIABLE] == "${{ inputs.setup-cache-mb }}"


def the_example() -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """The composite caller's job, its steps, and where the action is among them."""
    (job,) = load(COMPOSITE_CALLER)["jobs"].values()
    steps: list[dict[str, Any]] = job["steps"]
    (at,) = [i for i, each in enumerate(steps) if ACTION_USES.fullmatch(each.get("uses", ""))]
    return job, steps, at


def test_the_composite_example_prepares_a_python_projects_tests_before_the_action() -> None:
    job, steps, at = the_example()
    before = steps[:at]
    (python,) = [each for each in before if each.get("uses", "").startswith("actions/setup-")]
    assert python["uses"] == step(steps_of("composite"), "python")["uses"]  # the same pin
    assert python["with"].get("update-environment", True) not in (False, "false")  # on PATH
    installs = [each["run"] for each in before if "pip install" in each.get("run", "")]
    assert installs == ["python -m pip install --editable '.[test]'"]
    # the caller checked out (without leaving its token in .git/config): the action does not
    (checkout,) = [each for each in before if each.get("uses", "").startswith("actions/checkout@")]
    assert checkout["with"]["persist-credentials"] is False
    action = steps[at]
    assert action["with"]["checkout"] == "false"
    assert steps[at + 1 :] == []


def test_the_composite_example_passes_what_the_action_declares() -> None:
    job, steps, at = the_example()
    given, declared = steps[at]["with"], load(COMPOSITE)["inputs"]
    required = {name for name, spec in declared.items() if spec.get("required")}
    assert required <= set(given) <= set(declared)
    assert given["anthropic-api-key"] == "${{ secrets.ANTHROPIC_API_KEY }}"
    # one number for GitHub and the engine; what an action cannot set, the job does
    assert job["timeout-minutes"] == given["timeout-minutes"] == 345
    assert job["permissions"] == load(CALLER)["jobs"]["teaparty"]["permissions"]
    assert load(COMPOSITE_CALLER)["permissions"] == {}
    (workflow_job,) = load(REUSABLE)["jobs"].values()
    assert job["concurrency"] == workflow_job["concurrency"]
    # the same events, and the same `if:` the caller's tests try against real payloads
    assert load(COMPOSITE_CALLER)["on"] == load(CALLER)["on"]
    assert job["if"] == load(CALLER)["jobs"]["teaparty"]["if"]
