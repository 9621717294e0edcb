"""A user per worktree when the engine is root (TEAPARTY_SANDBOX_UIDS)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator.core.errors import SandboxError
from orchestrator.sandbox.identities import Identities, host_ids
from orchestrator.sandbox.probe import probe

SLOT_1, SLOT_2, SLOT_3 = Path("/h/slots/slot-1"), Path("/h/slots/slot-2"), Path("/h/slot-3")


def etc(tmp_path: Path, **files: str) -> Path:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_each_worktree_gets_an_id_of_its_own_until_it_is_forgotten() -> None:
    pool = Identities(5000, 5002)
    assert [pool.of(SLOT_1), pool.of(SLOT_2), pool.of(SLOT_1)] == [
        (5000, 5000),
        (5001, 5001),
        (5000, 5000),
    ]
    pool.forget(SLOT_1)
    assert pool.of(SLOT_3) == (5000, 5000), "a forgotten worktree's id goes to the next"
    assert pool.of(SLOT_1) == (5002, 5002)
    with pytest.raises(SandboxError, match="no free id left in TEAPARTY_SANDBOX_UIDS=5000-5002"):
        pool.of(Path("/h/slot-4"))


def test_ids_the_host_gives_anyone_are_skipped(tmp_path: Path) -> None:
    files = etc(
        tmp_path,
        passwd="root:x:0:0::/root:/bin/sh\nalice:x:100000:100003::/home/alice:/bin/sh\n",
        group="# comment\nstaff:x:100001:\n",
        subuid="alice:100004:3\n",
        subgid="alice:100008:1\nbroken line\n",
    )
    assert host_ids(files) == (
        (0, 0),
        (100000, 100000),
        (100001, 100001),
        (100003, 100003),
        (100004, 100006),
        (100008, 100008),
    )
    pool = Identities.from_env({}, etc=files)
    assert pool is not None
    given = [pool.of(Path(f"/w/{n}"))[0] for n in range(4)]
    assert given == [100002, 100007, 100009, 100010]


def test_a_range_the_host_has_given_away_is_refused_at_start(tmp_path: Path) -> None:
    files = etc(tmp_path, subuid="alice:100000:65536\nbob:165536:65536\n", subgid="")
    with pytest.raises(SandboxError, match=r"only 0 of its ids are free .*subuid"):
        Identities.from_env({}, etc=files)
    wide = Identities.from_env({"TEAPARTY_SANDBOX_UIDS": "100000-231135"}, etc=files)
    assert wide is not None
    assert wide.free() == 64
    assert wide.of(SLOT_1) == (231072, 231072)


def test_shared_runs_every_agent_as_one_user() -> None:
    assert Identities.from_env({"TEAPARTY_SANDBOX_UIDS": "shared"}) is None


@pytest.mark.parametrize("raw", ["100", "0-10", "10-5", "a-b", "1-4294967295", "-5"])
def test_a_malformed_range_names_the_setting(raw: str) -> None:
    with pytest.raises(SandboxError, match="TEAPARTY_SANDBOX_UIDS"):
        Identities.from_env({"TEAPARTY_SANDBOX_UIDS": raw})


async def test_probe_refuses_a_malformed_range_as_root(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the range is read only when the engine is root")
    with pytest.raises(SandboxError, match="TEAPARTY_SANDBOX_UIDS"):
        await probe({"TEAPARTY_SANDBOX": "off", "TEAPARTY_SANDBOX_UIDS": "7"}, home=tmp_path)
