"""The store's index of the learnings a repository keeps, searched by text (SQLite FTS5,
ranked by BM25), and the learnings its maintainers forgot.

Owns the tables `learning_blobs`, `learnings`, `learnings_fts` and `learnings_forgotten`.

A job reads the learnings files at its base commit in the engine's mirror (what came from
the forge: merged work, never a worktree an agent writes): `git ls-tree` lists their blob
ids, and only a blob the index has not seen is read, parsed and indexed, once (a blob id
is its content). What a task is given is searched among the blobs of its job's base alone,
so a learning that never reached that commit (its pull request closed unmerged, its local
branch never merged) is never found. A forgotten id is never found again in its repository.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from orchestrator.memory.entries import LEARNINGS_DIR, Learning, read_file
from orchestrator.store.sqlite import Store, Tx, now
from orchestrator.workspace.git import GitError, git, git_bytes

log = logging.getLogger(__name__)
RECALLED = 3  # learnings a task is given at most
MAX_FILES = 5_000  # learnings files read at one commit
MAX_FILE_BYTES = 64 * 1024
MAX_QUERY_TERMS = 32
_WORD = re.compile(r"[^\W_]{3,}", re.UNICODE)
# Words too common in a task's spec to say what it is about.
STOPWORDS = frozenset(
    """the and for with that this from are was were been have has had not but all any can
    its into than then them they their there these those what when where which while who
    will would should could must may might each every our your you use used using only
    also more most some such very just task tasks spec make made does done doing add new
    one two via per out off about after before over under file files code change changes
    acceptance criteria request issue job""".split()
)


@dataclass(frozen=True)
class Shelf:
    """The learnings files at one commit: their blob ids, every one indexed."""

    commit: str
    blobs: tuple[str, ...]


def query_of(text: str) -> str | None:
    """An FTS5 query that matches any of the words of `text` that say what it is about
    (each quoted: the text is an agent's, never FTS syntax); None when it has none."""
    words: dict[str, None] = {}
    for word in _WORD.findall(text.casefold()):
        if word not in STOPWORDS and len(words) < MAX_QUERY_TERMS:
            words[word] = None
    return " OR ".join(f'"{word}"' for word in words) or None


class LearningIndex:
    """The learnings of every repository's files, indexed once per blob, and the forgotten."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._shelves: dict[tuple[str, str], Shelf] = {}

    async def shelf(self, mirror: Path, commit: str) -> Shelf:
        """The learnings files at `commit` in the mirror, indexed (those new to the index
        read now); remembered per commit, as a commit's files never change."""
        key = (str(mirror), commit)
        if (known := self._shelves.get(key)) is not None:
            return known
        blobs = await _blobs_at(mirror, commit)
        seen = await self.store.read(lambda tx: _indexed(tx, blobs))
        read: dict[str, tuple[Learning, ...]] = {}
        for blob in blobs:
            if blob not in seen:
                read[blob] = await _entries(mirror, blob)
        if read:
            await self.store.write(lambda tx: _index(tx, read))
            log.info("learnings: %d file(s) indexed at %s", len(read), commit[:12])
        shelf = Shelf(commit, blobs)
        self._shelves[key] = shelf
        return shelf

    async def recall(
        self, repo: str, shelf: Shelf, text: str, *, limit: int = RECALLED
    ) -> tuple[Learning, ...]:
        """The `limit` learnings on `shelf` most like `text` (BM25), none forgotten in `repo`."""
        query = query_of(text)
        if query is None or not shelf.blobs:
            return ()
        return await self.store.read(lambda tx: recall(tx, repo, shelf.blobs, query, limit))

    async def listed(self, repo: str, shelf: Shelf) -> tuple[Learning, ...]:
        """Every learning on `shelf` that `repo` has not forgotten, once each."""
        return await self.store.read(lambda tx: _listed(tx, repo, shelf.blobs))

    async def forget(self, repo: str, entry_id: str, *, by: str) -> bool:
        """Never give the learning `entry_id` in `repo` again; False when it was forgotten."""
        return await self.store.write(lambda tx: forget(tx, repo, entry_id, by=by))

    async def forgotten(self, repo: str) -> frozenset[str]:
        """The ids forgotten in `repo`."""
        return await self.store.read(lambda tx: forgotten(tx, repo))


async def _blobs_at(mirror: Path, commit: str) -> tuple[str, ...]:
    """The blob ids of the learnings files (`*.md`) at `commit`, sorted by path."""
    code, out = await git(
        mirror, "ls-tree", "-r", "-z", commit, "--", f"{LEARNINGS_DIR}/", check=False
    )
    if code != 0:
        return ()
    blobs: list[str] = []
    for record in out.split("\0"):
        meta, _, path = record.partition("\t")
        fields = meta.split()
        if len(fields) == 3 and fields[1] == "blob" and path.endswith(".md"):
            blobs.append(fields[2])
    return tuple(dict.fromkeys(blobs[:MAX_FILES]))


async def _entries(mirror: Path, blob: str) -> tuple[Learning, ...]:
    try:
        _, data = await git_bytes(mirror, "cat-file", "blob", blob)
    except GitError as exc:
        log.warning("learnings blob %s unreadable: %s", blob, exc)
        return ()
    return read_file(data[:MAX_FILE_BYTES].decode(errors="replace"))


def _indexed(tx: Tx, blobs: tuple[str, ...]) -> frozenset[str]:
    rows = tx.execute(
        "SELECT blob FROM learning_blobs WHERE blob IN (SELECT value FROM json_each(?))",
        (json.dumps(blobs),),
    )
    return frozenset(row[0] for row in rows)


def _index(tx: Tx, read: dict[str, tuple[Learning, ...]]) -> None:
    at = now()
    for blob, entries in read.items():
        added = tx.execute(
            "INSERT OR IGNORE INTO learning_blobs (blob, entries, indexed_at) VALUES (?, ?, ?)",
            (blob, len(entries), at),
        )
        if not added.rowcount:
            continue
        for entry in entries:
            row = tx.execute(
                "INSERT INTO learnings (blob, entry_id, text, source) VALUES (?, ?, ?, ?)",
                (blob, entry.entry_id, entry.text, entry.source),
            )
            tx.execute(
                "INSERT INTO learnings_fts (rowid, text) VALUES (?, ?)", (row.lastrowid, entry.text)
            )


def recall(
    tx: Tx, repo: str, blobs: tuple[str, ...], query: str, limit: int
) -> tuple[Learning, ...]:
    """The best `limit` matches of the FTS5 `query` among `blobs`, once per id."""
    rows = tx.execute(
        "SELECT l.entry_id, l.text, l.source FROM learnings_fts f"
        " JOIN learnings l ON l.learning_id = f.rowid"
        " WHERE learnings_fts MATCH ? AND l.blob IN (SELECT value FROM json_each(?))"
        " AND l.entry_id NOT IN (SELECT entry_id FROM learnings_forgotten WHERE repo = ?)"
        " ORDER BY bm25(learnings_fts) LIMIT ?",
        (query, json.dumps(blobs), repo, limit * 4),
    )
    found: dict[str, Learning] = {}
    for entry_id, text, source in rows:
        if len(found) < limit:
            found.setdefault(entry_id, Learning(entry_id, text, source))
    return tuple(found.values())


def _listed(tx: Tx, repo: str, blobs: tuple[str, ...]) -> tuple[Learning, ...]:
    rows = tx.execute(
        "SELECT l.entry_id, l.text, l.source FROM learnings l"
        " WHERE l.blob IN (SELECT value FROM json_each(?))"
        " AND l.entry_id NOT IN (SELECT entry_id FROM learnings_forgotten WHERE repo = ?)"
        " ORDER BY l.learning_id",
        (json.dumps(blobs), repo),
    )
    found: dict[str, Learning] = {}
    for entry_id, text, source in rows:
        found.setdefault(entry_id, Learning(entry_id, text, source))
    return tuple(found.values())


def forget(tx: Tx, repo: str, entry_id: str, *, by: str) -> bool:
    """Record `entry_id` as forgotten in `repo`; False when it was already."""
    done = tx.execute(
        "INSERT OR IGNORE INTO learnings_forgotten (repo, entry_id, forgotten_by, forgotten_at)"
        " VALUES (?, ?, ?, ?)",
        (repo, entry_id, by, now()),
    )
    return bool(done.rowcount)


def forgotten(tx: Tx, repo: str) -> frozenset[str]:
    """The ids forgotten in `repo`."""
    rows = tx.execute("SELECT entry_id FROM learnings_forgotten WHERE repo = ?", (repo,))
    return frozenset(row[0] for row in rows)
