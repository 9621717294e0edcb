"""Which of the repository's instruction files each agent of a job is given, and when.

The project lead and every agent of the project get the repository-wide ones in their
standing context; a mini-team's briefs add those scoped to the paths its task names; and
when an agent first reads or edits a file under a folder with an instruction file of its
own (or one an `.instructions.md` glob matches), the file tool's result carries that
instruction file, once per conversation. Everything comes from the job's base commit in
the engine's mirror (workspace/instructions.py): an agent that edits `AGENTS.md` in its
worktree changes nothing another agent reads.
"""

from __future__ import annotations

import posixpath
from collections import OrderedDict
from collections.abc import Mapping

from orchestrator.config import Project
from orchestrator.teams.board import TaskBoard
from orchestrator.workspace.instructions import (
    GIVEN_BYTES,
    Instruction,
    Instructions,
    read_instructions,
    render,
)
from orchestrator.workspace.spaces import JobSpace

WIDE_HEADING = "## The repository's instructions for agents"
TASK_HEADING = "Instructions for the files this task names (from the repository):"
ADDED_HEADING = "[Instructions for files here, from the repository; given once:]"
_CACHED = 16  # commits whose instruction files are kept in memory
_FOLLOWED = 4096  # conversations whose given instruction files are remembered
_ADDED_BYTES = 2 * GIVEN_BYTES  # added to one conversation by its file tools, in all


class TeamInstructions:
    """The instruction files of each job's base commit, served at the scope of each agent."""

    def __init__(self, projects: Mapping[str, Project], board: TaskBoard) -> None:
        self.projects = projects
        self.board = board
        self._read: OrderedDict[tuple[str, str, tuple[str, ...], bool], Instructions] = (
            OrderedDict()
        )
        self._given: OrderedDict[str, tuple[set[str], int]] = OrderedDict()

    async def of(self, job: JobSpace, project: str) -> Instructions:
        """The instruction files at the job's base commit, as its project reads them."""
        found = self.projects.get(project)
        settings = None if found is None else found.instructions
        read = settings is None or settings.read
        extra = () if settings is None else settings.files
        key = (str(job.mirror), job.base, extra, read)
        if key in self._read:
            self._read.move_to_end(key)
            return self._read[key]
        instructions = await read_instructions(job.mirror, job.base, extra=extra, enabled=read)
        self._read[key] = instructions
        while len(self._read) > _CACHED:
            self._read.popitem(last=False)
        return instructions

    async def wide(self, job: JobSpace, project: str) -> str:
        """The repository-wide instructions, for every agent of the project ("" if none)."""
        found = await self.of(job, project)
        return render(found.wide(), heading=WIDE_HEADING, skipped=found.skipped)

    async def for_task(self, job: JobSpace, project: str, text: str) -> str:
        """Those scoped to the paths a task's `text` (its title and spec) names ("" if none)."""
        found = await self.of(job, project)
        return render(found.scoped(found.named(text)), heading=TASK_HEADING)

    async def noted(
        self, conversation_id: str, job: JobSpace, task: int | None, project: str, path: str
    ) -> str | None:
        """What a file tool's result adds for `path` (relative to the worktree): the
        instruction files that apply there and this conversation was not yet given."""
        path = posixpath.normpath(path).lstrip("/")
        if path.startswith("..") or path == ".":
            return None
        found = await self.of(job, project)
        given, used = await self._followed(conversation_id, job, task, found)
        new = [i for i in found.scoped([path]) if i.path not in given]
        if not new:
            return None
        given.update(i.path for i in new)
        text = render(new, heading=ADDED_HEADING, limit=max(0, _ADDED_BYTES - used))
        self._given[conversation_id] = (given, used + len(text.encode()))
        return text

    async def _followed(
        self, conversation_id: str, job: JobSpace, task: int | None, found: Instructions
    ) -> tuple[set[str], int]:
        """The instruction files the conversation was given (its standing context and its
        brief's, the first time it is asked), and the bytes its tools added."""
        if conversation_id in self._given:
            self._given.move_to_end(conversation_id)
            return self._given[conversation_id]
        given = {i.path for i in found.wide()}
        if task is not None:
            named = await self.board.get(job.job_id, task)
            given.update(_paths(found.scoped(found.named(f"{named.title}\n{named.spec}"))))
        self._given[conversation_id] = (given, 0)
        while len(self._given) > _FOLLOWED:
            self._given.popitem(last=False)
        return given, 0


def _paths(instructions: tuple[Instruction, ...]) -> set[str]:
    return {i.path for i in instructions}
