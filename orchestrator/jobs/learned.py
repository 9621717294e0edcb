"""What a job learned: read from its lead's final reply, and proposed in its own branch.

Owns the tables `job_learned` and `job_learning_files`.

The project lead ends its final reply with a few task learnings (config/agents/
project-lead.yaml). Before the job branch is delivered, the engine reads them (strictly:
memory/entries.py), keeps them with the job, and writes them as a file of the job's own,
`.teaparty/learnings/<branch>-<hash>.md`, in one engine commit on the job branch, with the
secret values the engine holds redacted; the same commit removes from the other learnings
files the entries the repository forgot. A person's merge of the pull request is the
review: only then is the file at a later job's base commit, where memory/index.py finds it.

`.teaparty/` is protected: the check before a push (jobs/protection.py) lets through a
learnings file only where its content is exactly what the engine wrote for this job
(`job_learning_files`, recorded before the commit); anything an agent changed there is put
to the decider as before. The engine writes a file only where the branch still has it as
the base had it, or as the engine last wrote it: never over an agent's change.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.bus.transactions import of_job, transcript
from orchestrator.jobs import sources
from orchestrator.memory.entries import (
    LEARNINGS_DIR,
    MAX_PER_JOB,
    Learning,
    clean_source,
    from_reply,
    render,
    without,
)
from orchestrator.memory.index import LearningIndex, files_at, forgotten
from orchestrator.store.sqlite import Store, Tx
from orchestrator.workspace import engine_files
from orchestrator.workspace.layout import Workspace
from orchestrator.workspace.spaces import JobSpace

log = logging.getLogger(__name__)
COMMIT_MESSAGE = "Keep what this job learned (.teaparty/learnings/)"
_ISSUE = re.compile(r"^github:[^#]+#(\d+)")


@dataclass(frozen=True)
class JobOrigin:
    """What the learnings of one job need to know of it."""

    job_key: str
    repo: str  # its repository as the store names it (job_sources.repo)
    lead: str  # its project lead's address, whose final replies hold the learnings


def source_of(job_key: str, job_id: int, branch: str) -> str:
    """Where a job's learnings came from, as their entries say it."""
    issue = _ISSUE.match(job_key)
    origin = f"issue #{issue.group(1)}" if issue else f"local job {job_id}"
    return clean_source(f"{origin}, branch {branch}")


def file_of(job_key: str, branch: str) -> str:
    """The job's own learnings file: named after its branch and key, so two jobs' pull
    requests never touch the same file."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", branch.removeprefix("teaparty/")).strip("-.")
    digest = hashlib.sha256(job_key.encode()).hexdigest()[:6]
    return f"{LEARNINGS_DIR}/{name[:60] or 'job'}-{digest}.md"


class JobLearned:
    """Each job's learnings: taken from its lead's replies, committed on its branch."""

    def __init__(self, store: Store, index: LearningIndex, workspace: Workspace) -> None:
        self.store = store
        self.index = index
        self.workspace = workspace

    async def of(self, job_id: int) -> tuple[Learning, ...]:
        """What the job learned, in order, without what its repository forgot (one read:
        the job's status asks on every sync)."""
        return await self.store.read(lambda tx: learned_of(tx, job_id))

    async def take(self, job_id: int, origin: JobOrigin, branch: str) -> tuple[Learning, ...]:
        """Keep what the lead's final replies list (at most MAX_PER_JOB for the job, first
        kept first); all the job keeps."""
        replies = await self.store.read(lambda tx: _lead_replies(tx, job_id, origin.lead))
        source = source_of(origin.job_key, job_id, branch)
        found = [learning for reply in replies for learning in from_reply(reply, source=source)]
        if found:
            await self.store.write(lambda tx: _keep(tx, job_id, found))
        return await self.of(job_id)

    async def propose(
        self, space: JobSpace, origin: JobOrigin, *, redact: Callable[[str], str]
    ) -> str | None:
        """Write the job's learnings file, and remove forgotten entries from the others, in
        one engine commit on the job branch; the commit, or None when there is nothing to
        change. Raises GitError when git fails."""
        job_id = space.job_id
        learned = await self.take(job_id, origin, space.branch)
        gone = await self.index.forgotten(origin.repo)
        head = await engine_files.branch_head(space.repo, space.branch)
        own = file_of(origin.job_key, space.branch)
        kept = [
            Learning(item.entry_id, redact(item.text), item.source)
            for item in learned
            if item.entry_id not in gone
        ]
        wanted: dict[str, str | None] = {own: render(kept) if kept else None}
        if gone:
            wanted |= await self._without(space, gone, own)
        return await self._commit(space, head, wanted)

    async def _without(
        self, space: JobSpace, gone: frozenset[str], own: str
    ) -> dict[str, str | None]:
        """The learnings files at the job's base that hold a forgotten entry, without it
        (None: nothing left); found through the index, so only those files are read."""
        shelf = await self.index.shelf(space.mirror, space.base)
        holding = await self.index.holding(shelf, gone)
        changed: dict[str, str | None] = {}
        for path, blob in (await files_at(space.mirror, space.base)).items():
            if blob in holding and path != own:
                text = await engine_files.text_at(space.mirror, space.base, path)
                if text is not None:
                    changed[path] = without(text, gone)
        return changed

    async def _commit(
        self, space: JobSpace, head: str, wanted: dict[str, str | None]
    ) -> str | None:
        recorded = await self.store.read(lambda tx: _written(tx, space.job_id))
        blobs: dict[str, str | None] = {}
        for path, text in wanted.items():
            at_head = await engine_files.blob_at(space.repo, head, path)
            at_base = await engine_files.blob_at(space.repo, space.base, path)
            if at_head != at_base and (path not in recorded or recorded[path] != at_head):
                log.info("job %d: %s was changed on the branch; left alone", space.job_id, path)
                continue
            scratch = space.path.parent / "learned.tmp"
            blob = (
                None
                if text is None
                else await engine_files.store_blob(space.repo, text, scratch=scratch)
            )
            if blob != at_head:
                blobs[path] = blob
        if not blobs:
            return None
        await self.store.write(lambda tx: _record(tx, space.job_id, blobs))
        return await self.workspace.commit_engine_files(
            space, blobs, head=head, message=COMMIT_MESSAGE
        )

    async def engine_wrote(self, job_id: int, repo: Path, head: str, path: str) -> bool:
        """Whether `path` at `head` is exactly what the engine wrote there for the job."""
        if not path.startswith(f"{LEARNINGS_DIR}/"):
            return False
        recorded = await self.store.read(lambda tx: _written(tx, job_id))
        if path not in recorded:
            return False
        return recorded[path] == await engine_files.blob_at(repo, head, path)


def learned_of(tx: Tx, job_id: int) -> tuple[Learning, ...]:
    """What the job keeps of its lead's learnings, in order, without those its repository
    (job_sources.repo) forgot."""
    rows = tx.execute(
        "SELECT entry_id, text, source FROM job_learned WHERE job_id = ? ORDER BY seq", (job_id,)
    ).fetchall()
    if not rows:
        return ()
    kept = sources.of_job(tx, job_id)
    gone = frozenset() if kept is None else forgotten(tx, kept.repo)
    return tuple(Learning(*row) for row in rows if row[0] not in gone)


def _lead_replies(tx: Tx, job_id: int, lead: str) -> list[str]:
    """The lead's final replies in the job (its turns that call no tool), oldest first."""
    leads = [c.conversation_id for c in of_job(tx, job_id) if c.agent == lead]
    return [
        message.text
        for conversation_id in leads
        for message in transcript(tx, conversation_id)
        if message.role == "assistant" and not message.tool_calls and message.text
    ]


def _keep(tx: Tx, job_id: int, found: list[Learning]) -> None:
    (count,) = tx.execute("SELECT count(*) FROM job_learned WHERE job_id = ?", (job_id,)).fetchone()
    for learning in found:
        if count >= MAX_PER_JOB:
            return
        added = tx.execute(
            "INSERT OR IGNORE INTO job_learned (job_id, entry_id, text, source, seq)"
            " VALUES (?, ?, ?, ?, ?)",
            (job_id, learning.entry_id, learning.text, learning.source, count),
        )
        count += added.rowcount


def _written(tx: Tx, job_id: int) -> dict[str, str | None]:
    rows = tx.execute("SELECT path, blob FROM job_learning_files WHERE job_id = ?", (job_id,))
    return dict(rows)


def _record(tx: Tx, job_id: int, blobs: dict[str, str | None]) -> None:
    for path, blob in blobs.items():
        tx.execute(
            "INSERT OR REPLACE INTO job_learning_files (job_id, path, blob) VALUES (?, ?, ?)",
            (job_id, path, blob),
        )
