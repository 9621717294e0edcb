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

import functools
import itertools
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
MAX_FILE_ENTRIES = 100  # of one file (a job writes at most 5; a person may gather more)
SHELVES_KEPT = 256  # commits whose learnings files a process remembers
BATCH_FROM = 16  # new files at one commit from which they are read in one git call
MAX_QUERY_TERMS = 32
RARE_TERMS = 4  # of a task's words, the rarest among the learnings, that find candidates
FEW_MATCHES = 300  # matches the rare words may have before a learning must share two
CANDIDATES = 40  # ranked candidates read at a time
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

    @functools.cached_property
    def members(self) -> frozenset[str]:
        """The blob ids, to look one up."""
        return frozenset(self.blobs)


def terms_of(text: str) -> tuple[str, ...]:
    """The words of `text` that say what it is about, each quoted as an FTS5 string (the
    text is an agent's: never FTS syntax)."""
    words: dict[str, None] = {}
    for word in _WORD.findall(text.casefold()):
        if word not in STOPWORDS and len(words) < MAX_QUERY_TERMS:
            words[f'"{word}"'] = None
    return tuple(words)


def query_of(text: str) -> str | None:
    """An FTS5 query that matches any of the words of `text` that say what it is about;
    None when it has none."""
    return " OR ".join(terms_of(text)) or None


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
        files = await files_at(mirror, commit)
        blobs = tuple(dict.fromkeys(files.values()))
        seen = await self.store.read(lambda tx: _indexed(tx, blobs))
        new = {path: blob for path, blob in files.items() if blob not in seen}
        if new:
            read = await _read(mirror, commit, new)
            await self.store.write(lambda tx: _index(tx, read))
            log.info("learnings: %d file(s) indexed at %s", len(read), commit[:12])
        shelf = Shelf(commit, blobs)
        if len(self._shelves) >= SHELVES_KEPT:  # the oldest commit asked about goes first
            del self._shelves[next(iter(self._shelves))]
        self._shelves[key] = shelf
        return shelf

    async def recall(
        self, repo: str, shelf: Shelf, text: str, *, limit: int = RECALLED
    ) -> tuple[Learning, ...]:
        """The `limit` learnings on `shelf` most like `text` (BM25), none forgotten in `repo`."""
        terms = terms_of(text)
        if not terms or not shelf.blobs:
            return ()
        return await self.store.read(lambda tx: recall(tx, repo, shelf, terms, limit))

    async def listed(self, repo: str, shelf: Shelf) -> tuple[Learning, ...]:
        """Every learning on `shelf` that `repo` has not forgotten, once each."""
        return await self.store.read(lambda tx: _listed(tx, repo, shelf.blobs))

    async def forget(self, repo: str, entry_id: str, *, by: str) -> bool:
        """Never give the learning `entry_id` in `repo` again; False when it was forgotten."""
        return await self.store.write(lambda tx: forget(tx, repo, entry_id, by=by))

    async def forgotten(self, repo: str) -> frozenset[str]:
        """The ids forgotten in `repo`."""
        return await self.store.read(lambda tx: forgotten(tx, repo))

    async def holding(self, shelf: Shelf, entry_ids: frozenset[str]) -> frozenset[str]:
        """The blobs on `shelf` that hold any of `entry_ids`."""
        return await self.store.read(lambda tx: _holding(tx, shelf, entry_ids))


async def files_at(mirror: Path, commit: str) -> dict[str, str]:
    """The learnings files (`*.md`) at `commit`: each one's blob id, by path."""
    code, out = await git(
        mirror, "ls-tree", "-r", "-z", commit, "--", f"{LEARNINGS_DIR}/", check=False
    )
    files: dict[str, str] = {}
    for record in out.split("\0") if code == 0 else ():
        meta, _, path = record.partition("\t")
        fields = meta.split()
        if len(fields) == 3 and fields[1] == "blob" and path.endswith(".md"):
            files[path] = fields[2]
        if len(files) >= MAX_FILES:
            break
    return files


async def _read(mirror: Path, commit: str, new: dict[str, str]) -> dict[str, tuple[Learning, ...]]:
    """The entries of the files `new` names (path: blob) at `commit`: a few read one by
    one, many in one `git grep` of their entry lines (a first index of a whole repository)."""
    if len(new) <= BATCH_FROM:
        return {blob: await _entries(mirror, blob) for blob in new.values()}
    code, out = await git(
        mirror,
        *("grep", "-z", "-I", "--full-name", "--no-color", "-e", "^- ", commit),
        *("--", f"{LEARNINGS_DIR}/"),
        check=False,
    )
    lines: dict[str, list[str]] = {path: [] for path in new}
    prefix = f"{commit}:"
    for record in out.splitlines() if code == 0 else ():
        path, _, line = record.removeprefix(prefix).partition("\0")
        if path in lines and len(lines[path]) < MAX_FILE_ENTRIES:
            lines[path].append(line)
    return {new[path]: read_file("\n".join(found)) for path, found in lines.items()}


async def _entries(mirror: Path, blob: str) -> tuple[Learning, ...]:
    try:
        _, data = await git_bytes(mirror, "cat-file", "blob", blob)
    except GitError as exc:
        log.warning("learnings blob %s unreadable: %s", blob, exc)
        return ()
    return read_file(data[:MAX_FILE_BYTES].decode(errors="replace"))[:MAX_FILE_ENTRIES]


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
    tx: Tx, repo: str, shelf: Shelf, terms: tuple[str, ...], limit: int
) -> tuple[Learning, ...]:
    """The `limit` learnings on `shelf` most like `terms` (BM25), once per id, none that
    `repo` forgot.

    Ranking costs per match, so the candidates are bounded: the task's RARE_TERMS rarest
    words (by how many learnings hold each); where those match more than FEW_MATCHES
    learnings, only learnings that share two of them, and then those holding the rarest
    words while they match few.
    """
    counted = sorted((count, term) for term in terms if (count := _matches(tx, term)))
    rare = counted[:RARE_TERMS]
    if not rare:
        return ()
    gone = forgotten(tx, repo)
    found: dict[str, Learning] = {}
    if _sum(rare) <= FEW_MATCHES or len(rare) == 1:
        _ranked(tx, " OR ".join(term for _, term in rare), shelf, gone, limit, found)
        return tuple(found.values())
    rarest = [term for _, term in rare]
    pairs = " OR ".join(f"({a} AND {b})" for a, b in itertools.combinations(rarest, 2))
    _ranked(tx, pairs, shelf, gone, limit, found)
    few = [term for n, (_, term) in enumerate(rare) if _sum(rare[: n + 1]) <= FEW_MATCHES]
    if len(found) < limit and few:
        _ranked(tx, " OR ".join(few), shelf, gone, limit, found)
    return tuple(found.values())


def _sum(counted: list[tuple[int, str]]) -> int:
    return sum(count for count, _ in counted)


def _matches(tx: Tx, term: str) -> int:
    """How many learnings hold `term` (a quoted word), found in the index alone."""
    (count,) = tx.execute(
        "SELECT count(*) FROM learnings_fts WHERE learnings_fts MATCH ?", (term,)
    ).fetchone()
    return int(count)


def _ranked(
    tx: Tx,
    query: str,
    shelf: Shelf,
    gone: frozenset[str],
    limit: int,
    found: dict[str, Learning],
) -> None:
    """Add to `found` the best matches of `query` on `shelf` (BM25), up to `limit`: from
    the best CANDIDATES, then, when those were too few on the shelf, from more."""
    for window in (CANDIDATES, CANDIDATES * 16):
        rows = tx.execute(
            "SELECT l.entry_id, l.text, l.source, l.blob FROM (SELECT rowid, rank FROM"
            " learnings_fts WHERE learnings_fts MATCH ? ORDER BY rank LIMIT ?) f"
            " JOIN learnings l ON l.learning_id = f.rowid ORDER BY f.rank",
            (query, window),
        ).fetchall()
        for entry_id, text, source, blob in rows:
            if len(found) < limit and blob in shelf.members and entry_id not in gone:
                found.setdefault(entry_id, Learning(entry_id, text, source))
        if len(found) >= limit or len(rows) < window:
            return


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


def _holding(tx: Tx, shelf: Shelf, entry_ids: frozenset[str]) -> frozenset[str]:
    rows = tx.execute(
        "SELECT DISTINCT blob FROM learnings WHERE entry_id IN (SELECT value FROM json_each(?))",
        (json.dumps(sorted(entry_ids)),),
    )
    return frozenset(blob for (blob,) in rows if blob in shelf.members)


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
