"""`teaparty learnings`: the learnings a local repository keeps, and forgetting one.

A local run's learnings are proposed on its job branch; they are kept once the person
merges that branch into the branch later jobs start from (HEAD when they start). So the
list is read from HEAD of the person's repository, the kept files, with the ids the state
directory's store has forgotten for that repository marked. Forgetting records the id in
the store (never given to a task again, from now on) and the next job's branch removes it
from its file, so once that branch is merged the repository itself has forgotten it (a
lost store forgets nothing that was merged).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchestrator.core.errors import StoreLockedError
from orchestrator.jobs.local_repo import local_repository, user_git
from orchestrator.memory.entries import LEARNINGS_DIR, Learning, is_id, read_file
from orchestrator.memory.index import forget, forgotten
from orchestrator.store.sqlite import Store

MAX_FILES = 5_000


@dataclass(frozen=True)
class KeptLearning:
    """A learning the repository keeps at HEAD: in which file, and whether it is forgotten."""

    learning: Learning
    path: str
    forgotten: bool


async def kept_learnings(repo: Path, home: Path) -> tuple[KeptLearning, ...]:
    """The learnings in the files at `repo`'s HEAD, marked where the store forgot them."""
    gone = await _forgotten(home, local_repository(repo))
    code, out = await user_git(
        repo, "ls-tree", "-r", "-z", "--name-only", "HEAD", "--", f"{LEARNINGS_DIR}/", check=False
    )
    found: list[KeptLearning] = []
    for path in (out.split("\0") if code == 0 else [])[:MAX_FILES]:
        if not path.endswith(".md"):
            continue
        code, text = await user_git(repo, "cat-file", "blob", f"HEAD:{path}", check=False)
        for learning in read_file(text) if code == 0 else ():
            found.append(KeptLearning(learning, path, learning.entry_id in gone))
    return tuple(found)


async def forget_learning(repo: Path, home: Path, entry_id: str, *, by: str) -> bool:
    """Record `entry_id` as forgotten for `repo` in the store under `home` (made if need
    be; beside a process that holds it, written all the same: SQLite serialises the two);
    False when it was forgotten already. ValueError when it is no id (the caller checks
    with `is_id`)."""
    if not is_id(entry_id):
        raise ValueError(f"{entry_id!r} is not a learning's id")
    key = local_repository(repo)
    try:
        store = await Store.open(home / "teaparty.db")
    except StoreLockedError:
        store = await Store.attach(home / "teaparty.db", readonly=False)
    try:
        return await store.write(lambda tx: forget(tx, key, entry_id, by=by))
    finally:
        await store.close()


async def _forgotten(home: Path, repo: str) -> frozenset[str]:
    path = home / "teaparty.db"
    if not path.is_file():
        return frozenset()
    store = await Store.attach(path)
    try:
        return await store.read(lambda tx: forgotten(tx, repo))
    finally:
        await store.close()
