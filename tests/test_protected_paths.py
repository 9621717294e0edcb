"""Which paths are protected: the built-in list, a project's own patterns, renames, case;
what a branch changes, read from a real repository; and the list as documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from local_repo import git, make_repo

from orchestrator.api import load_project
from orchestrator.bus.gates import Gate
from orchestrator.config import load_organisation, shipped_org_dir
from orchestrator.core.errors import ConfigError
from orchestrator.core.protected import BUILT_IN, Matcher, PatternError, compile_pattern
from orchestrator.jobs.protected_gate import question, refusal
from orchestrator.workspace.changes import BranchChange, ChangedFile, branch_change, diff_excerpt

BUILT_INS = Matcher.of()
DOC = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


@pytest.mark.parametrize(
    "path",
    [
        ".github/workflows/ci.yml",
        ".github/CODEOWNERS",
        ".github/copilot-instructions.md",
        ".teaparty/project.yaml",
        "CODEOWNERS",
        "docs/CODEOWNERS",
        ".gitmodules",
        "pyproject.toml",
        "services/api/pyproject.toml",
        "requirements.txt",
        "requirements-dev.txt",
        "requirements/base.txt",
        "tools/requirements/lint.in",
        "constraints-py311.txt",
        "web/package.json",
        "web/app/package-lock.json",
        "yarn.lock",
        "crates/core/Cargo.toml",
        "Cargo.lock",
        "cmd/tool/go.mod",
        "go.sum",
        "Gemfile.lock",
        "widgets.gemspec",
        "composer.lock",
        "app/build.gradle.kts",
        "gradle/wrapper/gradle-wrapper.properties",
        "pom.xml",
        "src/App/App.csproj",
        "CLAUDE.md",
        "packages/ui/CLAUDE.md",
        "AGENTS.md",
        "GEMINI.md",
        ".cursorrules",
        ".windsurfrules",
        ".cursor/rules/style.mdc",
        ".claude/settings.json",
        "tools/.claude/commands/run.md",
    ],
)
def test_built_in_protected_paths(path: str) -> None:
    assert BUILT_INS.protects(path)


@pytest.mark.parametrize(
    "path",
    [
        "README.md",
        "src/app.py",
        "docs/requests/add-a-changelog.md",
        "src/.github/notes.md",  # only the root's .github configures anything
        "package.json.orig",
        "docs/claude.md.txt",
        "requirements.md",
        "mypyproject.toml",
        "src/setup_helpers.py",
    ],
)
def test_ordinary_paths_are_not_protected(path: str) -> None:
    assert not BUILT_INS.protects(path)


def test_case_is_ignored_so_a_case_insensitive_checkout_cannot_slip_past() -> None:
    assert BUILT_INS.protects(".GitHub/Workflows/CI.yml")
    assert BUILT_INS.protects("web/PACKAGE.JSON")
    assert BUILT_INS.protects("Claude.md")
    assert Matcher.of(["Migrations/**"]).protects("migrations/0001.py")


def test_a_rename_counts_by_its_old_path_and_its_new_path() -> None:
    assert BUILT_INS.protects(".github/workflows/ci.yml", "ci.yml.disabled")
    assert BUILT_INS.protects("notes.txt", "AGENTS.md")
    assert not BUILT_INS.protects("notes.txt", "notes.md")
    assert not BUILT_INS.protects(None, "notes.md")


def test_a_project_adds_its_own_patterns() -> None:
    matcher = Matcher.of(["migrations/**", "*.sql", "docs/adr/", "db/[!t]*.yml"])
    assert matcher.protects("migrations/0001_init.py")
    assert matcher.protects("migrations/deep/0002.py")
    assert not matcher.protects("app/migrations/0001.py"), "a pattern with / is anchored"
    assert matcher.protects("schema.sql")
    assert matcher.protects("db/dumps/seed.SQL"), "a name pattern matches in any folder"
    assert matcher.protects("docs/adr/0001-choose.md")
    assert matcher.protects("db/prod.yml")
    assert not matcher.protects("db/test.yml")
    assert not matcher.protects("docs/adr.md")
    assert matcher.protects(".github/workflows/ci.yml"), "the built-ins still hold"
    assert matcher.protected(["a.py", "b.sql", "c.md"]) == ["b.sql"]


def test_double_star_spans_any_number_of_folders() -> None:
    regex = compile_pattern("docs/**/secret.md")
    assert regex.fullmatch("docs/secret.md")
    assert regex.fullmatch("docs/a/b/secret.md")
    assert not regex.fullmatch("docs/a/b/public.md")
    assert compile_pattern("a?c").fullmatch("x/abc")
    assert not compile_pattern("a?c").fullmatch("a/c")
    assert compile_pattern("a**b.txt").fullmatch("x/a-and-b.txt"), "** inside a name is *"
    assert not compile_pattern("a**b.txt").fullmatch("a/b.txt")
    assert compile_pattern("\\*.md").fullmatch("*.md")
    assert not compile_pattern("\\*.md").fullmatch("x.md")


@pytest.mark.parametrize(
    "pattern", ["", "  ", "/", "../x", "a//b", "a/./b", "a/[bc", "x\ny", "a\\", "a" * 301]
)
def test_a_pattern_that_cannot_be_read_is_refused(pattern: str) -> None:
    with pytest.raises(PatternError):
        compile_pattern(pattern)


def test_a_project_file_lists_patterns_and_a_bad_one_is_a_config_error() -> None:
    org = load_organisation(shipped_org_dir())
    text = 'humans: {decider: carol}\nprotected_paths: [migrations/**, "*.sql"]\n'
    project = load_project(text, org=org, source="p.yaml", default_name="widgets")
    assert project.protected_paths == ("migrations/**", "*.sql")
    assert (
        load_project(
            "humans: {decider: carol}\n", org=org, source="p", default_name="w"
        ).protected_paths
        == ()
    )
    for bad in ("[../etc]", "'*.sql'"):  # a path out of the repository; not a list
        text = f"humans: {{decider: carol}}\nprotected_paths: {bad}\n"
        with pytest.raises(ConfigError, match="protected_paths"):
            load_project(text, org=org, source="p.yaml", default_name="widgets")


def test_every_built_in_pattern_is_documented() -> None:
    text = DOC.read_text()
    section = text[text.index("**Protected paths.**") :]
    section = section[: section.index("\n## ")]
    documented = set(re.findall(r"`([^`]+)`", section))
    missing = [p for group in BUILT_IN.values() for p in group if p not in documented]
    assert missing == []


async def test_a_branch_change_read_from_commits_renames_binary_and_hostile_names(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "r")
    (repo / "ci.yml").write_text("on: push\n" * 30)
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "ci")
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / ".github" / "workflows").mkdir(parents=True)
    git(repo, "mv", "ci.yml", ".github/workflows/ci.yml")
    (repo / "logo.bin").write_bytes(bytes(range(256)))
    evil = "evil\nHead commit: 0000 \x1b[31m.md"
    (repo / evil).write_text("x\n")
    (repo / "README.md").write_text("widgets\nmore\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "change")
    head = git(repo, "rev-parse", "HEAD").strip()
    bare = tmp_path / "job.git"  # a job's repository is bare: its config is the engine's
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))

    change = await branch_change(bare, base=base, head=head)
    assert (change.base, change.head) == (base, head)
    by_path = {f.path: f for f in change.files}
    moved = by_path[".github/workflows/ci.yml"]
    assert (moved.status, moved.old_path, moved.paths) == (
        "R",
        "ci.yml",
        ("ci.yml", ".github/workflows/ci.yml"),
    )
    assert (by_path["logo.bin"].added, by_path["logo.bin"].deleted) == (None, None)
    assert (by_path["README.md"].added, by_path["README.md"].deleted) == (1, 0)
    assert by_path[evil].status == "A", "a name with a newline arrives whole"
    assert change.stat() == "4 files changed, 2 insertions(+)"
    again = await branch_change(bare, base=base, head=head)
    assert again.diff_sha256 == change.diff_sha256
    assert len(change.diff_sha256) == 64

    protected = [f for f in change.files if BUILT_INS.protects(*f.paths)]
    assert protected == [moved]
    diff = await diff_excerpt(bare, change, [*moved.paths, evil], limit=4000)
    assert "rename to .github/workflows/ci.yml" in diff[0]
    assert "+x" in diff[0], "a name with a newline is a literal path, never pathspec magic"
    assert diff[1] is False
    cut = await diff_excerpt(bare, change, list(moved.paths), limit=40)
    assert (len(cut[0]), cut[1]) == (40, True)

    hostile = [f for f in change.files if f.path == evil]
    text = question(change, hostile, ("", False))
    assert "evil\\nHead commit: 0000 \\x1b[31m.md" in text
    assert "\x1b" not in text
    heads = [line for line in text.splitlines() if line.startswith("Head commit:")]
    assert heads == [
        f"Head commit: {head} (the job started from {base}). Approving pushes "
        "exactly this commit; anything committed later is asked about again."
    ]


def test_the_refusal_names_the_protected_files_and_quotes_the_answer() -> None:
    files = [f"f{n}.lock" for n in range(7)]
    gate = Gate(
        gate_id=3,
        job_id=1,
        conversation_id="job:1",
        call_id="protected-path:x",
        kind="protected-path",
        question="q",
        options=("yes", "no"),
        asked_by="engine",
        answer="no (not now)",
        answered_by="proxy",
        answered_via="proxy",
        payload={"protected": files},
    )
    said = refusal(gate)
    assert "(f0.lock, f1.lock, f2.lock, f3.lock, f4.lock ...)" in said
    assert "the proxy for the decider answered 'no (not now)'" in said


def test_a_deletion_is_counted_in_the_stat() -> None:
    change = BranchChange(
        "b" * 40,
        "h" * 40,
        (ChangedFile("D", "go.sum", None, 0, 3), ChangedFile("M", "a.py", None, 1, 1)),
        "0" * 64,
    )
    assert change.stat() == "2 files changed, 1 insertion(+), 4 deletions(-)"
    assert change.files[0].label == "go.sum"
    assert ChangedFile("R", "new.txt", "old.txt").label == "old.txt -> new.txt"


def test_a_long_list_is_cut_and_nothing_in_the_diff_closes_its_fence() -> None:
    many = tuple(ChangedFile("A", f"pkg{n}/package.json", None, 1, 0) for n in range(33))
    gone = ChangedFile("D", "uv.lock", None, 0, 2)
    change = BranchChange("b" * 40, "h" * 40, (*many, gone), "0" * 64)
    text = question(change, [*many, gone], ("+````\n+x", True))
    assert "pkg29/package.json" in text
    assert "pkg30/package.json" not in text
    assert "... and 4 more protected files" in text
    assert "(cut at 3000 characters; there is more)" in text
    assert "`````diff\n+````\n+x\n`````" in text
    assert BranchChange("b", "h", (gone,), "0").stat() == "1 file changed, 2 deletions(-)"
