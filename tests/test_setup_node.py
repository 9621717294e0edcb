"""A package.json project's setup, prepared once in the sandbox and used by a task's shell,
under every sandbox this host gives: `npm ci --offline` installs a package from a tarball
the repository holds (no registry is reached), its tests (`npm test`, `node --test`)
require it, and the package's command is on the task's PATH from node_modules/.bin."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import confined, hand_to_agents
from local_repo import git, make_repo

from orchestrator.config.schema import SetupSettings
from orchestrator.sandbox.confine import Place, Sandbox
from orchestrator.setup.cache import SetupCache
from orchestrator.setup.prepare import Outcome, Preparer
from orchestrator.workspace.shell import agent_env

NODE = shutil.which("node", path="/usr/local/bin:/usr/bin:/bin")
NPM = shutil.which("npm", path="/usr/local/bin:/usr/bin:/bin")
pytestmark = pytest.mark.skipif(
    NODE is None or NPM is None, reason="node and npm are not on this host (/usr/bin, /bin)"
)
PATH = "/usr/local/bin:/usr/bin:/bin"
SETUP = SetupSettings(
    commands=("npm ci --offline --no-audit --no-fund",),
    key_files=("package-lock.json",),
    test="npm test",
)
TINY = {
    "package.json": json.dumps(
        {"name": "tiny", "version": "1.0.0", "main": "index.js", "bin": {"tiny": "bin.js"}}
    ),
    "index.js": "exports.triple = (x) => 3 * x;\n",
    "bin.js": "#!/usr/bin/env node\n"
    "console.log('tiny', require('./index.js').triple(+process.argv[2]));\n",
}
APP = {
    "name": "app",
    "version": "1.0.0",
    "private": True,
    "scripts": {"test": "node --test"},
    "dependencies": {"tiny": "file:vendor/tiny-1.0.0.tgz"},
}
TEST = """const test = require("node:test");
const assert = require("node:assert");
const { triple } = require("tiny");

test("triple", () => {
  assert.strictEqual(triple(2), 6);
});
"""


def npm(folder: Path, *args: str, home: Path) -> None:
    """The host's npm in `folder`, offline, its cache and HOME under `home`."""
    env = {"PATH": PATH, "HOME": str(home), "npm_config_cache": str(home / "npm-cache")}
    done = subprocess.run(
        [str(NPM), *args, "--offline", "--no-audit", "--no-fund"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def node_project(repo: Path, scratch: Path) -> str:
    """A repository whose tests need `tiny`, packed into vendor/ and locked; the commit."""
    tiny = scratch / "tiny"
    tiny.mkdir(parents=True)
    for name, text in TINY.items():
        (tiny / name).write_text(text)
    (repo / "vendor").mkdir()
    npm(tiny, "pack", "--pack-destination", str(repo / "vendor"), home=scratch)
    (repo / "package.json").write_text(json.dumps(APP, indent=2) + "\n")
    npm(repo, "install", "--package-lock-only", home=scratch)
    (repo / "test").mkdir()
    (repo / "test" / "tiny.test.js").write_text(TEST)
    (repo / ".gitignore").write_text("node_modules/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "app")
    return git(repo, "rev-parse", "HEAD").strip()


def left_behind(path: Path) -> list[str]:
    """What `path` in a worktree holds between calls (bubblewrap's mount point stays there,
    empty; Landlock's symlink is removed)."""
    if path.is_symlink():
        return [f"a symlink to {os.readlink(path)}"]
    return sorted(p.name for p in path.iterdir()) if path.is_dir() else []


@pytest.fixture(params=["bwrap", "landlock"])
def setting(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Sandbox, Path, Path]]:
    """A sandbox, a task's worktree its agents own, and the state directory beside it."""
    for found, work in confined(request.param, f"setup-node-{tmp_path.name}"):
        yield found, work, work.parent


async def shell(sandbox: Sandbox, work: Path, outcome: Outcome, command: str) -> tuple[int, str]:
    """A command in the task's shell, with the prepared environment; exit code and output."""
    env = agent_env({"PATH": PATH, "LANG": "C.UTF-8"}, sandbox=sandbox)
    place = Place(work, writable=True, run_as=sandbox.run_as, prepared=outcome.prepared())
    done = await sandbox.run(command, place=place, env=env, timeout_s=120, cap=20_000)
    return -1 if done.returncode is None else done.returncode, done.output.text()


async def test_a_task_runs_npm_test_with_the_vendored_package(
    setting: tuple[Sandbox, Path, Path], tmp_path: Path
) -> None:
    sandbox, work, home = setting
    repo = make_repo(tmp_path / "app")
    base = node_project(repo, tmp_path / "scratch")
    preparer = Preparer(
        sandbox,
        SetupCache(home / "setup", bound_mb=1024),
        parent_env={"PATH": PATH, "LANG": "C.UTF-8"},
        owner=lambda _: sandbox.run_as,
    )
    outcome = await preparer.prepare(name="octo/app", repo=repo / ".git", base=base, setup=SETUP)
    assert outcome.ok, "\n".join(f"{s.command}: {s.exit_code}\n{s.tail}" for s in outcome.steps)
    assert outcome.paths == ("node_modules",)
    assert outcome.bin == ("node_modules/.bin",)
    assert outcome.skipped == (), "npm's cache and logs stay in the sandbox's HOME"
    shutil.copytree(repo, work, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git"))
    hand_to_agents(work, sandbox)

    code, output = await shell(sandbox, work, outcome, "npm test")
    assert code == 0, output
    assert "# pass 1" in output
    assert "# fail 0" in output
    code, output = await shell(sandbox, work, outcome, "command -v tiny && tiny 3")
    assert (code, output.splitlines()) == (0, [f"{work}/node_modules/.bin/tiny", "tiny 9"])
    assert left_behind(work / "node_modules") == [], "the environment is shown only in a call"

    again = await preparer.prepare(name="octo/app", repo=repo / ".git", base=base, setup=SETUP)
    assert again.reused
    assert again.root == outcome.root
