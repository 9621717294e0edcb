"""The scan of what a diff adds: exact values and credential patterns, by file and line,
masked; on real git diffs of a bare repository, and on the parser's corners."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest
from local_repo import ENV

from orchestrator.core.secret_scan import FINDINGS_KEPT, PATTERNS, Finding, scan
from orchestrator.workspace.changes import added_lines, branch_change

VALUES = {"model-key-7d3e9a01": "ANTHROPIC_API_KEY", "ghs_" + "t" * 36: "an installation token"}
AWS = "AKIA" + "QWERTYUIOPASDFGH"


def run(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], input=stdin, check=True, capture_output=True, env=ENV
    )
    return done.stdout.decode().strip()


def commit(work: Path, files: Mapping[str, bytes | None]) -> str:
    for name, content in files.items():
        if content is None:
            (work / name).unlink()
        else:
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_bytes(content)
    run(work, "add", "-A")
    run(work, "commit", "-qm", "c")
    return run(work, "rev-parse", "HEAD")


async def diff_of(
    tmp_path: Path, before: Mapping[str, bytes | None], after: Mapping[str, bytes | None]
) -> tuple[bytes, list[str]]:
    work = tmp_path / "work"
    work.mkdir()
    run(work, "init", "-q", "-b", "main")
    base = commit(work, before)
    head = commit(work, after)
    bare = tmp_path / "bare.git"
    run(tmp_path, "clone", "-q", "--bare", str(work), str(bare))
    change = await branch_change(bare, base=base, head=head)
    names = [f.path for f in change.files if f.status in ("A", "R", "C")]
    return await added_lines(bare, change), names


async def test_values_and_patterns_by_file_and_line_masked(tmp_path: Path) -> None:
    before = {"app.py": b"a = 1\nb = 2\nc = 3\n", "old.txt": b"model-key-7d3e9a01\n"}
    after = {
        "app.py": b"a = 1\nkey = 'model-key-7d3e9a01'\nc = 3\nd = '" + AWS.encode() + b"'\n",
        "old.txt": None,  # a deleted line is not pushed: not a finding
        "docs/token.md": b"intro\n\ntoken ghs_" + b"t" * 36 + b" here\n",
    }
    diff, names = await diff_of(tmp_path, before, after)
    found = scan(diff, VALUES, names=names)
    assert [str(f) for f in found.findings] == [
        "app.py:2: the value of ANTHROPIC_API_KEY …(18 characters)",
        "app.py:4: a AWS access key id AKIA…(20 characters)",
        "docs/token.md:3: the value of an installation token …(40 characters)",
    ], "a value's span hides the GitHub pattern inside it"
    assert [f.line for f in found.values] == [2, 3]
    assert not found.clean
    text = str(found)
    assert "model-key-7d3e9a01" not in text
    assert AWS not in text


async def test_a_file_git_would_call_binary_is_scanned_all_the_same(tmp_path: Path) -> None:
    after = {
        ".gitattributes": b"* -diff\n",
        "data.bin": b"\x00\x01binary\x00 model-key-7d3e9a01 \x00\n",
        "notes.txt": AWS.encode() + b"\n",
    }
    diff, names = await diff_of(tmp_path, {"README": b"x\n"}, after)
    found = scan(diff, VALUES, names=names)
    assert [(f.path, f.what) for f in found.findings] == [
        ("data.bin", "ANTHROPIC_API_KEY"),
        ("notes.txt", "AWS access key id"),
    ]


async def test_a_name_is_scanned_and_shown_redacted(tmp_path: Path) -> None:
    after = {"model-key-7d3e9a01.txt": b"", f"d/{AWS}": b"x\n"}
    diff, names = await diff_of(tmp_path, {"README": b"x\n"}, after)
    found = scan(diff, VALUES, names=names)
    shown = [str(f) for f in found.findings]
    assert "d/AKIA…(20 characters) (its name): a AWS access key id AKIA…(20 characters)" in shown
    assert (
        "[ANTHROPIC_API_KEY].txt (its name): the value of ANTHROPIC_API_KEY …(18 characters)"
    ) in shown
    assert not any("model-key" in line for line in shown)


@pytest.mark.parametrize(
    ("kind", "sample"),
    [
        ("AWS access key id", "ASIA" + "ABCDEFGHIJKLMNOP"),
        ("GitHub token", "ghp_" + "a1" * 18),
        ("GitHub token", "gho_" + "B" * 36),
        ("GitHub fine-grained token", "github_pat_" + "11ABC_" * 5),
        ("Slack token", "xoxb-1234567890-abcdef"),
        ("private key", "-----BEGIN OPENSSH PRIVATE KEY-----"),
        ("private key", "-----BEGIN PRIVATE KEY-----"),
        ("private key", "-----BEGIN EC PRIVATE KEY-----"),
        ("Anthropic API key", "sk-ant-api03-" + "x" * 30),
        ("Google API key", "AIza" + "S" * 35),
        ("Stripe live key", "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"),
    ],
)
def test_each_pattern(kind: str, sample: str) -> None:
    diff = f"diff --git a/f b/f\n+++ b/f\n@@ -0,0 +1 @@\n+x = {sample}\n".encode()
    (finding,) = scan(diff, {}).findings
    assert (finding.what, finding.line, finding.value) == (kind, 1, False)
    assert sample not in str(finding)
    assert kind in {k for k, _ in PATTERNS}


def test_what_is_not_a_finding() -> None:
    diff = (
        b"diff --git a/f b/f\n+++ b/f\n@@ -0,0 +1,3 @@\n"
        b"+AKIAIOSFODNN7EXAMPL\n"  # one character short
        b"+-----BEGIN PUBLIC KEY-----\n"
        b"+ghp_short\n"
    )
    assert scan(diff, VALUES).clean


def test_line_numbers_follow_each_hunk_and_skip_removed_lines() -> None:
    diff = (
        b"diff --git a/f b/f\n--- a/f\n+++ b/f\n"
        b"@@ -3,0 +4,2 @@\n+one\n+model-key-7d3e9a01\n"
        b"@@ -10 +11 @@\n-model-key-7d3e9a01\n+two " + AWS.encode() + b"\n"
        b"\\ No newline at end of file\n"
        b"diff --git a/g b/g\n+++ b/g\n@@ -1,0 +1 @@\n++++ model-key-7d3e9a01\n"
    )
    found = scan(diff, VALUES)
    assert [(f.path, f.line, f.what) for f in found.findings] == [
        ("f", 5, "ANTHROPIC_API_KEY"),
        ("f", 11, "AWS access key id"),
        ("g", 1, "ANTHROPIC_API_KEY"),  # an added "+++ ..." line is a line, not a header
    ]


def test_a_quoted_name_is_unquoted() -> None:
    quoted = b'"b/t\\tab\\"q\\303\\251"'
    diff = b"diff --git " + quoted.replace(b"b/", b"a/") + b" " + quoted + b"\n"
    diff += b"+++ " + quoted + b"\n@@ -0,0 +1 @@\n+model-key-7d3e9a01\n"
    (finding,) = scan(diff, VALUES).findings
    assert finding.path == 't\tab"q\u00e9'


def test_a_diff_past_the_bound_is_not_passed_as_clean() -> None:
    lines = b"".join(b"+line %d\n" % n for n in range(100))
    diff = b"diff --git a/f b/f\n+++ b/f\n@@ -0,0 +1,100 @@\n" + lines + b"+" + AWS.encode()
    found = scan(diff, VALUES, limit=500)
    assert found.findings == ()
    assert found.unscanned == "the diff past 500 bytes of added lines"
    assert not found.clean


def test_findings_past_the_kept_number_are_counted() -> None:
    lines = b"".join(b"+" + AWS.encode() + b"\n" for _ in range(FINDINGS_KEPT + 5))
    diff = b"diff --git a/f b/f\n+++ b/f\n@@ -0,0 +1 @@\n" + lines
    found = scan(diff, {})
    assert (len(found.findings), found.more) == (FINDINGS_KEPT, 5)


def test_a_finding_reads_as_where_and_what() -> None:
    finding = Finding("a b.txt", None, "ANTHROPIC_API_KEY", "…(9 characters)", True)
    assert str(finding) == "a b.txt (its name): the value of ANTHROPIC_API_KEY …(9 characters)"
