"""Runner mode's packaging: every workflow and action file is valid for GitHub, and each holds
what issue 16 asks of it (pins, least permissions, one run per issue without cancelling, the
caller and the reusable workflow agreeing with each other and with the package).

Validity is SchemaStore's github-workflow and github-action JSON Schemas, as vendored by
check-jsonschema (the `test` extra). actionlint would check more (expressions, contexts), but
no PyPI package installs it without downloading its binary from GitHub at build time, and its
latest release (1.7.12) does not know `concurrency.queue` (rhysd/actionlint#657). What the
schemas cannot see, the tests below check themselves.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from action_harness import TOKEN_PERMISSIONS
from workflow_files import CALLER, COMPOSITE, REUSABLE, ROOT, TEAPARTY_STEP, WORKFLOWS, load, step

from bot.errors import SettingsError
from bot.runner.env import ActionEnv

ACTION_ENV = {
    "GITHUB_TOKEN",
    "GITHUB_APP_ID",
    "GITHUB_APP_PRIVATE_KEY",
    "ANTHROPIC_API_KEY",
    "TEAPARTY_TIMEOUT_MINUTES",
    "TEAPARTY_HOME",
    "TEAPARTY_SETUP_CACHE_MB",
}
RUN_TEAPARTY = '"$RUNNER_TEMP/teaparty-venv/bin/teaparty" action'  # its own virtualenv's
PERMISSIONS = {
    "contents": "write",
    "issues": "write",
    "pull-requests": "write",
    "actions": "write",
    "checks": "write",
}
TIMEOUT = "${{ inputs.timeout-minutes }}"


def schema_check(schema: str, path: Path) -> subprocess.CompletedProcess[str]:
    """check-jsonschema against one of its vendored schemas; it needs no network for these."""
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_workflow_is_valid_for_github(path: Path) -> None:
    done = schema_check("vendor.github-workflows", path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_composite_action_is_valid_for_github() -> None:
    done = schema_check("vendor.github-actions", COMPOSITE)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("old", "new", "complaint"),
    [
        ("\n      queue: max\n", "\n      queue: maxx\n", "'maxx' is not one of"),
        ("\n      queue: max\n", "\n      queue: max\n      cancel-after: 5\n", "'cancel-after'"),
        ("\n    runs-on: ", "\n    runs_on: ", "'runs-on' is a required property"),
    ],
    ids=["a queue GitHub does not know", "a key it does not know", "a misspelt key"],
)
def test_the_schema_check_refuses_what_github_refuses(
    tmp_path: Path, old: str, new: str, complaint: str
) -> None:
    text = REUSABLE.read_text(encoding="utf-8")
    assert text.count(old) == 1
    broken = tmp_path / "teaparty.yml"
    broken.write_text(text.replace(old, new), encoding="utf-8")
    done = schema_check("vendor.github-workflows", broken)
    assert done.returncode == 1
    assert complaint in done.stdout + done.stderr


def test_no_workflow_runs_on_pull_request_target() -> None:
    # it would give a fork's pull request the secrets and a write token
    for path in WORKFLOWS:
        assert "pull_request_target" not in load(path)["on"], path


def the_job() -> dict[str, Any]:
    jobs = load(REUSABLE)["jobs"]
    assert list(jobs) == ["teaparty"]
    job: dict[str, Any] = jobs["teaparty"]
    return job


def test_the_reusable_workflow_asks_for_least_permissions_and_never_cancels() -> None:
    workflow, job = load(REUSABLE), the_job()
    assert list(workflow["on"]) == ["workflow_call"]
    assert workflow["permissions"] == {}
    assert job["permissions"] == PERMISSIONS
    # one group per issue or pull request (a CI run's too); a continuation (no number) gets its own
    assert job["concurrency"] == {
        "group": "teaparty-${{ github.event.issue.number"
        " || github.event.pull_request.number"
        " || github.event.workflow_run.pull_requests[0].number || github.run_id }}",
        "queue": "max",
    }
    assert "cancel-in-progress" not in REUSABLE.read_text(encoding="utf-8").replace(
        "Never cancel-in-progress", ""
    )


def test_the_time_limit_is_one_number_for_github_and_the_engine() -> None:
    timeout = load(REUSABLE)["on"]["workflow_call"]["inputs"]["timeout-minutes"]
    assert (timeout["type"], timeout["default"]) == ("number", 345)  # 5 h 45 min, under 6 h
    job = the_job()
    assert job["timeout-minutes"] == TIMEOUT
    assert step(job["steps"], TEAPARTY_STEP)["env"]["TEAPARTY_TIMEOUT_MINUTES"] == TIMEOUT
    composite = load(COMPOSITE)
    assert composite["inputs"]["timeout-minutes"]["default"] == "345"


def test_the_steps_run_teaparty_action_with_what_it_reads() -> None:
    for steps in (the_job()["steps"], load(COMPOSITE)["runs"]["steps"]):
        assert step(steps, TEAPARTY_STEP)["run"] == RUN_TEAPARTY
        assert set(step(steps, TEAPARTY_STEP)["env"]) == ACTION_ENV
    # GitHub refuses secret names that start with GITHUB_
    secrets = load(REUSABLE)["on"]["workflow_call"]["secrets"]
    assert not [name for name in secrets if name.upper().startswith("GITHUB_")]
    assert secrets["ANTHROPIC_API_KEY"] == {"required": True}


def test_teaparty_action_reads_the_environment_the_step_gives_it(tmp_path: Path) -> None:
    # GitHub's own variables, then the step's env as GitHub fills it: an unset secret is ''
    given = {
        "GITHUB_EVENT_NAME": "issues",
        "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
        "GITHUB_REPOSITORY": "octo/repo",
        "GITHUB_RUN_ID": "9",
    }
    step_env = dict.fromkeys(step(the_job()["steps"], TEAPARTY_STEP)["env"], "")
    environ = given | step_env | {"GITHUB_TOKEN": "ghs_run", "TEAPARTY_TIMEOUT_MINUTES": "345"}
    env = ActionEnv.from_env(environ, home=tmp_path)
    assert (env.token, env.app_mode, env.timeout_s) == ("ghs_run", False, 345 * 60)
    app = environ | {"GITHUB_APP_ID": "42", "GITHUB_APP_PRIVATE_KEY": "-----BEGIN"}
    assert ActionEnv.from_env(app, home=tmp_path).app_mode
    short = environ | {"TEAPARTY_TIMEOUT_MINUTES": "10"}  # each run would park and go again
    with pytest.raises(SettingsError, match="TEAPARTY_TIMEOUT_MINUTES is 10: a run starts no work"):
        ActionEnv.from_env(short, home=tmp_path)


def test_the_end_to_end_runs_use_the_token_this_workflow_asks_for() -> None:
    # tests/test_action.py plays workflow runs with a stand-in token of these permissions
    asked = {name.replace("-", "_"): level for name, level in PERMISSIONS.items()}
    assert TOKEN_PERMISSIONS == asked | {"metadata": "read"}  # every GITHUB_TOKEN reads metadata


def test_the_caller_passes_what_the_reusable_workflow_declares() -> None:
    caller = load(CALLER)
    (job,) = caller["jobs"].values()
    assert re.fullmatch(r"[^/\s]+/[^/\s]+/\.github/workflows/teaparty\.yml@\S+", job["uses"])
    call = load(REUSABLE)["on"]["workflow_call"]
    passed, declared = set(job.get("secrets", {})), call["secrets"]
    required = {name for name, spec in declared.items() if spec.get("required")}
    assert required <= passed <= set(declared)
    assert set(job.get("with", {})) <= set(call["inputs"])
    # a called workflow's token can only be narrowed: the caller must grant these exactly
    assert caller["permissions"] == {}
    assert job["permissions"] == PERMISSIONS


def versions() -> tuple[str, str]:
    """The package's name and version from pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return project["name"], project["version"]


def test_python_and_teaparty_are_pinned_to_exact_versions() -> None:
    name, version = versions()
    workflow, composite = load(REUSABLE)["on"]["workflow_call"]["inputs"], load(COMPOSITE)["inputs"]
    assert workflow["teaparty"]["default"] == f"{name}=={version}"
    assert composite["teaparty"]["default"] == ""  # its own source, at the sha `uses:` names
    for declared in (workflow, composite):
        assert re.fullmatch(r"3\.(1[1-9])\.\d+", declared["python-version"]["default"])


def install(tmp_path: Path, requirement: str, action_path: Path | None) -> tuple[int, str, str]:
    """The install step's script as GitHub runs it, with nothing on PATH and stand-ins for
    setup-python's interpreter and the virtualenv it makes; its exit code, output, and what
    the virtualenv's pip was asked to install."""
    bin_dir, nothing = tmp_path / "bin", tmp_path / "nothing"
    fake_pythons(bin_dir)
    nothing.mkdir(exist_ok=True)
    env = {
        "TEAPARTY_REQUIREMENT": requirement,
        "TEAPARTY_PYTHON": str(bin_dir / "base-python"),
        "RUNNER_TEMP": str(tmp_path / "temp"),
    }
    if action_path is not None:
        env["GITHUB_ACTION_PATH"] = str(action_path)
    done = run_script(step_script("Install TeaParty (an exact version)"), nothing, **env)
    pip = [call.removeprefix("venv-python ") for call in calls(bin_dir) if "venv-python " in call]
    return done.returncode, done.stdout, pip[0] if pip else ""


def fake_pythons(bin_dir: Path) -> None:
    """`base-python` (setup-python's, by its path): `-m venv --clear DIR` makes DIR/bin/python,
    a link to `venv-python`; both record their arguments (see `fake`)."""
    fake(bin_dir, "venv-python", "exit 0")
    link = f'/bin/mkdir -p "$4/bin" && /bin/ln -sf "{bin_dir}/venv-python" "$4/bin/python"'
    fake(bin_dir, "base-python", f'[ "$1 $2 $3" = "-m venv --clear" ] && {link}')


def test_the_composite_action_installs_its_own_source_when_no_version_is_given(
    tmp_path: Path,
) -> None:
    code, _, args = install(tmp_path, "", ROOT / ".github" / "actions" / "teaparty")
    assert code == 0
    # the repository (its pyproject.toml) at the commit `uses:` named
    assert args == f"-m pip install --disable-pip-version-check --no-input {ROOT}", args


@pytest.mark.parametrize(
    ("requirement", "action_path", "complaint"),
    [
        ("", None, "teaparty must be pinned"),  # the reusable workflow: no action path
        ("teaparty-github", None, "teaparty must be pinned"),
        ("teaparty-github>=0.1", None, "teaparty must be pinned"),
        ("", "elsewhere", "no pyproject.toml at"),
    ],
)
def test_the_install_step_refuses_what_is_not_pinned(
    tmp_path: Path, requirement: str, action_path: str | None, complaint: str
) -> None:
    where = None if action_path is None else tmp_path / action_path / "a" / "b"
    if where is not None:
        where.mkdir(parents=True)
    code, out, args = install(tmp_path, requirement, where)
    assert (code, args) == (1, "")
    assert out.startswith("::error::"), out
    assert complaint in out, out


def test_the_install_step_installs_an_exact_pin(tmp_path: Path) -> None:
    name, version = versions()
    assert install(tmp_path, f"{name}=={version}", None)[::2] == (
        0,
        f"-m pip install --disable-pip-version-check --no-input {name}=={version}",
    )


@pytest.mark.parametrize("path", [REUSABLE, COMPOSITE], ids=["workflow", "composite"])
def test_every_action_used_is_pinned_to_a_commit_and_names_its_version(path: Path) -> None:
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    used = [line for line in lines if re.match(r"(- )?uses: ", line)]
    assert len(used) == 4  # checkout, setup-python, and the setup cache's restore and save
    for line in used:
        assert re.fullmatch(
            r"(- )?uses: [\w.-]+/[\w.-]+(/[\w.-]+)?@[0-9a-f]{40}  # v\d+\.\d+\.\d+", line
        )


def test_the_composite_action_runs_the_workflows_steps() -> None:
    ours, theirs = the_job()["steps"], load(COMPOSITE)["runs"]["steps"]
    assert len(ours) == len(theirs)
    for one, twin in zip(ours, theirs, strict=True):
        assert (one.get("uses"), one.get("with")) == (twin.get("uses"), twin.get("with"))
        assert (one.get("name"), one.get("run")) == (twin.get("name"), twin.get("run"))
        assert one.get("id") == twin.get("id")
        if not one.get("uses", "").startswith("actions/checkout@"):  # the action's is optional
            assert one.get("if") == twin.get("if")
        assert set(one.get("env", {})) == set(twin.get("env", {}))


def test_no_script_interpolates_an_expression() -> None:
    # `${{ }}` in a script is pasted into the shell before it runs: values go through env
    for steps in (the_job()["steps"], load(COMPOSITE)["runs"]["steps"]):
        assert [each for each in steps if "${{" in each.get("run", "")] == []


def step_script(name: str) -> str:
    (script,) = [each["run"] for each in the_job()["steps"] if each.get("name") == name]
    return str(script)


def run_script(script: str, bin_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """A step's script as GitHub runs `shell: bash`, with only `bin_dir` on PATH."""
    bash = shutil.which("bash")
    assert bash is not None
    return subprocess.run(
        [bash, "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        env={"PATH": str(bin_dir), **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def fake(bin_dir: Path, name: str, body: str) -> None:
    """A stand-in command that appends its arguments to bin_dir/calls, then runs `body`."""
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(f'#!/bin/sh\necho "{name} $*" >> "{bin_dir}/calls"\n{body}\n')
    path.chmod(0o755)


def calls(bin_dir: Path) -> list[str]:
    log = bin_dir / "calls"
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize(
    ("requirement", "installs"),
    [
        ("teaparty-github==0.1.0", True),
        ("teaparty-github @ git+https://example.invalid/teaparty.git@0123abc", True),
        ("teaparty-github", False),
        ("teaparty-github>=0.1", False),
    ],
)
def test_only_a_pinned_teaparty_is_installed_in_a_virtualenv_of_its_own(
    tmp_path: Path, requirement: str, installs: bool
) -> None:
    code, out, _ = install(tmp_path, requirement, None)
    assert (code == 0) is installs, out
    venv = tmp_path / "temp" / "teaparty-venv"  # under $RUNNER_TEMP, never on PATH
    want = [
        f"base-python -m venv --clear {venv}",
        f"venv-python -m pip install --disable-pip-version-check --no-input {requirement}",
    ]
    assert calls(tmp_path / "bin") == (want if installs else [])
    assert installs or "::error::teaparty must be pinned" in out


SETTING = "kernel.apparmor_restrict_unprivileged_userns"
SYSCTL = '[ "$1" = -n ] && { [ -n "$RESTRICTED" ] && echo "$RESTRICTED" || exit 255; }; exit 0'
SUDO = 'shift; exec "$@"'  # past -n, then the command


@pytest.mark.parametrize(
    ("restricted", "sudo", "expected_calls", "says"),
    [
        (
            "1",
            SUDO,
            [f"sysctl -n {SETTING}", f"sudo -n sysctl -w {SETTING}=0", f"sysctl -w {SETTING}=0"],
            "User namespaces allowed",
        ),
        ("1", "exit 1", [f"sysctl -n {SETTING}", f"sudo -n sysctl -w {SETTING}=0"], "::notice::"),
        ("1", None, [f"sysctl -n {SETTING}"], "::notice::"),  # no sudo at all
        ("0", SUDO, [f"sysctl -n {SETTING}"], ""),  # nothing to lift
        ("", SUDO, [f"sysctl -n {SETTING}"], ""),  # a kernel without the setting
    ],
    ids=["lifted", "sudo refuses", "no sudo", "not restricted", "no such setting"],
)
def test_lifting_the_user_namespace_restriction_never_fails_the_run(
    tmp_path: Path, restricted: str, sudo: str | None, expected_calls: list[str], says: str
) -> None:
    fake(tmp_path, "sysctl", SYSCTL)
    if sudo is not None:
        fake(tmp_path, "sudo", sudo)
    done = run_script(
        step_script("Let the sandbox use user namespaces"), tmp_path, RESTRICTED=restricted
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls(tmp_path) == expected_calls
    assert says in done.stdout
    if not says:
        assert done.stdout == ""
