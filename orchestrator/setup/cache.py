"""Prepared environments on disk: one directory per preparation, found by cache key.

    {root}/{repository}/{key}.json       the outcome of the last setup of `key` that succeeded
    {root}/{repository}/{key}.lock       held while `key` is being prepared
    {root}/{repository}/{key}-{n}/work   the checkout the setup ran in: what tasks see
    {root}/{repository}/{key}-{n}/outcome.json, setup.log, .used (its time: last use)

Entries are never shared across repositories. A preparation that failed is used by its
own job but never indexed, so the next job prepares again. Locks are `flock`s, which die
with the process: a crash mid-setup leaves an entry without an outcome, removed first by
the next eviction. A running job holds its entry (a shared lock on `.in-use`); eviction,
least recently used first past the size bound, skips held entries.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.core.errors import SandboxError
from orchestrator.sandbox.disk import usage

_PART = re.compile(r"[A-Za-z0-9._-]{1,100}")
_KEY = re.compile(r"[0-9a-f]{32}")
_ENTRY = re.compile(r"[0-9a-f]{32}-[0-9a-f]{8}")
BOUND_VARIABLE = "TEAPARTY_SETUP_CACHE_MB"
DEFAULT_BOUND_MB = 20_480


def bound_from_env(env: Mapping[str, str]) -> int:
    """The cache's size bound in MB: TEAPARTY_SETUP_CACHE_MB, else 20 GB; SandboxError
    naming the variable when it is not a positive whole number."""
    raw = env.get(BOUND_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_BOUND_MB
    if not raw.isdigit() or int(raw) < 1:
        raise SandboxError(f"{BOUND_VARIABLE}={raw!r}: give a positive whole number of MB")
    return int(raw)


@dataclass(frozen=True)
class Entry:
    """One preparation's directory."""

    folder: Path
    index: Path

    @property
    def work(self) -> Path:
        """The checkout the setup runs in."""
        return self.folder / "work"

    async def log(self, command: str, tail: str) -> None:
        """Add a step's command and the end of its output to the entry's log."""
        with (self.folder / "setup.log").open("a", encoding="utf-8") as log:
            log.write(f"$ {command}\n{tail}\n")

    async def settle(self, outcome: str, *, reusable: bool) -> None:
        """Record the outcome; index it for later jobs when `reusable`."""
        _write(self.folder / "outcome.json", outcome)
        (self.folder / ".used").touch()
        if reusable:
            _write(self.index, outcome)


class SetupCache:
    """The prepared environments under `root` (TEAPARTY_HOME/setup), at most `bound_mb`."""

    def __init__(self, root: Path, *, bound_mb: int) -> None:
        self.root = root
        self.bound_mb = bound_mb
        self._held: dict[Path, int] = {}
        self._preparing: dict[tuple[str, str], asyncio.Lock] = {}

    def folder(self, name: str) -> Path:
        """One repository's entries (`name`: the job source's, e.g. github/owner/repo;
        anything that is not a plain path by its digest)."""
        parts = name.split("/")
        if len(parts) <= 3 and all(_PART.fullmatch(p) and p not in (".", "..") for p in parts):
            return self.root.joinpath(*parts)
        return self.root / "other" / hashlib.sha256(name.encode()).hexdigest()[:32]

    @contextlib.asynccontextmanager
    async def preparing(self, name: str, key: str) -> AsyncIterator[str | Entry]:
        """The indexed outcome of `key` (its JSON) when an entry still holds it, else a fresh
        entry to prepare in; only one preparer of a key at a time, across processes."""
        folder = self.folder(name)
        folder.mkdir(parents=True, exist_ok=True, mode=0o755)
        # Waiters in this process wait here, holding no thread; another process's preparer
        # is waited for on the flock (in a thread of its own).
        async with self._preparing.setdefault((name, key), asyncio.Lock()):
            async with self._flocked(folder / f"{key}.lock"):
                index = folder / f"{key}.json"
                if (found := _indexed(index)) is not None:
                    self.hold(found[0])
                    yield found[1]
                    return
                entry = Entry(folder / f"{key}-{secrets.token_hex(4)}", index)
                entry.folder.mkdir(mode=0o755)
                self.hold(entry.work)
                yield entry

    @contextlib.asynccontextmanager
    async def _flocked(self, path: Path) -> AsyncIterator[None]:
        lock = os.open(path, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        try:
            await asyncio.to_thread(fcntl.flock, lock, fcntl.LOCK_EX)
            yield
        finally:
            os.close(lock)

    def hold(self, work: Path) -> None:
        """Keep the entry of `work` from eviction while this process uses it."""
        if work in self._held:
            return
        fd = os.open(work.parent / ".in-use", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_SH)
        (work.parent / ".used").touch()
        self._held[work] = fd

    def release(self, work: Path) -> None:
        """The job that used `work` ended."""
        if (fd := self._held.pop(work, None)) is not None:
            os.close(fd)

    async def evict(self) -> list[Path]:
        """Remove entries, oldest use first (unfinished ones before all), until the rest
        fit the bound; never a held one. The entries removed."""
        return await asyncio.to_thread(self._evict)

    def _evict(self) -> list[Path]:
        entries = list(_entries(self.root))
        sizes = {entry: usage([entry]) for entry in entries}
        total = sum(sizes.values())
        removed = []
        for entry in sorted(entries, key=_age):
            if total <= self.bound_mb * 1024 * 1024:
                break
            fd = os.open(entry / ".in-use", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            finally:
                os.close(fd)
            index = entry.parent / f"{entry.name.rsplit('-', 1)[0]}.json"
            if (found := _indexed(index)) is not None and found[0].parent == entry:
                index.unlink(missing_ok=True)
            shutil.rmtree(entry, ignore_errors=True)
            total -= sizes[entry]
            removed.append(entry)
        return removed


def cache_snapshot_key(root: Path) -> str | None:
    """A name for what the cache under `root` holds for later jobs: a digest of the keys
    whose index names an entry that is there; None when it holds none. Two caches with the
    same name hold the same environments (a key fixes what its setup made), so a runner
    saves a copy of its cache only under a name not saved before."""
    keys = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not _ENTRY.fullmatch(d))  # never into an entry
        for name in files:
            index = Path(folder, name)
            if index.suffix != ".json" or not _KEY.fullmatch(index.stem):
                continue
            if _indexed(index) is not None:
                keys.append(f"{index.parent.relative_to(root).as_posix()}/{index.stem}")
    if not keys:
        return None
    return hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()[:32]


def _entries(root: Path) -> list[Path]:
    """The entry directories under `root` (never walking into one)."""
    found = []
    for folder, dirs, _ in os.walk(root):
        found += [Path(folder, d) for d in dirs if _ENTRY.fullmatch(d)]
        dirs[:] = [d for d in dirs if not _ENTRY.fullmatch(d)]
    return found


def _age(entry: Path) -> tuple[bool, float]:
    """Unfinished entries (no outcome: a crash mid-setup) first, then by last use."""
    used = entry / ".used"
    return ((entry / "outcome.json").exists(), used.stat().st_mtime if used.exists() else 0.0)


def _indexed(index: Path) -> tuple[Path, str] | None:
    """The checkout and outcome JSON an index names, if it and its entry are there."""
    try:
        text = index.read_text(encoding="utf-8")
        work = Path(json.loads(text)["root"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (work, text) if work.is_dir() and work.parent.parent == index.parent else None


def _write(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
