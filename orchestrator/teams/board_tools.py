"""The task-board tools agents call (task_create, task_get, task_update, task_list) on their job."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated

from pydantic import Field

from orchestrator.bus import jobs as job_rows
from orchestrator.bus.transactions import listed
from orchestrator.core.errors import ToolError
from orchestrator.core.messages import ToolCall, ToolResult
from orchestrator.core.tools import ToolInput, ToolSpec, choice, enum, parser, spec
from orchestrator.store.sqlite import Store
from orchestrator.teams.board import (
    RESULT_MAX,
    REVIEWS,
    STATES,
    TITLE_MAX,
    Task,
    TaskBoard,
    board_line,
)

JobOf = Callable[[str], Awaitable[int | None]]
Args = Mapping[str, object]
READY = "ready"


Number = Annotated[int, Field(description="the task's number on the board, e.g. 3")]


class TaskCreate(ToolInput):
    title: str = Field(description=f"short title, at most {TITLE_MAX} chars")
    spec: str = Field(description="what to do and how to know it is done")
    workgroup: str | None = Field(None, description="the workgroup to do it, e.g. coding")
    review: Annotated[str, choice(REVIEWS)] | None = Field(
        None,
        description="full: spec and code-quality review (default); spec-only; none for "
        "mechanical changes such as moving files",
        json_schema_extra=enum(REVIEWS),
    )
    blocked_by: list[int] | None = Field(None, description="numbers of tasks to wait for")
    resolves: int | None = Field(
        None,
        description="for a merge-conflict resolution task: the number of the task whose "
        "branch conflicted; its branch is merged into this task's worktree with the conflict "
        "markers left for the worker to resolve",
    )


class TaskGet(ToolInput):
    number: Number


class TaskUpdate(ToolInput):
    number: Number
    state: Annotated[str, choice(STATES)] | None = Field(None, json_schema_extra=enum(STATES))
    result: str | None = Field(None, description="required with state done")
    blocked_reason: str | None = Field(None, description="required with state blocked")
    add_blocked_by: list[int] | None = Field(
        None, description="numbers of tasks to wait for as well"
    )


class TaskList(ToolInput):
    state: Annotated[str, choice((*STATES, READY))] | None = Field(
        None, json_schema_extra=enum((*STATES, READY))
    )


INPUTS: Mapping[str, type[ToolInput]] = {
    "task_create": TaskCreate,
    "task_get": TaskGet,
    "task_update": TaskUpdate,
    "task_list": TaskList,
}
DESCRIPTIONS = {
    "task_create": "Add a task to this job's board; tasks are numbered 1, 2, ... in creation "
    "order. The spec is the whole brief for the mini-team that does the task (what to build, "
    "acceptance criteria, constraints): they read it, not your conversation. blocked_by lists "
    "existing tasks that must be done before this one may start; use it to order work and to "
    "keep tasks that touch the same files apart.",
    "task_get": "Read one task: its spec, state, result or blocked reason, and what it waits for.",
    "task_update": "Change a task. Set state in_progress when work starts, in_review when it "
    f"goes to review, done with a result (one paragraph of at most {RESULT_MAX:,} characters: "
    "what was done and what the lead must know; the lead reads it instead of the "
    "transcript), blocked with a blocked_reason, cancelled when the plan drops it. A task may "
    "start only once every task it is blocked by is done. add_blocked_by adds tasks to wait "
    "for; a dependency cycle is refused.",
    "task_list": "Show this job's board, one line per task: number, state, title, what it "
    "waits for, and its result or blocked reason. state filters it; 'ready' lists the pending "
    "tasks whose blockers are all done, which can start now.",
}
SPECS: Mapping[str, ToolSpec] = {
    name: spec(name, DESCRIPTIONS[name], model) for name, model in INPUTS.items()
}
PARSERS = {name: parser(model) for name, model in INPUTS.items()}


async def job_of_conversation(store: Store, conversation_id: str) -> int | None:
    """The job a conversation belongs to, or None for one outside any job (or unknown)."""
    found = await store.read(lambda tx: listed(tx, conversation_id))
    return None if found is None else found.job_id


def _str(args: Args, key: str) -> str | None:
    value = args.get(key)
    return value if isinstance(value, str) else None


def _int(args: Args, key: str) -> int:
    value = args.get(key)
    return value if isinstance(value, int) else 0


def _ints(args: Args, key: str) -> tuple[int, ...]:
    value = args.get(key)
    return tuple(n for n in value if isinstance(n, int)) if isinstance(value, list) else ()


def describe(task: Task) -> str:
    """A task in full, as task_get shows it."""
    lines = [
        f"#{task.number} {task.title}",
        f"state: {task.state}",
        f"review: {task.review}",
        f"workgroup: {task.workgroup or '(any)'}",
        f"created by: {task.created_by}",
    ]
    if task.blocked_by:
        lines.append("blocked by: " + ", ".join(f"#{n}" for n in task.blocked_by))
    if task.blocked_reason:
        lines.append(f"blocked because: {task.blocked_reason}")
    if task.result:
        lines.append(f"result: {task.result}")
    return "\n".join([*lines, "spec:", task.spec])


class BoardTools:
    """A ToolRunner for the task-board tools, on the board of the caller's job.

    `workgroups` maps each project to its workgroups' names, the default first: a task
    names one of them, or gets the default.
    """

    def __init__(
        self, store: Store, job_of: JobOf, workgroups: Mapping[str, Sequence[str]] | None = None
    ) -> None:
        self.board = TaskBoard(store)
        self._store = store
        self._job_of = job_of
        self.workgroups: dict[str, Sequence[str]] = dict(workgroups or {})

    async def _workgroup(self, job_id: int, named: str | None) -> str | None:
        project = await self._store.read(lambda tx: job_rows.project_of(tx, job_id))
        known = self.workgroups.get(project) if project is not None else None
        if not known:
            return named
        if named is None:
            return known[0]
        if named not in known:
            raise ToolError(f"workgroup: this project has {list(known)}, not {named!r}")
        return named

    async def run(self, agent: str, conversation_id: str, call: ToolCall) -> ToolResult:
        """Run one board tool; every refusal the model can fix comes back as an error result."""
        if call.name not in SPECS:
            return ToolResult(
                call.call_id,
                f"unknown tool {call.name!r}; the board tools are {sorted(SPECS)}",
                is_error=True,
            )
        try:
            args = PARSERS[call.name]("", dict(call.args))
            job_id = await self._job_of(conversation_id)
            if job_id is None:
                raise ToolError("this conversation belongs to no job, so it has no task board")
            output = await self._dispatch(call.name, job_id, agent, args)
        except ToolError as exc:  # the model reads this and may call again
            return ToolResult(call.call_id, f"{call.name}: {exc}", is_error=True)
        return ToolResult(call.call_id, output)

    async def _dispatch(self, name: str, job_id: int, agent: str, args: Args) -> str:
        if name == "task_create":
            return await self._create(job_id, agent, args)
        if name == "task_get":
            return describe(await self.board.get(job_id, _int(args, "number")))
        if name == "task_update":
            return await self._update(job_id, args)
        return await self._list(job_id, _str(args, "state"))

    async def _create(self, job_id: int, agent: str, args: Args) -> str:
        task = await self.board.create(
            job_id,
            title=_str(args, "title") or "",
            spec=_str(args, "spec") or "",
            created_by=agent,
            workgroup=await self._workgroup(job_id, _str(args, "workgroup")),
            review=_str(args, "review") or "full",
            blocked_by=_ints(args, "blocked_by"),
            resolves=_int(args, "resolves") if "resolves" in args else None,
        )
        return f"created {board_line(task)}"

    async def _update(self, job_id: int, args: Args) -> str:
        changes = ("state", "result", "blocked_reason", "add_blocked_by")
        if not any(key in args for key in changes):
            raise ToolError(f"nothing to change; give at least one of {list(changes)}")
        task = await self.board.update(
            job_id,
            _int(args, "number"),
            state=_str(args, "state"),
            result=_str(args, "result"),
            blocked_reason=_str(args, "blocked_reason"),
            add_blocked_by=_ints(args, "add_blocked_by"),
        )
        output = f"updated {board_line(task)}"
        if task.state == "done":
            freed = [t for t in await self.board.ready(job_id) if task.number in t.blocked_by]
            if freed:
                output += "\nnow ready: " + ", ".join(f"#{t.number} {t.title}" for t in freed)
        return output

    async def _list(self, job_id: int, state: str | None) -> str:
        if state is None:
            return await self.board.summary(job_id)
        if state == READY:
            tasks = await self.board.ready(job_id)
        else:
            tasks = await self.board.list(job_id, state=state)
        if not tasks:
            return f"no tasks are {state}"
        return "\n".join(board_line(task) for task in tasks)
