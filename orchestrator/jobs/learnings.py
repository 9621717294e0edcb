"""A project's standing learnings, as a job reads them from its repository and keeps them.

A job reads `.teaparty/learnings.md` once, when its workspace is made, at the commit it
starts from, in the engine's mirror: what came from the forge, never a worktree an agent
can write. The text goes into every agent's standing context, so what is read is capped.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from orchestrator.bus import jobs as job_rows
from orchestrator.store.sqlite import Store, Tx
from orchestrator.workspace.git import git
from orchestrator.workspace.spaces import JobSpace

log = logging.getLogger(__name__)

LEARNINGS_FILE = ".teaparty/learnings.md"
MAX_LEARNINGS_BYTES = 64 * 1024


async def read_learnings(repo: Path, commit: str) -> str | None:
    """The learnings file at `commit` in `repo`, capped; None where there is none.

    `cat-file blob` reads the committed bytes alone (no textconv, no filters) and fails on
    a missing path or a directory there, which are both "no learnings".
    """
    try:
        code, text = await git(repo, "cat-file", "blob", f"{commit}:{LEARNINGS_FILE}", check=False)
    except UnicodeDecodeError:
        log.warning("%s at %s is not UTF-8 text: no learnings", LEARNINGS_FILE, commit)
        return None
    if code != 0 or not text.strip():
        return None
    return capped(text)


def capped(text: str, *, limit: int = MAX_LEARNINGS_BYTES) -> str:
    """`text` cut to `limit` bytes of UTF-8 (at a character), with a note that it was cut."""
    data = text.encode()
    if len(data) <= limit:
        return text
    kept = data[:limit].decode(errors="ignore")
    return f"{kept}\n\n[{LEARNINGS_FILE} was cut here: it is longer than {limit // 1024} KiB]\n"


def learnings_of(tx: Tx, job_id: int) -> str | None:
    """The learnings the job keeps, if any."""
    row = job_rows.get(tx, job_id)
    return None if row is None else row.learnings


class JobLearnings:
    """The learnings jobs keep in the store: read from the repository once, never undone."""

    def __init__(self, store: Store) -> None:
        self.store = store
        # Held while a job's learnings are read to be written back (a later start of the
        # job) and while a job's first learnings are stored, so neither undoes the other.
        self.lock = asyncio.Lock()

    async def of(self, job_id: int) -> str | None:
        """The learnings the job keeps, if any."""
        return await self.store.read(lambda tx: learnings_of(tx, job_id))

    async def of_key(self, job_key: str) -> str | None:
        """The learnings of the job started under `job_key`, if it exists and has any."""
        row = await self.store.read(lambda tx: job_rows.get_by_key(tx, job_key))
        return None if row is None else row.learnings

    async def learn(self, job_id: int, space: JobSpace) -> str | None:
        """Store the repository's learnings for a job that keeps none; those it now keeps.

        Read at the job's base commit in the mirror; None when the job had learnings
        already or the repository has none there.
        """
        if await self.of(job_id) is not None:
            return None
        text = await read_learnings(space.mirror, space.base)
        if text is None:
            return None
        async with self.lock:
            return await self.store.write(lambda tx: _keep(tx, job_id, text))


def _keep(tx: Tx, job_id: int, text: str) -> str | None:
    job_rows.keep_learnings(tx, job_id, text)
    return learnings_of(tx, job_id)
