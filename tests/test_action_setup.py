"""`teaparty action` and a repository's `setup:` in runner mode: the run names what its setup
cache holds (`setup-key` in GITHUB_OUTPUT), so the workflow saves the cache with
actions/cache only under a name no run saved before; the next run, on a fresh machine with
that cache restored at the same path, reuses the environment and names it the same."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from action_harness import NO_PLAN, act, labelled, last, runner_hub
from app_harness import OWNER, REPO, bodies

from bot.runner.env import ActionEnv
from orchestrator.api import cache_snapshot_key

pytestmark = pytest.mark.timeout(180)
SECRET = "index-password-0123456789"
SETUP = NO_PLAN + (
    "setup:\n"
    '  commands: ["mkdir -p out", "printf %s \\"$INDEX_PASSWORD\\" > out/seen"]\n'
    "  secrets: [INDEX_PASSWORD]\n"
)


def outputs(path: Path) -> dict[str, str]:
    """The step's outputs as GitHub reads GITHUB_OUTPUT (`name=value` lines)."""
    if not path.exists():
        return {}
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def entries(home: Path) -> list[Path]:
    """The prepared environments in the setup cache under `home`."""
    return sorted(path.parent for path in (home / "setup").glob("github/*/*/*/outcome.json"))


def fresh_machine(home: Path) -> None:
    """A runner's next machine: nothing of `home` but what actions/cache restored."""
    for path in home.iterdir():
        if path.name != "setup":
            shutil.rmtree(path) if path.is_dir() else path.unlink()


async def test_a_run_names_its_setup_cache_and_the_next_run_reuses_it(tmp_path: Path) -> None:
    hub = runner_hub(tmp_path)
    home = tmp_path / "runner-temp" / "teaparty"  # the same path every run, as on a runner
    given = {"TEAPARTY_HOME": str(home), "TEAPARTY_SETUP_SECRETS": "INDEX_PASSWORD"}
    async with hub.serve() as api_url:
        await hub.push_to_branch(OWNER, REPO, "main", "alice", {".teaparty/project.yaml": SETUP})
        first = await labelled(hub, "Add a changelog", "Please.")
        out = tmp_path / "first.out"
        run = await act(
            hub,
            api_url,
            tmp_path,
            "issues",
            last(hub, "issues"),
            **given,
            GITHUB_OUTPUT=str(out),
            INDEX_PASSWORD=SECRET,
        )
        assert run.code == 0, run.output
        key = outputs(out).get("setup-key", "")
        assert re.fullmatch(r"[0-9a-f]{32}", key), run.output
        (entry,) = entries(home)
        # runner mode gives setup the operator's setup secrets, as serve does
        assert (entry / "work" / "out" / "seen").read_text() == SECRET
        (tracking,) = bodies(hub, first, "job:")
        assert SECRET not in run.output + run.summary + tracking

        fresh_machine(home)
        await labelled(hub, "Add a contributing guide", "Please.")
        out = tmp_path / "second.out"
        run = await act(
            hub, api_url, tmp_path, "issues", last(hub, "issues"), **given, GITHUB_OUTPUT=str(out)
        )
        assert run.code == 0, run.output
        assert outputs(out) == {"setup-key": key}  # the same cache: the workflow saves nothing
        assert entries(home) == [entry], "the restored environment was prepared again"
        (record,) = (home / "repos").glob("github/*/*/jobs/job-2--*/setup.json")
        assert json.loads(record.read_text())["reused"] is True
        assert len(hub.pulls(OWNER, REPO)) == 2, run.output
    assert hub.violations == [], hub.violations


async def test_a_run_of_a_project_without_setup_names_no_setup_cache(tmp_path: Path) -> None:
    hub = runner_hub(tmp_path)
    async with hub.serve() as api_url:
        await hub.push_to_branch(OWNER, REPO, "main", "alice", {".teaparty/project.yaml": NO_PLAN})
        await labelled(hub, "Add a changelog", "Please.")
        out = tmp_path / "run.out"
        run = await act(
            hub, api_url, tmp_path, "issues", last(hub, "issues"), GITHUB_OUTPUT=str(out)
        )
        assert run.code == 0, run.output
        assert hub.pulls(OWNER, REPO), run.output
        assert outputs(out) == {}  # the workflow's save step is skipped


def indexed(root: Path, repository: str, key: str, *, entry: bool = True) -> None:
    """An index of `key` for `repository` under the cache `root`, with its entry unless not."""
    folder = root / repository
    work = folder / f"{key}-0123abcd" / "work"
    work.mkdir(parents=True)
    (folder / f"{key}.json").write_text(json.dumps({"root": str(work)}))
    if not entry:
        shutil.rmtree(work.parent)


def test_the_cache_is_named_by_the_keys_it_holds(tmp_path: Path) -> None:
    one, other = tmp_path / "one", tmp_path / "other"
    assert cache_snapshot_key(one) is None  # no cache at all
    indexed(one, "github/octo/a", "a" * 32)
    named = cache_snapshot_key(one)
    assert named is not None
    assert re.fullmatch(r"[0-9a-f]{32}", named)
    indexed(other, "github/octo/a", "a" * 32)
    assert cache_snapshot_key(other) == named  # the same keys, wherever the cache is
    indexed(one, "github/octo/a", "b" * 32)  # a key file changed: a new environment
    indexed(one, "github/octo/a", "c" * 32, entry=False)  # evicted: its index is stale
    (one / "github" / "octo" / "a" / ("d" * 32 + ".lock")).touch()  # preparing, never done
    indexed(other, "github/octo/a", "b" * 32)
    assert cache_snapshot_key(one) == cache_snapshot_key(other) != named


def test_the_engine_gets_path_the_cache_bound_and_setup_secrets_alone(tmp_path: Path) -> None:
    environ = {
        "GITHUB_EVENT_NAME": "issues",
        "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
        "GITHUB_REPOSITORY": "octo/repo",
        "GITHUB_RUN_ID": "9",
        "GITHUB_TOKEN": "ghs_run_token_value",
        "ANTHROPIC_API_KEY": "sk-ant-value",
        "PATH": "/opt/hostedtoolcache/Python/3.12.10/x64/bin:/usr/bin:/bin",
        "TEAPARTY_SETUP_CACHE_MB": "2048",
        "TEAPARTY_SETUP_SECRETS": "INDEX_PASSWORD,UNSET_ONE",
        "INDEX_PASSWORD": SECRET,
        "DATABASE_URL": "postgres://user:pw@db/x",
        "GITHUB_OUTPUT": str(tmp_path / "output"),
    }
    env = ActionEnv.from_env(environ, home=tmp_path)
    assert env.output_path == tmp_path / "output"
    assert env.engine_env == {
        "PATH": environ["PATH"],
        "TEAPARTY_SETUP_CACHE_MB": "2048",
        "INDEX_PASSWORD": SECRET,
    }
