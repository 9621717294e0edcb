"""File and shell tools for every agent of a job, each confined to its own place.

A mini-team's members (and the phase reviewer) work in their task's slot; everyone else
of the job (the leads, the office manager) reads the job worktree. Which place is a
conversation's follows from the store: its task, else its job. Only agents that write
files (the worker) may write their slot; to everyone else, and to every agent in the job
worktree, the place is read-only, shell included.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from pathlib import Path

from orchestrator.bus import jobs as job_rows
from orchestrator.bus import transactions as txn
from orchestrator.core.errors import SandboxError
from orchestrator.core.messages import ToolCall, ToolResult
from orchestrator.sandbox.confine import Network, Prepared, Sandbox
from orchestrator.store.sqlite import Store, Tx
from orchestrator.workspace.file_tools import WorktreeTools
from orchestrator.workspace.git import Checkout, GitError
from orchestrator.workspace.layout import Workspace
from orchestrator.workspace.shell import EgressWatch
from orchestrator.workspace.spaces import JobSpace, TaskIds

log = logging.getLogger(__name__)
Noted = Callable[[str, JobSpace, "int | None", str, str], Awaitable["str | None"]]
"""What a file tool's result adds for the path it read or changed: (conversation, job, task
number or None, project, path) → text, or None (teams/instructions.py)."""
_NOTED = frozenset({"read_file", "write_file", "edit_file"})


class WorkspaceTools:
    """A ToolRunner that runs each file or shell call in the caller's task slot or job worktree.

    `writes(agent)` says whether an agent edits files; `network(project)` is what a
    project's agents may reach; `prepared(job, project)` is the job's prepared environment
    (jobs/setups.py), made at its first need; `egress` widens a job's shell calls by
    what its decider approved and hears what they were refused (jobs/network_gate.py);
    `noted` adds to a file tool's result what applies to its path (the repository's
    instruction files for that folder, once).
    """

    def __init__(
        self,
        store: Store,
        workspace: Workspace,
        *,
        parent_env: Mapping[str, str],
        sandbox: Sandbox,
        writes: Callable[[str], bool],
        network: Callable[[str], Network],
        prepared: Callable[[JobSpace, str], Awaitable[Prepared | None]] | None = None,
        egress: EgressWatch | None = None,
        noted: Noted | None = None,
    ) -> None:
        self.store = store
        self.workspace = workspace
        self.parent_env = dict(parent_env)
        self.sandbox = sandbox
        self.writes = writes
        self.network = network
        self.prepared = prepared
        self.egress = egress
        self.noted = noted
        self._tools: dict[
            tuple[Path, bool, tuple[int, int] | None, Prepared | None], WorktreeTools
        ] = {}

    async def run(self, agent: str, conversation_id: str, call: ToolCall) -> ToolResult:
        """Run `call` where the conversation belongs; without a place, an error the agent reads."""
        try:
            place = await self._place(agent, conversation_id)
        except SandboxError as exc:  # no user left for the worktree: the operator must act
            place = str(exc)
        if isinstance(place, str):
            return ToolResult(call.call_id, f"{call.name}: {place}", is_error=True)
        tools, where = place
        result = await tools.run(agent, conversation_id, call)
        if self.noted is None or result.is_error or call.name not in _NOTED:
            return result
        try:
            added = await self.noted(conversation_id, *where, str(call.args.get("path", "")))
        except (GitError, OSError) as exc:  # the call did its work: it is not undone for this
            log.warning("%s: instructions for %s not read: %s", conversation_id, call.name, exc)
            return result
        return result if added is None else replace(result, output=f"{result.output}\n\n{added}")

    async def _place(
        self, agent: str, conversation_id: str
    ) -> tuple[WorktreeTools, tuple[JobSpace, int | None, str]] | str:
        row = await self.store.read(lambda tx: _whose(tx, self.workspace.tasks, conversation_id))
        if row is None:
            return "this conversation belongs to no job, so it has no worktree"
        job = await self.workspace.job(row[0])
        if job is None:
            return f"job {row[0]} has no workspace yet"
        root, writable = job.path, False
        if row[1] is None:
            await self.workspace.current(job)  # the merges since its last read
        else:
            task = await self.workspace.task(job, row[1])
            if task is None:
                return f"task #{row[1]} has ended; its worktree is gone"
            root, writable = task.path, self.writes(agent)
            if not any(
                key[:3] == (root, writable, self.workspace.owner_of(root)) for key in self._tools
            ):
                # first use under this user (after a restart, ids are handed out afresh)
                await self.workspace.ensure_handed(root)
        project = str(row[2])
        prepared = None if self.prepared is None else await self.prepared(job, project)
        tools = self.tools_for(job, root, writable=writable, project=project, prepared=prepared)
        return tools, (job, row[1], project)

    def tools_for(
        self,
        job: JobSpace,
        root: Path,
        *,
        writable: bool,
        project: str,
        prepared: Prepared | None = None,
    ) -> WorktreeTools:
        """The tools of an agent working in `root` (a job's worktree or one of its slots), as
        the user the workspace gives that worktree, with the job's prepared environment."""
        run_as = self.workspace.owner_of(root)
        key = (root, writable, run_as, prepared)
        if key not in self._tools:
            self._tools[key] = WorktreeTools(
                root,
                parent_env=self.parent_env,
                sandbox=self.sandbox,
                writable=writable,
                readable=job.readable,
                checkout=Checkout(job.repo, root),
                network=self.network(project),
                run_as=run_as,
                prepared=prepared,
                egress=self.egress,
            )
        return self._tools[key]


def _whose(tx: Tx, tasks: TaskIds, conversation_id: str) -> tuple[int, int | None, str] | None:
    """The job a conversation belongs to, the number of the task it works on (None: none),
    and the job's project; None: it belongs to no job."""
    listed = txn.listed(tx, conversation_id)
    if listed is None or listed.job_id is None:
        return None
    located = None if listed.task_id is None else tasks.locate(tx, listed.task_id)
    number = None if located is None else located[1]
    return listed.job_id, number, str(job_rows.project_of(tx, listed.job_id))
