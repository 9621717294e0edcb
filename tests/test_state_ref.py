"""Runner mode's state on a git ref (bot/runner/state.py), on real git and real SQLite: a bare
remote in tmp_path that refuses non-fast-forward pushes, runs each with a home and a work
directory of their own, and events applied through the real deliveries queue."""

from __future__ import annotations

import base64
import http.server
import sqlite3
import subprocess
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from local_repo import ENV, plumbed
from local_repo import git as run_git

from bot.runner.state import (
    DEFAULT_REF,
    FORMAT,
    IDENTITY,
    MAX_BYTES,
    Loaded,
    StateBusyError,
    StateError,
    StateFormatError,
    StateRaceError,
    StateRef,
    StateTooLargeError,
)
from orchestrator.store.deliveries import Arrival, DeliveryQueue
from orchestrator.store.migrations import SCHEMA_VERSION
from orchestrator.store.prune import KEEP_ENDED_DAYS
from orchestrator.store.sqlite import Store, Tx

Apply = Callable[[Path], Awaitable[bool]]
SAVED_AT = 1_800_000_000.0  # 2027-01-15T08:00:00+00:00
TOKEN = "ghs_canaryTokenThatMustNotBeWritten0123"


@pytest.fixture(params=["refuses non-fast-forwards", "takes forced pushes"])
def remote(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """A bare repository with a default branch, as GitHub keeps one: one that refuses
    non-fast-forward pushes (even forced ones), and one that takes forced pushes, as GitHub
    does outside protected branches, where only our never forcing keeps a race a race."""
    source = tmp_path / "source"
    source.mkdir()
    run_git(source, "init", "-q", "-b", "main")
    (source / "README.md").write_text("widgets\n")
    run_git(source, "add", ".")
    run_git(source, "commit", "-qm", "init")
    path = tmp_path / "remote.git"
    run_git(tmp_path, "clone", "-q", "--bare", str(source), str(path))
    if request.param == "refuses non-fast-forwards":
        run_git(path, "config", "receive.denyNonFastForwards", "true")
    return path


def runner(
    tmp_path: Path,
    remote: Path,
    name: str,
    *,
    auth: str | None = None,
    max_bytes: int = MAX_BYTES,
    keep_days: float | None = KEEP_ENDED_DAYS,
) -> tuple[StateRef, Path]:
    """One workflow run: its own state ref object (work directory) and home."""
    ref = StateRef(
        str(remote),
        work=tmp_path / name / "work",
        run=name,
        auth=auth,
        max_bytes=max_bytes,
        keep_days=keep_days,
        clock=lambda: SAVED_AT,
    )
    return ref, tmp_path / name / "home"


def event(delivery_id: str, *, run: str) -> Apply:
    """An event as a run applies it: recorded by delivery id and, when new, an effect row."""

    async def apply(home: Path) -> bool:
        store = await Store.open(home / "teaparty.db")
        try:
            (new,) = await DeliveryQueue(store).record_all(
                [Arrival(delivery_id, "issue_comment", "created", b"{}")]
            )
            if new:
                await store.write(lambda tx: _effect(tx, delivery_id, run))
                await DeliveryQueue(store).done(delivery_id, outcome=f"applied by {run}")
            return new
        finally:
            await store.close()

    return apply


def _effect(tx: Tx, delivery_id: str, run: str) -> None:
    tx.execute("CREATE TABLE IF NOT EXISTS effects (delivery_id TEXT NOT NULL, run TEXT)")
    tx.execute("INSERT INTO effects VALUES (?, ?)", (delivery_id, run))


async def effects(home: Path) -> list[tuple[str, str]]:
    store = await Store.open(home / "teaparty.db")
    try:
        return await store.read(
            lambda tx: tx.execute("SELECT delivery_id, run FROM effects ORDER BY 1").fetchall()
        )
    finally:
        await store.close()


def remote_commit(remote: Path, ref: str = DEFAULT_REF) -> str | None:
    found = subprocess.run(
        ["git", "-C", str(remote), "rev-parse", "--verify", "--quiet", ref],
        capture_output=True,
        text=True,
        env=ENV,
    )
    return found.stdout.strip() or None


async def test_a_first_run_finds_no_state_and_the_next_run_loads_what_it_saved(
    tmp_path: Path, remote: Path
) -> None:
    first, home = runner(tmp_path, remote, "run-1")
    assert await first.load(home) == Loaded(None)
    assert not (home / "teaparty.db").exists()
    assert await event("d-1", run="run-1")(home)
    commit = await first.save(home, None, message="Issue #1: labelled")

    assert remote_commit(remote) == commit
    assert run_git(remote, "for-each-ref", "--format=%(refname)", "refs/heads") == (
        "refs/heads/main\n"
    ), "the state is on no branch"
    shown = run_git(remote, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%P|%s", commit)
    who = f"{IDENTITY[0]} <{IDENTITY[1]}>"
    assert shown == f"{who}|{who}||Issue #1: labelled\n", "a root commit by TeaParty"
    assert run_git(remote, "ls-tree", "--name-only", commit).split() == [
        "state.json",
        "teaparty.db",
    ]

    second, home2 = runner(tmp_path, remote, "run-2")
    loaded = await second.load(home2)
    assert loaded.base == commit
    assert loaded.info is not None
    assert (loaded.info.format, loaded.info.schema) == (FORMAT, SCHEMA_VERSION)
    assert (loaded.info.saved_at, loaded.info.run) == ("2027-01-15T08:00:00+00:00", "run-1")
    assert await effects(home2) == [("d-1", "run-1")]
    assert not await event("d-1", run="run-2")(home2), "the delivery id is remembered"
    assert await event("d-2", run="run-2")(home2)
    again = await second.save(home2, loaded.base, message="Issue #1: a comment")
    assert run_git(remote, "log", "-1", "--format=%P", again).strip() == commit


async def test_a_save_of_an_unchanged_store_pushes_nothing(tmp_path: Path, remote: Path) -> None:
    ref, home = runner(tmp_path, remote, "run-1")
    await event("d-1", run="run-1")(home)
    commit = await ref.save(home, None, message="first")
    assert await ref.save(home, commit, message="nothing new") == commit
    assert run_git(remote, "rev-list", "--count", DEFAULT_REF).strip() == "1"


async def test_of_two_runs_that_loaded_the_same_state_the_second_to_save_gets_a_race(
    tmp_path: Path, remote: Path
) -> None:
    a, home_a = runner(tmp_path, remote, "run-a")
    b, home_b = runner(tmp_path, remote, "run-b")
    assert (await a.load(home_a)).base is (await b.load(home_b)).base is None
    await event("d-a", run="run-a")(home_a)
    await event("d-b", run="run-b")(home_b)
    first = await a.save(home_a, None, message="a")
    with pytest.raises(StateRaceError, match="another run saved first") as raced:
        await b.save(home_b, None, message="b")  # both first runs: the ref exists now
    assert (raced.value.base, raced.value.found) == (None, first)
    assert remote_commit(remote) == first

    base = (await a.load(home_a)).base
    assert base == first
    assert (await b.load(home_b)).base == first
    await event("d-a2", run="run-a")(home_a)
    await event("d-b2", run="run-b")(home_b)
    second = await a.save(home_a, base, message="a again")
    with pytest.raises(StateRaceError) as raced:
        await b.save(home_b, base, message="b again")
    assert (raced.value.base, raced.value.found) == (first, second)
    assert remote_commit(remote) == second, "the loser changed nothing"


async def test_apply_with_retries_applies_the_event_again_on_the_newer_state(
    tmp_path: Path, remote: Path
) -> None:
    """Run B loads, and while it applies its event run A loads, applies and saves its own:
    B's save is refused, and B starts over from A's state, so both events are there once."""
    a, home_a = runner(tmp_path, remote, "run-a")
    b, home_b = runner(tmp_path, remote, "run-b")
    calls: list[bool] = []
    sleeps: list[float] = []
    winner: list[str] = []

    async def apply_b(home: Path) -> bool:
        if not calls:  # the first time only: A overtakes B
            done = await a.apply_with_retries(home_a, event("d-a", run="run-a"))
            winner.append(done.commit)
        calls.append(await event("d-b", run="run-b")(home))
        return calls[-1]

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    done = await b.apply_with_retries(
        home_b, apply_b, message="B", backoff=2.0, sleep=sleep, jitter=lambda: 0.5
    )
    assert (done.attempts, done.value, calls) == (2, True, [True, True])
    assert sleeps == [1.5], "one wait: 2 s times 0.75"
    assert remote_commit(remote) == done.commit
    assert run_git(remote, "log", "-1", "--format=%P", done.commit).strip() == winner[0]

    check, home = runner(tmp_path, remote, "check")
    await check.load(home)
    assert await effects(home) == [("d-a", "run-a"), ("d-b", "run-b")]


async def test_one_event_run_twice_at_once_takes_effect_once(tmp_path: Path, remote: Path) -> None:
    """Two runs for the same delivery (a redelivery, a rerun): the one that loses the race
    applies it again to a state that has it already, and the delivery id dedupes it."""
    a, home_a = runner(tmp_path, remote, "run-a")
    b, home_b = runner(tmp_path, remote, "run-b")
    outcomes: list[bool] = []

    async def apply_b(home: Path) -> bool:
        if not outcomes:
            await a.apply_with_retries(home_a, event("d-1", run="run-a"))
        outcomes.append(await event("d-1", run="run-b")(home))
        return outcomes[-1]

    async def no_wait(_: float) -> None:
        return None

    done = await b.apply_with_retries(home_b, apply_b, sleep=no_wait)
    assert outcomes == [True, False], "new on the old state, known on the newer one"
    assert done.commit == remote_commit(remote)
    assert await effects(home_b) == [("d-1", "run-a")]


async def test_apply_with_retries_gives_up_after_its_attempts(tmp_path: Path, remote: Path) -> None:
    ref, home = runner(tmp_path, remote, "slow")
    rival, rival_home = runner(tmp_path, remote, "rival")
    sleeps: list[float] = []
    applied: list[str] = []

    async def apply(home: Path) -> bool:  # another run always saves while this one applies
        applied.append(f"d-{len(applied)}")
        await rival.apply_with_retries(rival_home, event(f"r-{len(applied)}", run="rival"))
        return await event(applied[-1], run="slow")(home)

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    with pytest.raises(StateBusyError, match="another run saved first on each of 3") as gave_up:
        await ref.apply_with_retries(home, apply, attempts=3, backoff=1.0, sleep=sleep)
    assert gave_up.value.attempts == 3
    assert len(applied) == 3
    assert len(sleeps) == 2
    assert 0.5 <= sleeps[0] < 1.0 <= sleeps[1] < 2.0, "doubling, with jitter"


def output(repo: Path, *args: str) -> bytes:
    """What git writes for `args` in `repo`, as bytes."""
    return subprocess.run(
        ["git", "--git-dir", str(repo), *args], capture_output=True, check=True, env=ENV
    ).stdout


def plant(remote: Path, files: dict[str, bytes], ref: str = DEFAULT_REF) -> str:
    """A commit with `files` on `ref` of `remote`, made with git as anyone could."""
    return plumbed(remote, ref, files, message="planted", on_top=False)


@pytest.mark.parametrize(
    ("info", "says"),
    [
        ('{"format": 2, "schema": 1, "saved_at": "", "run": ""}', "state format 2, newer than"),
        (
            f'{{"format": 1, "schema": {SCHEMA_VERSION + 1}, "saved_at": "", "run": ""}}',
            f"store schema {SCHEMA_VERSION + 1}, newer than",
        ),
    ],
)
async def test_state_newer_than_this_teaparty_is_refused_naming_the_ref(
    tmp_path: Path, remote: Path, info: str, says: str
) -> None:
    planted = plant(remote, {"state.json": info.encode(), "teaparty.db": b"from the future"})
    ref, home = runner(tmp_path, remote, "old")
    with pytest.raises(StateFormatError) as refused:
        await ref.load(home)
    message = str(refused.value)
    assert message.startswith(f"refs/teaparty/state of {remote} at {planted[:12]} has ")
    assert says in message
    assert "upgrade teaparty" in message
    assert not (home / "teaparty.db").exists()


async def test_a_ref_that_holds_something_else_is_not_loaded(tmp_path: Path, remote: Path) -> None:
    plant(remote, {"notes.txt": b"hello"})
    ref, home = runner(tmp_path, remote, "run")
    with pytest.raises(StateFormatError, match="has no state.json: not TeaParty state"):
        await ref.load(home)
    plant(remote, {"state.json": b"[1, 2]", "teaparty.db": b""})
    with pytest.raises(StateFormatError, match="state.json is not TeaParty state"):
        await ref.load(home)


async def test_the_snapshot_is_one_wal_free_file_even_while_a_store_is_open(
    tmp_path: Path, remote: Path
) -> None:
    ref, home = runner(tmp_path, remote, "run")
    marker = b"only-in-the-write-ahead-log"
    store = await Store.open(home / "teaparty.db", exclusive=False)  # no background checkpoint
    try:
        await store.write(
            lambda tx: tx.execute("INSERT INTO proxy_settings VALUES ('marker', ?)", (marker,))
        )
        assert marker not in (home / "teaparty.db").read_bytes(), "a byte copy would lose it"
        assert marker in (home / "teaparty.db-wal").read_bytes()
        commit = await ref.save(home, None, message="while open")
    finally:
        await store.close()

    saved = tmp_path / "saved.db"
    saved.write_bytes(output(remote, "cat-file", "blob", f"{commit}:teaparty.db"))
    header = saved.read_bytes()[:100]
    assert header.startswith(b"SQLite format 3\x00")
    assert header[18:20] == b"\x01\x01", "rollback journal, not WAL (2, 2)"
    db = sqlite3.connect(f"{saved.as_uri()}?immutable=1", uri=True)
    try:
        assert db.execute("PRAGMA quick_check").fetchone() == ("ok",)
        assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        row = db.execute("SELECT value FROM proxy_settings WHERE name = 'marker'").fetchone()
        assert row == (marker,)
    finally:
        db.close()


async def test_loading_replaces_a_crashed_store_and_its_write_ahead_log(
    tmp_path: Path, remote: Path
) -> None:
    """A home where a run died left a store whose last write is only in its WAL: the loaded
    state replaces it whole, and that WAL is not replayed onto it."""
    first, home = runner(tmp_path, remote, "run-1")
    await event("d-1", run="run-1")(home)
    await first.save(home, None, message="d-1")

    second, crashed = runner(tmp_path, remote, "run-2")
    store = await Store.open(crashed / "teaparty.db", exclusive=False)
    await DeliveryQueue(store).record_all([Arrival("stale", "issues", "labeled", b"{}")])
    left = {p.name: p.read_bytes() for p in crashed.glob("teaparty.db*") if p.is_file()}
    await store.close()
    for name, content in left.items():
        (crashed / name).write_bytes(content)
    assert b"stale" in left["teaparty.db-wal"]

    await second.load(crashed)
    assert not (crashed / "teaparty.db-wal").exists()
    assert await effects(crashed) == [("d-1", "run-1")]
    store = await Store.open(crashed / "teaparty.db")
    try:
        assert await DeliveryQueue(store).get("stale") is None
        assert await store.read(lambda tx: tx.execute("PRAGMA quick_check").fetchone()) == ("ok",)
    finally:
        await store.close()


async def test_a_store_an_engine_holds_is_not_replaced(tmp_path: Path, remote: Path) -> None:
    ref, home = runner(tmp_path, remote, "run")
    await event("d-1", run="run")(home)
    await ref.save(home, None, message="d-1")
    store = await Store.open(home / "teaparty.db")
    try:
        with pytest.raises(StateError, match="in use by another teaparty process"):
            await ref.load(home)
    finally:
        await store.close()


async def big_delivery(home: Path, *, days_ago: float) -> None:
    """A handled delivery of 1 MB received `days_ago` days ago."""
    store = await Store.open(home / "teaparty.db")
    try:
        queue = DeliveryQueue(store)
        await queue.record_all([Arrival("big", "issues", "labeled", b"x" * 1_000_000)])
        await queue.done("big", outcome="done")
        shift = days_ago * 86_400
        await store.write(
            lambda tx: tx.execute("UPDATE deliveries SET received_at = received_at - ?", (shift,))
        )
    finally:
        await store.close()


async def test_a_snapshot_over_the_bound_is_refused_saying_how_to_prune(
    tmp_path: Path, remote: Path
) -> None:
    ref, home = runner(tmp_path, remote, "run", max_bytes=700_000)
    await big_delivery(home, days_ago=1)
    with pytest.raises(StateTooLargeError) as refused:
        await ref.save(home, None, message="too big")
    assert refused.value.limit == 700_000
    assert refused.value.size > 1_000_000
    assert "over the 0.7 MiB bound for refs/teaparty/state of" in str(refused.value)
    assert "jobs that ended over 30 days ago were pruned; keep fewer days (keep_days)" in str(
        refused.value
    )
    assert "raise the bound (max_bytes)" in str(refused.value)
    assert remote_commit(remote) is None, "nothing was pushed"

    unpruned, _ = runner(tmp_path, remote, "run", max_bytes=700_000, keep_days=None)
    with pytest.raises(StateTooLargeError, match="pruning is off; turn it on"):
        await unpruned.save(home, None, message="too big")


async def test_the_saved_snapshot_is_pruned_and_the_home_store_is_not(
    tmp_path: Path, remote: Path
) -> None:
    ref, home = runner(tmp_path, remote, "run", max_bytes=700_000)
    await big_delivery(home, days_ago=31)
    commit = await ref.save(home, None, message="pruned")
    size = run_git(remote, "cat-file", "-s", f"{commit}:teaparty.db")
    assert int(size) < 700_000
    assert (home / "teaparty.db").stat().st_size > 1_000_000, "only the snapshot is pruned"
    check, home2 = runner(tmp_path, remote, "check")
    await check.load(home2)
    store = await Store.open(home2 / "teaparty.db")
    try:
        assert await DeliveryQueue(store).get("big") is None
    finally:
        await store.close()


class Recorder(http.server.BaseHTTPRequestHandler):
    """A git HTTP remote that answers nothing, and notes the Authorization header it got."""

    seen: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        self.seen.append(self.headers.get("Authorization"))
        self.send_error(404)

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def recorder() -> Iterator[str]:
    Recorder.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/o/r.git"
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


async def test_the_auth_header_reaches_the_remote_and_is_written_nowhere(
    tmp_path: Path, remote: Path, recorder: str
) -> None:
    header = "Authorization: Basic " + base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    secrets = [TOKEN, header.split()[-1]]

    http_ref = StateRef(recorder, work=tmp_path / "http-work", auth=header)
    with pytest.raises(StateError) as failed:
        await http_ref.load(tmp_path / "http-home")
    assert Recorder.seen
    assert set(Recorder.seen) == {header.removeprefix("Authorization: ")}
    assert not any(secret in str(failed.value) for secret in secrets)

    ref, home = runner(tmp_path, remote, "run", auth=header)
    await ref.load(home)
    await event("d-1", run="run")(home)
    base = await ref.save(home, None, message="with a token")
    await ref.load(home)
    await event("d-2", run="run")(home)
    await ref.save(home, base, message="again")
    assert not any(secret in repr(ref) for secret in secrets)

    places: dict[str, bytes] = {}
    for folder in (tmp_path / "run" / "work", tmp_path / "http-work", remote):
        places |= {str(p): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    for repo in (ref.repo, http_ref.repo, remote):
        # loose objects are compressed: their contents, as git reads them
        places[f"objects of {repo}"] = output(repo, "cat-file", "--batch-all-objects", "--batch")
    assert str(ref.repo / "config") in places
    assert b"teaparty.db" in places[f"objects of {remote}"], "the state commit was read"
    for secret in secrets:
        for where, content in places.items():
            assert secret.encode() not in content, f"the token is in {where}"


async def test_a_push_the_remote_refuses_for_another_reason_is_no_race(
    tmp_path: Path, remote: Path
) -> None:
    """A host that will not take the ref (GitHub refuses `refs/pull/*` so): git's words, and
    no retry."""
    run_git(remote, "config", "receive.hideRefs", "refs/teaparty")
    ref, home = runner(tmp_path, remote, "run")
    await event("d-1", run="run")(home)
    with pytest.raises(StateError, match="deny updating a hidden ref") as refused:
        await ref.save(home, None, message="d-1")
    assert not isinstance(refused.value, StateRaceError)


async def test_a_snapshot_that_is_not_a_database_is_not_loaded(
    tmp_path: Path, remote: Path
) -> None:
    info = f'{{"format": 1, "schema": {SCHEMA_VERSION}, "saved_at": "", "run": ""}}'
    plant(remote, {"state.json": info.encode(), "teaparty.db": b"no SQLite here" * 100})
    ref, home = runner(tmp_path, remote, "run")
    with pytest.raises(StateError, match="cannot load refs/teaparty/state of .* SQLite database"):
        await ref.load(home)
    assert not (home / "teaparty.db").exists()


async def test_saving_needs_a_store_and_retrying_an_attempt(tmp_path: Path, remote: Path) -> None:
    ref, home = runner(tmp_path, remote, "run")
    with pytest.raises(StateError, match="cannot save refs/teaparty/state of .*: no store at"):
        await ref.save(home, None, message="nothing")
    with pytest.raises(StateError, match="needs at least one attempt, not 0"):
        await ref.apply_with_retries(home, event("d-1", run="run"), attempts=0)


def test_messages_show_no_credential_a_remote_url_carries(tmp_path: Path) -> None:
    ref = StateRef(f"https://x-access-token:{TOKEN}@github.example/o/r.git", work=tmp_path)
    assert ref.where == "refs/teaparty/state of https://github.example/o/r.git"
    assert TOKEN not in repr(ref)


def test_a_ref_or_remote_git_would_misread_is_refused(tmp_path: Path) -> None:
    for ref in ("refs/teaparty/../heads/main", "teaparty/state", "refs/x", "refs/a b/c"):
        with pytest.raises(StateError, match="is not a full ref name"):
            StateRef("/r.git", work=tmp_path, ref=ref)
    with pytest.raises(StateError, match="would be read as a git option"):
        StateRef("--upload-pack=touch /tmp/x", work=tmp_path)


async def test_the_work_directory_may_not_be_in_the_home(tmp_path: Path, remote: Path) -> None:
    ref = StateRef(str(remote), work=tmp_path / "home" / "state")
    with pytest.raises(StateError, match="must not be inside"):
        await ref.load(tmp_path / "home")


async def test_a_push_that_meets_another_runs_push_under_way_is_a_race(
    tmp_path: Path, remote: Path
) -> None:
    """Two runs saving at the same moment: the remote holds the ref's lock for one push and
    refuses the other ("cannot lock ref", the ref not yet moved). That is a lost race too:
    the run loads again and saves once the other push is through."""
    lock = remote / "refs" / "teaparty" / "state.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")  # another run's push, under way
    ref, home = runner(tmp_path, remote, "run")
    await event("d-1", run="run")(home)
    with pytest.raises(StateRaceError, match="was being written by another run"):
        await ref.save(home, None, message="d-1")

    async def sleep(_: float) -> None:
        lock.unlink(missing_ok=True)  # the other push is through (it changed nothing here)

    done = await ref.apply_with_retries(home, event("d-1", run="run"), sleep=sleep)
    assert done.attempts == 2
    assert remote_commit(remote) == done.commit
