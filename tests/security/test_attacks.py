"""The attack suite: what an agent following an injected instruction could do, done for real.

Each attack of issue 10 runs through the real shell and file tools of a task's worktree in
a real engine process (harness.py) with canary secrets in its environment and a second
repository's mirror beside the job's; then the engine does its normal git work. Every
attack is first shown to work with the protections off (TEAPARTY_SANDBOX=off, the
process environment kept, and the pre-hardening code paths), then shown to fail under
each sandbox this host can give. A sandbox this host cannot give is skipped, with the
reason printed. Credentials no name pattern finds (`DATABASE_URL`, `SENTRY_DSN`, ...) are
among the canaries: the engine's environment keeps only what it names, so they are out of
reach even unconfined. And what the App pushes is scanned: a worker that commits a secret
value the engine holds, or a credential pattern, pushes nothing until the decider has been
asked, and the value never.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import survivors

from orchestrator.core.secrecy import SECRET_NAME

HARNESS = Path(__file__).with_name("harness.py")
CANARIES = {
    "GITHUB_APP_PRIVATE_KEY": "-----BEGIN RSA PRIVATE KEY-----\ncanary-app-key\n-----END",
    "GITHUB_WEBHOOK_SECRET": "canary-webhook-secret",
    "ANTHROPIC_API_KEY": "canary-model-key",
    "GITHUB_TOKEN": "canary-installation-token",
    # Named like no secret: the old rule (a pattern of names) left these in the environment.
    "DATABASE_URL": "postgres://app:canary-database-url@db.internal/app",
    "SENTRY_DSN": "https://canary-sentry-dsn@o1.ingest.sentry.io/2",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/canary-slack-hook",
    "X_PW": "canary-x-pw",
}
UNNAMED = ("DATABASE_URL", "SENTRY_DSN", "SLACK_WEBHOOK_URL", "X_PW")
VALUES = (
    "canary-app-key",
    "canary-webhook-secret",
    "canary-model-key",
    "canary-installation-token",
    "canary-database-url",
    "canary-sentry-dsn",
    "canary-slack-hook",
    "canary-x-pw",
)
PROTECTED = ("bwrap", "landlock")
Report = dict[str, Any]


def run_harness(mode: str, *, protect: bool) -> tuple[Report, Path]:
    # Not under pytest's tmp_path (0700 directories): the agents' user must be able to
    # reach TEAPARTY_HOME when Landlock, which has no mount namespace, confines it.
    base = Path(tempfile.mkdtemp(prefix=f"teaparty-attack-{mode}-", dir="/tmp"))
    os.chmod(base, 0o711)
    (base / "home").mkdir(mode=0o711)
    os.chmod(base / "home", 0o711)
    marker = f"300.{os.getpid()}{len(mode)}{int(protect)}"
    config = {"base": str(base), "protect": protect, "marker": marker, "report": str(base / "r")}
    env = {
        "PATH": os.environ["PATH"],
        "TEAPARTY_SANDBOX": mode,
        **CANARIES,
    }
    done = subprocess.run(
        [sys.executable, str(HARNESS), json.dumps(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        if "does not work on this host" in done.stderr:
            pytest.skip(f"TEAPARTY_SANDBOX={mode}: {done.stderr.strip().splitlines()[-1]}")
        raise AssertionError(f"the harness failed ({mode}):\n{done.stdout}\n{done.stderr}")
    report: Report = json.loads((base / "r").read_text())
    report["marker"] = marker
    report["survivors"] = survivors(marker)
    for pid in report["survivors"]:
        os.kill(pid, signal.SIGKILL)
    return report, base


@pytest.fixture(scope="module")
def unprotected() -> Iterator[tuple[Report, Path]]:
    """The attacks against the engine with every protection off."""
    report, base = run_harness("off", protect=False)
    yield report, base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def unconfined() -> Iterator[tuple[Report, Path]]:
    """The engine as it runs, its agents unconfined (TEAPARTY_SANDBOX=off): what holds
    without a sandbox."""
    report, base = run_harness("off", protect=True)
    yield report, base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module", params=PROTECTED)
def protected(request: pytest.FixtureRequest) -> Iterator[tuple[Report, Path]]:
    """The same attacks against the engine as it runs: secrets out, agents sandboxed."""
    report, base = run_harness(request.param, protect=True)
    assert report["mode"] == request.param, report["reason"]
    yield report, base
    shutil.rmtree(base, ignore_errors=True)


def test_the_attacks_work_with_the_protections_off(unprotected: tuple[Report, Path]) -> None:
    """So that a test of an attack that never worked cannot pass below."""
    report, base = unprotected
    out, outside = report["out"], base / "outside"
    assert set(VALUES) <= set(out["environ"].split()), "secrets readable in /proc/*/environ"
    assert "canary-app-key" in out["key_file"]
    for place in ("job", "mirror"):
        assert out[f"hooks_{place}"].startswith("planted"), out[f"hooks_{place}"]
        assert out[f"config_{place}"].startswith("configured"), out[f"config_{place}"]
    assert out["store_read"].startswith("SQLite format 3")
    assert "forged" in out["store_write"]
    assert "other-repo-private-commit" in out["other_read"]
    assert (base / "home/repos/github/o/other/mirror.git/PWNED").exists()
    assert (outside / "written.txt").exists()
    assert out["hardlink"].startswith("linked")
    assert (outside / "target.txt").read_text() == "via-plain-write\n", "a write via the link"
    assert report["survivors"], "a setsid process outlived its call"
    assert "exfil canary-net" in report["received"], "data left through the network"
    plain = set(report["after_plain"])
    assert {"hook-pre-commit.txt", "fsmonitor-ran", "clean-ran"} <= plain, "plain git ran them"
    assert any(v in report["plain_hook_saw"] for v in VALUES), "and saw the secrets"


def test_the_engines_git_never_runs_what_an_agent_wrote(
    unprotected: tuple[Report, Path],
) -> None:
    """Even unsandboxed: hooks and config planted in the job's repo and the mirror stay inert."""
    report, base = unprotected
    engine = report["engine"]
    assert engine["markers"] == ["written.txt"], "a planted hook or fsmonitor ran in the engine"
    assert engine["committed"]
    assert engine["merged"]
    assert engine["same_slot"]
    pushed = subprocess.run(
        ["git", "--git-dir", str(base / "origin.git"), "rev-parse", engine["branch"]],
        capture_output=True,
        text=True,
    )
    assert pushed.returncode == 0, "the branch went to the real remote, not remote.origin.url"
    evil = subprocess.run(
        ["git", "--git-dir", str(base / "evil.git"), "for-each-ref"], capture_output=True
    )
    assert evil.stdout == b"", "nothing reached the URL the agent configured"


def test_no_secret_is_within_an_agents_reach(protected: tuple[Report, Path]) -> None:
    report, _ = protected
    out = report["out"]
    assert not any(v in json.dumps(out) for v in VALUES), out["environ"]
    assert out["environ"].split()[:1] in (["canary-"], ["[exit"]), "only grep's own pattern"
    assert "canary-app-key" not in out["key_file"]
    assert not any(f"{name}=" in out["shell_env"] for name in CANARIES)


def test_credentials_named_like_no_secret_leave_the_engines_environment_too(
    unprotected: tuple[Report, Path], unconfined: tuple[Report, Path]
) -> None:
    """`DATABASE_URL` and the like match no secret-name pattern (the old rule kept them in
    the engine's environment, where an unconfined agent read them in /proc); the engine now
    keeps only the variables it names, and an agent's shell gets only its own allowlist."""
    assert not any(SECRET_NAME.search(name) for name in UNNAMED)
    unnamed = [CANARIES[name].split("canary-")[1].split("@")[0] for name in UNNAMED]
    leaked = unprotected[0]["out"]["environ"]
    assert all(f"canary-{tail}" in leaked for tail in unnamed), leaked
    out = unconfined[0]["out"]
    assert unconfined[0]["mode"] == "off"
    assert not any(v in out["environ"] for v in VALUES), out["environ"]
    for report, _ in (unprotected, unconfined):
        assert not any(f"{name}=" in report["out"]["shell_env"] for name in CANARIES)


def test_a_planted_secret_value_is_never_pushed(
    unprotected: tuple[Report, Path], protected: tuple[Report, Path]
) -> None:
    """A worker commits the webhook secret's value: before the scan it went out with the
    branch; now the push waits at a gate naming the file and line, the value masked, and
    an approval ends the job with nothing pushed."""
    report, base = unprotected
    leaked = _pushed(base, report["value"]["branch"], "leak.txt")
    assert 'value = "canary-webhook-secret"' in leaked, "the old path pushed it"
    report, base = protected
    seen = report["value"]
    assert [v["kind"] for v in seen["verdicts"]] == ["Held", "Stopped"]
    asked, ended = (v["text"] for v in seen["verdicts"])
    assert "leak.txt:2: the value of GITHUB_WEBHOOK_SECRET …(21 characters)" in asked
    assert "it is never pushed" in asked
    assert "it holds a secret value the App holds, which is never pushed" in ended
    assert not any(v in json.dumps(seen) for v in VALUES)
    assert seen["pushed_before_answer"] == ""
    assert _pushed(base, seen["branch"], "leak.txt") is None, "nothing pushed, approved or not"


def test_a_credential_pattern_waits_for_the_decider(
    unprotected: tuple[Report, Path], protected: tuple[Report, Path]
) -> None:
    """A worker commits an AWS key id: pushed as it was before the scan; now asked, named
    and masked, first, and pushed only once the decider approved that head."""
    aws = "AKIA" + "QWERTYUIOPASDFGH"
    report, base = unprotected
    assert aws in (_pushed(base, report["pattern"]["branch"], "creds.py") or "")
    report, base = protected
    seen = report["pattern"]
    assert [v["kind"] for v in seen["verdicts"]] == ["Held", "Cleared"]
    asked = seen["verdicts"][0]["text"]
    assert "creds.py:2: a AWS access key id AKIA…(20 characters)" in asked
    assert aws not in asked
    assert seen["pushed_before_answer"] == "", "nothing pushed before the approval"
    assert aws in (_pushed(base, seen["branch"], "creds.py") or ""), "pushed once approved"


def _pushed(base: Path, branch: str, path: str) -> str | None:
    """`path` as the remote's `branch` has it; None when the branch is not there."""
    done = subprocess.run(
        ["git", "--git-dir", str(base / "origin.git"), "show", f"refs/heads/{branch}:{path}"],
        capture_output=True,
        text=True,
    )
    return done.stdout if done.returncode == 0 else None


def test_an_agent_cannot_plant_hooks_or_config_for_the_engine(
    protected: tuple[Report, Path],
) -> None:
    report, base = protected
    out = report["out"]
    for place in ("job", "mirror"):
        assert not out[f"hooks_{place}"].startswith("planted"), out[f"hooks_{place}"]
        assert not out[f"config_{place}"].startswith("configured"), out[f"config_{place}"]
    assert report["after_plain"] == [], "nothing was planted, so even plain git ran nothing"
    hooks = Path(report["engine"]["job_repo"]) / "hooks"
    assert not hooks.exists() or not any(hooks.iterdir())


def test_the_store_is_out_of_reach(protected: tuple[Report, Path]) -> None:
    report, base = protected
    out = report["out"]
    assert "SQLite" not in out["store_read"]
    assert "forged" not in out["store_write"].replace("'forged'", "")
    import sqlite3

    with sqlite3.connect(base / "home" / "teaparty.db") as store:
        forged = store.execute("SELECT count(*) FROM deliveries WHERE delivery_id = 'forged'")
        assert forged.fetchone() == (0,)
    assert oct(os.stat(base / "home" / "teaparty.db").st_mode & 0o777) == "0o600"


def test_other_repositories_and_everything_outside_the_worktree_are_untouched(
    protected: tuple[Report, Path],
) -> None:
    report, base = protected
    out = report["out"]
    assert "other-repo-private-commit" not in out["other_read"]
    assert not (base / "home/repos/github/o/other/mirror.git/PWNED").exists()
    assert not (base / "outside" / "written.txt").exists()
    assert not out["hardlink"].startswith("linked")
    assert (base / "outside" / "target.txt").read_text() == "untouched\n"


def test_the_file_tools_refuse_a_hard_link_even_unsandboxed(
    unprotected: tuple[Report, Path],
) -> None:
    report, _ = unprotected
    assert "more than one hard link" in report["out"]["hardlink_tool"]


def test_no_process_outlives_its_call(protected: tuple[Report, Path]) -> None:
    report, _ = protected
    assert report["out"]["setsid"].startswith("started")
    assert report["survivors"] == []


def test_nothing_leaves_through_the_network(protected: tuple[Report, Path]) -> None:
    report, _ = protected
    assert "sent" not in report["out"]["network"].splitlines()[0]
    assert report["received"] == ""


def test_the_engine_still_does_its_work_in_the_sandbox(protected: tuple[Report, Path]) -> None:
    report, base = protected
    engine = report["engine"]
    assert engine["committed"]
    assert engine["merged"]
    assert engine["same_slot"]
    assert report["out"]["feature"].startswith("wrote")
    tree = subprocess.run(
        ["git", "--git-dir", str(base / "origin.git"), "ls-tree", "-r", "--name-only"]
        + [engine["branch"]],
        capture_output=True,
        text=True,
    ).stdout.split()
    assert "feature.txt" in tree


def test_a_slot_is_given_back_its_own_git_before_the_next_task(
    unprotected: tuple[Report, Path], protected: tuple[Report, Path]
) -> None:
    """A worker puts a repository of its own where its slot's .git was, with an fsmonitor:
    the next task's git there would run it (shown with plain git before the slot is leased
    again); leased again, the slot's .git is git's own file, and the next agent's
    `git status` runs nothing the worker planted."""
    for report, _ in (unprotected, protected):
        assert report["out"]["slot_git"].startswith("planted"), report["out"]["slot_git"]
        assert report["slot_git_ran_before_lease"], "the planted fsmonitor would have run"
        after = report["slot_git_next"]
        assert after["gitfile"], "the slot's .git is git's file again"
        assert not after["ran"], after["status"]
