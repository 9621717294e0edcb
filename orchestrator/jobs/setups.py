"""Each job's prepared environment: made (or found in the cache) before its first turn, and
shown to every call of its agents.

A job's outcome is recorded beside its worktree (`setup.json` in the job's folder), so a
restart finds it again; where the cache entry it names is gone (a runner's next run on a
fresh machine, an operator who cleared the cache), the next call that needs it prepares
again (a cache restored by `actions/cache` is found by its key).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from orchestrator.config.schema import Project
from orchestrator.sandbox.confine import Prepared
from orchestrator.setup.prepare import Outcome, Preparer
from orchestrator.workspace.spaces import JobSpace

log = logging.getLogger(__name__)
RECORD = "setup.json"
ENDED_KEPT = 256  # jobs whose ended outcome a status may still show


class JobSetups:
    """The prepared environment of each running job (None: its project has no `setup:`).

    `projects` are the projects served, by name; `repository(job_id)` names a job's
    repository (owner/repo), the cache's first key.
    """

    def __init__(
        self,
        preparer: Preparer,
        projects: Mapping[str, Project],
        repository: Callable[[int], Awaitable[str | None]],
    ) -> None:
        self.preparer = preparer
        self.projects = projects
        self.repository = repository
        self._outcomes: dict[int, Outcome] = {}
        self._ended: dict[int, Outcome] = {}  # released, still shown in their final status
        self._locks: dict[int, asyncio.Lock] = {}

    async def ensure(self, space: JobSpace, project: str) -> Outcome | None:
        """The job's outcome: recorded, else prepared now (once, however many ask)."""
        job_id = space.job_id
        found_project = self.projects.get(project)
        if found_project is None or found_project.setup is None:
            return None
        setup = found_project.setup
        repository = await self.repository(job_id)
        if repository is None:
            return None
        async with self._locks.setdefault(job_id, asyncio.Lock()):
            if (known := self._outcomes.get(job_id)) is not None and known.root.is_dir():
                return known
            record = space.path.parent / RECORD
            found = await asyncio.to_thread(_recorded, record)
            if found is None or not found.root.is_dir():
                found = await self.preparer.prepare(
                    name=repository, repo=space.repo, base=space.base, setup=setup
                )
                await asyncio.to_thread(_write, record, found.to_json())
                log.info("job %d: %s", job_id, found.summary())
                await self.preparer.cache.evict()
            else:
                self.preparer.cache.hold(found.root)
            self._outcomes[job_id] = found
            return found

    def known(self, job_id: int) -> Outcome | None:
        """The job's outcome if this process has it (for its status, the final one too)."""
        return self._outcomes.get(job_id) or self._ended.get(job_id)

    async def prepared(self, space: JobSpace, project: str) -> Prepared | None:
        """What the sandbox shows the job's agents' calls."""
        outcome = await self.ensure(space, project)
        return None if outcome is None else outcome.prepared()

    def release(self, job_id: int) -> None:
        """The job ended: its entry may be evicted once no other job holds it."""
        if (outcome := self._outcomes.pop(job_id, None)) is not None:
            self._ended[job_id] = outcome
            while len(self._ended) > ENDED_KEPT:
                del self._ended[next(iter(self._ended))]
            if not any(o.root == outcome.root for o in self._outcomes.values()):
                self.preparer.cache.release(outcome.root)


def _recorded(record: Path) -> Outcome | None:
    try:
        return Outcome.from_json(record.read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
