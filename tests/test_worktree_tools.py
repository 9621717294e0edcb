"""The worktree tools on a real git repository in tmp_path: happy paths, escapes, the shell."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import hand_to_agents, survivors

from orchestrator.core.messages import ToolCall, ToolResult
from orchestrator.sandbox.confine import Sandbox
from orchestrator.workspace.file_tools import SPECS, WorktreeTools
from orchestrator.workspace.git import add_worktree, git

PATH = os.environ["PATH"]
SECRET_NAME = re.compile("TOKEN|KEY|SECRET|PASSWORD|PASS|CREDENTIAL|AUTH|PRIVATE", re.IGNORECASE)


@pytest.fixture
def worktree(tmp_path: Path, sandbox: Sandbox) -> Path:
    root = tmp_path / "wt"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return hand_to_agents(root.resolve(), sandbox)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("top secret\n")
    return folder


@pytest.fixture
def tools(worktree: Path, sandbox: Sandbox) -> WorktreeTools:
    return WorktreeTools(worktree, parent_env={"PATH": PATH}, sandbox=sandbox)


async def call(tools: WorktreeTools, name: str, **args: Any) -> ToolResult:
    result = await tools.run("coder", "job:1", ToolCall("c1", name, args))
    assert result.call_id == "c1"
    return result


async def ok(tools: WorktreeTools, name: str, **args: Any) -> str:
    result = await call(tools, name, **args)
    assert not result.is_error, result.output
    return result.output


async def refused(tools: WorktreeTools, name: str, **args: Any) -> str:
    result = await call(tools, name, **args)
    assert result.is_error, result.output
    return result.output


def test_specs_are_closed_json_schemas() -> None:
    assert set(SPECS) == {"read_file", "list_files", "search", "write_file", "edit_file", "shell"}
    for name, spec in SPECS.items():
        assert spec.name == name
        assert spec.description
        assert spec.input_schema["additionalProperties"] is False
        assert set(spec.input_schema["required"]) <= set(spec.input_schema["properties"])


async def test_write_read_edit_search_list(tools: WorktreeTools, worktree: Path) -> None:
    code = "def hello():\n    return 'hi'\n"
    assert "wrote" in await ok(tools, "write_file", path="src/app.py", content=code)
    assert "     1\tdef hello():\n     2\t    return 'hi'" == await ok(
        tools, "read_file", path="src/app.py"
    )
    edited = await ok(tools, "edit_file", path="src/app.py", old="'hi'", new="'hello'")
    assert edited == "replaced 1 occurrence in src/app.py"
    assert (worktree / "src/app.py").read_text() == "def hello():\n    return 'hello'\n"
    found = await ok(tools, "search", pattern=r"return '[a-z]+'")
    assert found.strip() == "src/app.py:2:    return 'hello'"
    assert await ok(tools, "search", pattern="hello", glob="*.md") == "no matches"
    assert "src/app.py:1:" in await ok(tools, "search", pattern=r"def \w+", path="src")
    assert "src/app.py:1:" in await ok(tools, "search", pattern="def", path="src", glob="*.py")
    assert await ok(tools, "list_files") == "src/"
    listing = await ok(tools, "list_files", recursive=True)
    assert listing.splitlines() == ["src/", "src/app.py"]


async def test_search_skips_ignored_and_reports_a_bad_pattern(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    repo = tmp_path / "repo.git"
    await git(None, "init", "-q", "--bare", str(repo))
    empty = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's empty tree
    _, commit = await git(
        repo, "-c", "user.name=t", "-c", "user.email=t@x", "commit-tree", empty, "-m", "init"
    )
    checkout = await add_worktree(repo, tmp_path / "slot-1", commit.strip())
    worktree = checkout.path
    tools = WorktreeTools(worktree, parent_env={"PATH": PATH}, sandbox=sandbox, checkout=checkout)
    (worktree / ".gitignore").write_text("build/\n")
    (worktree / "build").mkdir()
    (worktree / "build/out.txt").write_text("needle\n")
    (worktree / "a.txt").write_text("needle\n")
    assert (await ok(tools, "search", pattern="needle")).strip() == "a.txt:1:needle"
    assert "search:" in await refused(tools, "search", pattern="(")


async def test_search_without_git_walks_the_tree(tmp_path: Path, sandbox: Sandbox) -> None:
    root = tmp_path / "plain"
    (root / "src").mkdir(parents=True)
    (root / "src/a.py").write_text("x = 1\nneedle = 2\n")
    (root / "notes.md").write_text("needle\n")
    (root / "blob.bin").write_bytes(b"needle\0")
    tools = WorktreeTools(root, parent_env={"PATH": PATH}, sandbox=sandbox)
    found = await ok(tools, "search", pattern="need+le")
    assert found.splitlines() == ["notes.md:1:needle", "src/a.py:2:needle = 2"]
    assert (await ok(tools, "search", pattern="needle", glob="*.py")).strip() == (
        "src/a.py:2:needle = 2"
    )
    assert (await ok(tools, "search", pattern="x", path="src/a.py")).strip() == "src/a.py:1:x = 1"
    assert await ok(tools, "search", pattern="absent") == "no matches"
    assert "bad pattern" in await refused(tools, "search", pattern="(")


async def test_read_file_pages_and_caps(worktree: Path, sandbox: Sandbox) -> None:
    (worktree / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 101)))
    tools = WorktreeTools(worktree, parent_env={}, output_cap=200, sandbox=sandbox)
    page = await ok(tools, "read_file", path="long.txt", offset=10, limit=3)
    assert page.splitlines() == [
        "    10\tline 10",
        "    11\tline 11",
        "    12\tline 12",
        "[lines 10-12 of 100; read on with offset=13]",
    ]
    capped = await ok(tools, "read_file", path="long.txt")
    assert len(capped) < 300
    assert "read on with offset=" in capped
    (worktree / "wide.txt").write_text("x" * 1000)
    assert "line cut, 807 more characters" in await ok(tools, "read_file", path="wide.txt")
    assert "past the end" in await refused(tools, "read_file", path="long.txt", offset=101)


async def test_read_file_refuses_binary_and_directories(
    tools: WorktreeTools, worktree: Path
) -> None:
    (worktree / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0")
    (worktree / "latin1.txt").write_bytes("café".encode("latin-1"))
    (worktree / "empty.txt").write_text("")
    assert "binary" in await refused(tools, "read_file", path="image.png")
    assert "binary" in await refused(tools, "read_file", path="latin1.txt")
    assert "directory" in await refused(tools, "read_file", path=".")
    assert await ok(tools, "read_file", path="empty.txt") == "(empty file)"
    assert "no such file" in await refused(tools, "read_file", path="missing.txt")


async def test_edit_file_needs_one_exact_match(tools: WorktreeTools, worktree: Path) -> None:
    (worktree / "f.txt").write_text("a = 1\na = 1\na = 1\n")
    assert "not found" in await refused(tools, "edit_file", path="f.txt", old="b", new="c")
    ambiguous = await refused(tools, "edit_file", path="f.txt", old="a = 1", new="a = 2")
    assert "3 times" in ambiguous
    assert "more surrounding" in ambiguous
    assert (worktree / "f.txt").read_text() == "a = 1\na = 1\na = 1\n"
    done = await ok(tools, "edit_file", path="f.txt", old="a = 1", new="a = 2", replace_all=True)
    assert done == "replaced 3 occurrences in f.txt"
    assert (worktree / "f.txt").read_text() == "a = 2\na = 2\na = 2\n"
    assert "empty" in await refused(tools, "edit_file", path="f.txt", old="", new="x")


async def test_write_file_keeps_bytes_and_refuses_directories(
    tools: WorktreeTools, worktree: Path
) -> None:
    await ok(tools, "write_file", path="deep/er/f.txt", content="one\r\ntwo\n")
    assert (worktree / "deep/er/f.txt").read_bytes() == b"one\r\ntwo\n"
    await ok(tools, "edit_file", path="deep/er/f.txt", old="two", new="2")
    assert (worktree / "deep/er/f.txt").read_bytes() == b"one\r\n2\n"
    assert "directory" in await refused(tools, "write_file", path="deep", content="x")


async def test_unknown_tools_and_bad_arguments(tools: WorktreeTools) -> None:
    assert await refused(tools, "rm_rf") == "unknown tool 'rm_rf'"
    assert "missing required arguments ['path']" in await refused(tools, "read_file")
    assert await refused(tools, "read_file", path=3) == "read_file: path: must be a string, not int"
    assert "unknown arguments ['mode']" in await refused(tools, "read_file", path="x", mode="r")
    assert "at least 1" in await refused(tools, "read_file", path="x", offset=0)
    assert "limit: must be an integer, not bool" in await refused(
        tools, "read_file", path="x", limit=True
    )
    assert "must be true or false, not str" in await refused(tools, "list_files", recursive="yes")
    assert "timeout_s: must be greater than 0, not 0" in await refused(
        tools, "shell", command="true", timeout_s=0
    )
    assert "NUL" in await refused(tools, "read_file", path="a\0b")
    assert "relative" in await refused(tools, "read_file", path="")
    assert await ok(tools, "list_files", path=None) == "(empty directory)"


@pytest.fixture
def traps(worktree: Path, outside: Path) -> Path:
    """Symlinks in the worktree that lead out of it, or nowhere."""
    (worktree / "src").mkdir()
    (worktree / "src/app.py").write_text("print('hi')\n")
    links = {
        "etc": "/etc",
        "leak": str(outside / "secret.txt"),
        "loop_a": "loop_b",
        "loop_b": "loop_a",
        "chain1": "chain2",
        "chain2": "../outside",
        "outdir": str(outside),
        "dangling": str(outside / "new.txt"),
        "gitlink": ".git",
        "alias": "src/app.py",
        "srclink": "src",
    }
    for name, target in links.items():
        (worktree / name).symlink_to(target)
    return worktree


def stray_files(tmp_path: Path) -> list[Path]:
    """Anything an escape could have created next to the worktree or in /tmp."""
    near = [path for path in tmp_path.iterdir() if path.name not in {"outside", "wt"}]
    return [*near, *Path("/tmp").glob("teaparty-escape*")]


def snapshot(*folders: Path) -> dict[str, bytes]:
    return {
        str(path): path.read_bytes()
        for folder in folders
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


READ_ESCAPES = [
    "/etc/passwd",
    "../outside/secret.txt",
    "src/../../outside/secret.txt",
    "etc/passwd",
    "leak",
    "loop_a",
    "loop_a/x",
    "chain1/secret.txt",
    "outdir/secret.txt",
    "dangling",
    ".git/config",
    "./.git/HEAD",
    "src/../.git/config",
    "gitlink/config",
    ".GIT/config",
]
WRITE_ESCAPES = [
    *READ_ESCAPES,
    "/tmp/teaparty-escape.txt",
    "../escape.txt",
    "src/../../escape.txt",
    "newdir/../../escape.txt",
    "chain1/new.txt",
    "outdir/new.txt",
    "outdir/sub/new.txt",
    ".git/hooks/pre-commit",
    "gitlink/hooks/post-checkout",
]


@pytest.mark.parametrize("path", READ_ESCAPES)
async def test_reads_stay_inside(tools: WorktreeTools, traps: Path, path: str) -> None:
    await refused(tools, "read_file", path=path)
    await refused(tools, "search", pattern="secret", path=path)


@pytest.mark.parametrize("path", [*WRITE_ESCAPES, "outdir/secret.txt"])
async def test_writes_stay_inside(
    tools: WorktreeTools, traps: Path, outside: Path, tmp_path: Path, path: str
) -> None:
    before = snapshot(outside, traps / ".git")
    await refused(tools, "write_file", path=path, content="pwned")
    await refused(tools, "edit_file", path=path, old="top secret", new="pwned")
    assert snapshot(outside, traps / ".git") == before
    assert stray_files(tmp_path) == []


@pytest.mark.parametrize("path", ["..", "etc", "outdir", "chain1", ".git", "gitlink", "loop_a"])
async def test_listing_stays_inside(tools: WorktreeTools, traps: Path, path: str) -> None:
    await refused(tools, "list_files", path=path)
    await refused(tools, "list_files", path=path, recursive=True)


async def test_symlinks_inside_the_worktree_work(tools: WorktreeTools, traps: Path) -> None:
    assert "print('hi')" in await ok(tools, "read_file", path="alias")
    await ok(tools, "edit_file", path="alias", old="hi", new="there")
    assert (traps / "src/app.py").read_text() == "print('there')\n"
    await ok(tools, "write_file", path="srclink/new.py", content="x = 1\n")
    assert (traps / "src/new.py").read_text() == "x = 1\n"
    listing = (await ok(tools, "list_files", recursive=True)).splitlines()
    assert "outdir@" in listing
    assert "src/app.py" in listing
    assert not any(line.startswith(".git") or "secret" in line for line in listing)


async def test_shell_runs_in_the_worktree(tools: WorktreeTools, worktree: Path) -> None:
    assert await ok(tools, "shell", command="pwd") == f"{worktree}\n[exit code 0]"
    assert await ok(tools, "shell", command="echo oops >&2; exit 3") == "oops\n[exit code 3]"
    assert await ok(tools, "shell", command="cat") == "[exit code 0]"
    home = await ok(tools, "shell", command='touch "$HOME/x" && ls "$HOME"')
    assert home == "x\n[exit code 0]", "HOME is a writable place of the call's own"


def gone(marker: str) -> bool:
    """Whether no process with `marker` runs any more, waiting up to 5 s."""
    deadline = time.monotonic() + 5
    while survivors(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not survivors(marker)


async def test_shell_timeout_kills_the_whole_group(tools: WorktreeTools) -> None:
    started = time.monotonic()
    command = "sleep 30.101 & setsid sleep 30.102 & sleep 30.103"
    message = await refused(tools, "shell", command=command, timeout_s=0.5)
    assert time.monotonic() - started < 10
    assert "timed out after 0.5 s" in message
    assert gone("30.10"), "a process of the call outlived it"


async def test_shell_kills_background_children_when_it_ends(tools: WorktreeTools) -> None:
    started = time.monotonic()
    await ok(tools, "shell", command="sleep 30.201 & (setsid sleep 30.202 &) ; echo started")
    assert time.monotonic() - started < 10
    assert gone("30.20"), "a background process outlived the call"


async def test_shell_timeout_cannot_exceed_the_configured_limit(
    worktree: Path, sandbox: Sandbox
) -> None:
    tools = WorktreeTools(worktree, parent_env={"PATH": PATH}, shell_timeout_s=0.5, sandbox=sandbox)
    started = time.monotonic()
    assert "timed out" in await refused(tools, "shell", command="sleep 30", timeout_s=100)
    assert time.monotonic() - started < 10


async def test_shell_output_keeps_head_and_tail(worktree: Path, sandbox: Sandbox) -> None:
    tools = WorktreeTools(worktree, parent_env={"PATH": PATH}, output_cap=1000, sandbox=sandbox)
    output = await ok(tools, "shell", command="seq 1 100000")
    assert output.startswith("1\n2\n3\n")
    assert output.endswith("99999\n100000\n[exit code 0]")
    assert "bytes cut from the middle" in output
    assert len(output) < 1200


def env_names(output: str) -> set[str]:
    return {match.group(1) for match in re.finditer(r"^([A-Za-z_][A-Za-z0-9_]*)=", output, re.M)}


async def test_shell_env_holds_no_secrets(worktree: Path, sandbox: Sandbox) -> None:
    secrets = {
        "GITHUB_TOKEN": "ghs_secret123",
        "ANTHROPIC_API_KEY": "sk-ant-abc",
        "GITHUB_APP_PRIVATE_KEY": "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA",
        "AWS_SECRET_ACCESS_KEY": "xyz",
        "MY_DB_PASSWORD": "hunter2",
    }
    parent = {**secrets, "PATH": PATH, "LANG": "C.UTF-8", "EDITOR": "vi"}
    tools = WorktreeTools(worktree, parent_env=parent, sandbox=sandbox)
    output = await ok(tools, "shell", command="env")
    names = env_names(output)
    assert not {name for name in names if SECRET_NAME.search(name)}
    for value in secrets.values():
        assert value not in output
    assert {"PATH", "LANG", "HOME", "GIT_TERMINAL_PROMPT", "GIT_CONFIG_NOSYSTEM"} <= names
    assert "EDITOR" not in names
    assert "GIT_TERMINAL_PROMPT=0" in output
    assert "GIT_CONFIG_NOSYSTEM=1" in output


async def test_shell_env_drops_a_secret_smuggled_into_an_allowed_variable(
    worktree: Path, sandbox: Sandbox
) -> None:
    parent = {
        "GITHUB_TOKEN": "ghs_secret123",
        "LANG": "ghs_secret123",
        "LC_ALL": "en_US.ghs_secret123",
        "TZ": "UTC",
        "GIT_AUTHOR_NAME": "Tea Bot",
        "PATH": PATH,
    }
    tools = WorktreeTools(worktree, parent_env=parent, sandbox=sandbox)
    output = await ok(tools, "shell", command="env")
    assert "ghs_secret123" not in output
    names = env_names(output)
    assert "LANG" not in names
    assert "LC_ALL" not in names
    assert "TZ=UTC" in output
    assert "GIT_AUTHOR_NAME=Tea Bot" in output
