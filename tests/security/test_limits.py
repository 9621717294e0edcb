"""What agents share, filled on purpose: processes (a fork bomb) and disk.

A real engine process (limits_harness.py) leases two task slots of one job and plays each
attack through the real shell tool. Each is first shown to work with the protection off,
then to fail under every sandbox this host gives:

- the fork bomb: agents that share one uid (TEAPARTY_SANDBOX_UIDS=shared) share one
  RLIMIT_NPROC, so agent 1's bomb leaves agent 2 no process at all; with a uid per slot (the
  default when the engine is root) agent 2's command still runs;
- the disk: with no bound worth the name (the default 10 GB) an agent writes what it likes;
  with TEAPARTY_SANDBOX_DISK_MB=8 the worker's turn ends at 12 MB with a note naming the
  bound, which its lead reads, and a call that writes without end is stopped while it runs.

Limits are small so every run is quick; nothing waits on time.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from reachable import reachable_code, reachable_packages

from orchestrator.api import load_project
from orchestrator.config import load_organisation, shipped_org_dir
from orchestrator.core.errors import ConfigError

HARNESS = Path(__file__).with_name("limits_harness.py")
ROOT = HARNESS.parent.parent.parent
PROTECTED = ("bwrap", "landlock")
PROCESSES = 24
# Ids of this run's agents, apart from every other run's on the host (and from 65534, which
# other test runs' agents use: a shared-uid bomb there would starve them).
FIRST_UID = 3_000_000 + os.getpid() % 10_000 * 100
SHARED_UID = FIRST_UID + 99
NOT_ROOT = FIRST_UID + 98  # the engine's own uid in the runs of an engine that is not root
UIDS = f"{FIRST_UID}-{FIRST_UID + 97}"
REFUSED = "Resource temporarily unavailable"
Report = dict[str, Any]


def run_harness(
    mode: str, scenario: str, *, as_user: int | None = None, **settings: str | bool
) -> Report:
    """The harness's report; `as_user`: the engine runs as that uid (root runs it)."""
    # Not under pytest's tmp_path (0700 directories): the agents' users must be able to
    # reach TEAPARTY_HOME when Landlock, which has no mount namespace, confines them.
    base = Path(tempfile.mkdtemp(prefix=f"teaparty-limits-{mode}-", dir="/tmp"))
    try:
        os.chmod(base, 0o711)
        (base / "home").mkdir(mode=0o711)
        os.chmod(base / "home", 0o711)
        python, env = [sys.executable], {"PATH": os.environ["PATH"]}
        harness = HARNESS
        if as_user is not None:
            for path in (base, base / "home"):
                os.chown(path, as_user, as_user)
            drop = (f"--reuid={as_user}", f"--regid={as_user}", "--clear-groups")
            engine, packages = reachable_engine(base / "engine")
            harness = engine / HARNESS.relative_to(ROOT)
            python = ["setpriv", *drop, *unprivileged_python(packages)]
        endless = bool(settings.pop("endless", False))
        config = {"base": str(base), "scenario": scenario, "report": str(base / "r")}
        env |= {"TEAPARTY_SANDBOX": mode, **settings}
        done = subprocess.run(
            [*python, str(harness), json.dumps({**config, "endless": endless})],
            env={k: str(v) for k, v in env.items()},
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            if "does not work on this host" in done.stderr:
                pytest.skip(f"TEAPARTY_SANDBOX={mode}: {done.stderr.strip().splitlines()[-1]}")
            raise AssertionError(f"the harness failed ({mode}):\n{done.stdout}\n{done.stderr}")
        report: Report = json.loads((base / "r").read_text())
        assert report["mode"] == mode, report["reason"]
        return report
    finally:
        shutil.rmtree(base, ignore_errors=True)


def reachable_engine(folder: Path) -> tuple[Path, list[str]]:
    """The engine's code and this Python's packages where the engine's unprivileged user
    can read them (tests/reachable.py); the code comes first on the path the harness makes."""
    return reachable_code(folder), reachable_packages(folder)


def unprivileged_python(packages: list[str]) -> list[str]:
    """An interpreter the engine's unprivileged user can start, also from a child (the
    Landlock launcher is one): this one may lie where only root can search (/root/.pyenv),
    so the system's of this version, given `packages` (this one's, reachable: the editable
    install's .pth files included), when there is one."""
    system = Path("/usr/bin") / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    if not system.exists():
        return [sys.executable]
    boot = (
        f"import runpy, site, sys; [site.addsitedir(p) for p in {packages!r}]; "
        "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    return [str(system), "-c", boot]


def bomb(mode: str, uids: str) -> Report:
    if os.geteuid() != 0:
        pytest.skip("the engine is not root: every agent runs as its uid (SECURITY.md)")
    return run_harness(
        mode,
        "fork",
        TEAPARTY_SANDBOX_UIDS=uids,
        TEAPARTY_SANDBOX_UID=str(SHARED_UID),
        TEAPARTY_SANDBOX_GID=str(SHARED_UID),
        TEAPARTY_SANDBOX_PROCESSES=str(PROCESSES),
    )


@pytest.fixture(scope="module", params=PROTECTED)
def shared_uid(request: pytest.FixtureRequest) -> Report:
    """The fork bomb with the protection off: every agent runs as one uid."""
    return bomb(request.param, "shared")


@pytest.fixture(scope="module", params=PROTECTED)
def uid_per_slot(request: pytest.FixtureRequest) -> Report:
    """The fork bomb as the engine runs: a uid per task slot."""
    return bomb(request.param, UIDS)


@pytest.fixture(scope="module", params=PROTECTED)
def engine_not_root(request: pytest.FixtureRequest) -> tuple[str, Report]:
    """The fork bomb when the engine is not root: every agent runs as the engine's uid."""
    if os.geteuid() != 0:
        pytest.skip("the test shows a non-root engine by running one as root")
    report = run_harness(
        request.param, "fork", as_user=NOT_ROOT, TEAPARTY_SANDBOX_PROCESSES=str(PROCESSES)
    )
    return request.param, report


@pytest.fixture(scope="module")
def unbounded() -> Report:
    """The disk filled with the protection off: no sandbox, the default (large) bound."""
    return run_harness("off", "disk")


@pytest.fixture(scope="module", params=(*PROTECTED, "off"))
def bounded(request: pytest.FixtureRequest) -> Report:
    """The disk filled past TEAPARTY_SANDBOX_DISK_MB=8, in every mode (off too: the engine
    keeps the bound, not the sandbox)."""
    return run_harness(
        request.param,
        "disk",
        TEAPARTY_SANDBOX_UIDS=UIDS,
        TEAPARTY_SANDBOX_DISK_MB="8",
        endless=True,
    )


def test_a_fork_bomb_starves_every_agent_that_shares_its_uid(shared_uid: Report) -> None:
    assert shared_uid["slot_1_owner"] == shared_uid["slot_2_owner"] == [SHARED_UID] * 2
    assert f"uid {SHARED_UID} forked" in shared_uid["full"]
    assert REFUSED in shared_uid["full"], "the bomb reached its limit"
    assert "the second agent ran" not in shared_uid["second"]
    assert REFUSED in shared_uid["second"], shared_uid["second"]


def test_a_fork_bomb_leaves_an_agent_in_another_slot_its_processes(
    uid_per_slot: Report,
) -> None:
    first, second = uid_per_slot["slot_1_owner"], uid_per_slot["slot_2_owner"]
    assert first != second, "each slot has a user of its own"
    assert all(FIRST_UID <= uid <= FIRST_UID + 98 for uid in (*first, *second))
    assert f"uid {first[0]} forked {PROCESSES - 1}: " in uid_per_slot["full"]
    assert REFUSED in uid_per_slot["full"], "the bomb still reached its own limit"
    assert f"uid {second[0]}: the second agent ran" in uid_per_slot["second"]
    assert uid_per_slot["bomb"].startswith(f"uid {first[0]} forked"), uid_per_slot["bomb"]


def test_what_holds_when_the_engine_is_not_root(engine_not_root: tuple[str, Report]) -> None:
    """Agents run as the engine's uid. Under bubblewrap each call has a user namespace of its
    own, where the kernel (5.14+) counts processes apart: agent 2 still runs. Under Landlock
    one uid is one count: agent 1's bomb leaves agent 2 nothing (SECURITY.md says so)."""
    mode, report = engine_not_root
    assert report["slot_1_owner"] == report["slot_2_owner"] == [NOT_ROOT] * 2
    assert f"uid {NOT_ROOT} forked" in report["full"]
    assert REFUSED in report["full"]
    if mode == "bwrap":
        assert f"uid {NOT_ROOT}: the second agent ran" in report["second"]
    else:
        assert REFUSED in report["second"], report["second"]


def test_without_a_bound_an_agent_writes_what_it_likes(unbounded: Report) -> None:
    assert unbounded["lead"] == "lead saw error=False: done: wrote 12 MB"
    assert {f"junk-{i}" for i in range(1, 13)} <= set(unbounded["slot_files"])


def test_a_task_past_its_disk_bound_stops_with_a_note_its_lead_reads(bounded: Report) -> None:
    lead = bounded["lead"]
    assert lead.startswith("lead saw error=True: stopped before finishing (disk: "), lead
    assert "of the 8 MB the operator allows (TEAPARTY_SANDBOX_DISK_MB)" in lead
    assert "done: wrote" not in lead, "the worker's turn ended at the call"
    assert bounded["worker_reply_is_error"]
    assert bounded["failures"] == [], "a stop, not a crash"


def test_a_call_that_writes_without_end_is_stopped_while_it_runs(bounded: Report) -> None:
    endless = bounded["endless"]
    assert endless["stop"] is not None, endless["output"]
    assert endless["stop"].startswith("disk: the task's files reached")
    assert "[sandbox: disk: " in endless["output"]


def test_a_project_file_cannot_raise_the_disk_bound() -> None:
    org = load_organisation(shipped_org_dir())
    text = "humans: {decider: alice}\nsandbox: {network: off, disk_mb: 100000}\n"
    with pytest.raises(ConfigError, match="disk_mb"):
        load_project(text, org=org, source="p", default_name="w")
