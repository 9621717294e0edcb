"""The task board: a job's tasks and their blocked-by dependencies, as transactions and a facade.

The engine dispatches `ready` tasks (pending, every blocker done). A task may start only
once its blockers are done, so a blocked or cancelled blocker holds its dependents back
until the lead re-plans. Refusals raise ToolError: the agent that asked can fix its call.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Literal, get_args

from orchestrator.core.errors import ToolError
from orchestrator.store.sqlite import Store, Tx, now

TaskState = Literal["pending", "in_progress", "in_review", "done", "blocked", "cancelled"]
Review = Literal["full", "spec-only", "none"]
STATES: tuple[TaskState, ...] = get_args(TaskState)
REVIEWS: tuple[Review, ...] = get_args(Review)
STARTED: frozenset[str] = frozenset({"in_progress", "in_review", "done"})
RESULT_MAX = 2_000
TITLE_MAX = 200
NOTE_MAX = 200


@dataclass(frozen=True)
class Task:
    """One task of a job's board; `blocked_by` holds the numbers of the tasks it waits for."""

    number: int
    title: str
    spec: str
    workgroup: str | None
    review: Review
    state: TaskState
    result: str | None
    blocked_reason: str | None
    blocked_by: tuple[int, ...]
    created_by: str
    resolves: int | None = None  # a task whose merge conflict this one resolves


UNFINISHED = ("pending", "in_progress", "in_review", "blocked")  # a task a job's end cancels
_SELECT = (
    "SELECT task_id, number, title, spec, workgroup, review, state, result, blocked_reason,"
    " created_by, resolves FROM tasks WHERE job_id = ?"
)


def _load(tx: Tx, job_id: int, where: str = "", params: tuple[object, ...] = ()) -> list[Task]:
    deps: dict[int, list[int]] = {}
    for task_id, number in tx.execute(
        "SELECT d.task_id, b.number FROM task_deps d JOIN tasks b ON b.task_id = d.blocked_by"
        " WHERE b.job_id = ? ORDER BY b.number",
        (job_id,),
    ):
        deps.setdefault(task_id, []).append(number)
    rows = tx.execute(f"{_SELECT} {where} ORDER BY number", (job_id, *params)).fetchall()
    return [
        Task(n, title, spec, wg, review, state, result, reason, tuple(deps.get(t, ())), by, res)
        for t, n, title, spec, wg, review, state, result, reason, by, res in rows
    ]


def _row(tx: Tx, job_id: int, number: int, field: str) -> tuple[int, str, str | None]:
    row = tx.execute(
        "SELECT task_id, state, result FROM tasks WHERE job_id = ? AND number = ?",
        (job_id, number),
    ).fetchone()
    if row is None:
        raise ToolError(f"{field}: there is no task #{number} on this job's board")
    return row[0], row[1], row[2]


def _text(value: str, field: str, *, limit: int | None = None) -> None:
    if not value.strip():
        raise ToolError(f"{field}: must not be empty")
    if limit is not None and len(value) > limit:
        raise ToolError(f"{field}: {len(value):,} characters, over the limit of {limit:,}")


def _check_state(state: str) -> None:
    if state not in STATES:
        raise ToolError(f"state: must be one of {list(STATES)}, not {state!r}")


def create_task(
    tx: Tx,
    job_id: int,
    *,
    title: str,
    spec: str,
    created_by: str,
    workgroup: str | None = None,
    review: str = "full",
    blocked_by: Iterable[int] = (),
    resolves: int | None = None,
) -> Task:
    """Add the job's next task (numbered 1, 2, ...), waiting for existing tasks `blocked_by`.

    A task that `resolves` another starts with that task's branch merged into its own,
    conflict markers and all, for its worker to resolve.
    """
    _text(title, "title", limit=TITLE_MAX)
    _text(spec, "spec")
    if review not in REVIEWS:
        raise ToolError(f"review: must be one of {list(REVIEWS)}, not {review!r}")
    blockers = {n: _row(tx, job_id, n, "blocked_by")[0] for n in dict.fromkeys(blocked_by)}
    if resolves is not None:
        _row(tx, job_id, resolves, "resolves")
    created = now()
    (task_id, number) = tx.execute(
        "INSERT INTO tasks (job_id, number, title, spec, workgroup, review, created_by,"
        " created_at, updated_at, resolves) SELECT ?, coalesce(max(number), 0) + 1, ?, ?, ?, ?,"
        " ?, ?, ?, ? FROM tasks WHERE job_id = ? RETURNING task_id, number",
        (job_id, title, spec, workgroup, review, created_by, created, created, resolves, job_id),
    ).fetchone()
    tx.executemany(
        "INSERT INTO task_deps (task_id, blocked_by) VALUES (?, ?)",
        [(task_id, blocker) for blocker in blockers.values()],
    )
    return get_task(tx, job_id, number)


def get_task(tx: Tx, job_id: int, number: int) -> Task:
    """One task of the job's board by number."""
    tasks = _load(tx, job_id, "AND number = ?", (number,))
    if not tasks:
        raise ToolError(f"number: there is no task #{number} on this job's board")
    return tasks[0]


def list_tasks(tx: Tx, job_id: int, *, state: str | None = None) -> list[Task]:
    """The job's tasks in number order, optionally only those in `state`."""
    if state is None:
        return _load(tx, job_id)
    _check_state(state)
    return _load(tx, job_id, "AND state = ?", (state,))


def ready_tasks(tx: Tx, job_id: int) -> list[Task]:
    """Pending tasks whose every blocker is done: what the engine dispatches next."""
    return _load(
        tx,
        job_id,
        "AND state = 'pending' AND NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks b"
        " ON b.task_id = d.blocked_by WHERE d.task_id = tasks.task_id AND b.state != 'done')",
    )


def update_task(
    tx: Tx,
    job_id: int,
    number: int,
    *,
    state: str | None = None,
    result: str | None = None,
    blocked_reason: str | None = None,
    add_blocked_by: Iterable[int] = (),
) -> Task:
    """Change a task's state, result, blocked reason or blockers, refusing what breaks the board."""
    task_id, current, stored_result = _row(tx, job_id, number, "number")
    new_state = current if state is None else state
    _check_update(current, new_state, result, stored_result, blocked_reason)
    _add_blockers(tx, job_id, number, task_id, add_blocked_by)
    if new_state in STARTED and new_state != current:
        _check_blockers_done(tx, number, task_id, new_state)
    tx.execute(
        "UPDATE tasks SET state = ?, result = coalesce(?, result),"
        " blocked_reason = CASE WHEN ? = 'blocked' THEN coalesce(?, blocked_reason) END,"
        " updated_at = ? WHERE task_id = ?",
        (new_state, result, new_state, blocked_reason, now(), task_id),
    )
    return get_task(tx, job_id, number)


def _check_update(
    current: str, state: str, result: str | None, stored: str | None, reason: str | None
) -> None:
    _check_state(state)
    if result is not None:
        _text(result, "result", limit=RESULT_MAX)
    elif state == "done" and stored is None:
        raise ToolError("result: a done task needs a result, one paragraph the lead reads")
    if reason is not None:
        _text(reason, "blocked_reason")
        if state != "blocked":
            raise ToolError("blocked_reason: only a blocked task has one; set state 'blocked'")
    elif state == "blocked" and current != "blocked":
        raise ToolError("blocked_reason: say why the task is blocked")


def _add_blockers(tx: Tx, job_id: int, number: int, task_id: int, numbers: Iterable[int]) -> None:
    blockers = {n: _row(tx, job_id, n, "add_blocked_by")[0] for n in dict.fromkeys(numbers)}
    waiting = {
        row[0]
        for row in tx.execute(
            "WITH RECURSIVE waiting(task_id) AS (SELECT ? UNION SELECT d.task_id FROM task_deps d"
            " JOIN waiting w ON d.blocked_by = w.task_id) SELECT task_id FROM waiting",
            (task_id,),
        )
    }
    if cyclic := [n for n, blocker in blockers.items() if blocker in waiting]:
        raise ToolError(
            f"add_blocked_by: #{number} cannot wait for {_numbers(cyclic)}: that would make a "
            f"cycle, since {_numbers(cyclic)} already waits (directly or not) for #{number}"
        )
    tx.executemany(
        "INSERT OR IGNORE INTO task_deps (task_id, blocked_by) VALUES (?, ?)",
        [(task_id, blocker) for blocker in blockers.values()],
    )


def unfinished_blockers(tx: Tx, task_id: int) -> str:
    """The tasks `task_id` waits for that are not done, as `#n (state), ...`; empty if none."""
    pending = tx.execute(
        "SELECT b.number, b.state FROM task_deps d JOIN tasks b ON b.task_id = d.blocked_by"
        " WHERE d.task_id = ? AND b.state != 'done' ORDER BY b.number",
        (task_id,),
    ).fetchall()
    return ", ".join(f"#{n} ({s})" for n, s in pending)


def _check_blockers_done(tx: Tx, number: int, task_id: int, state: str) -> None:
    if waits := unfinished_blockers(tx, task_id):
        raise ToolError(f"state: #{number} cannot be {state!r} while it waits for {waits}")


def _numbers(numbers: Iterable[int]) -> str:
    return ", ".join(f"#{n}" for n in numbers)


def log_event(tx: Tx, job_id: int, number: int | None, event: str, detail: str = "") -> None:
    """Record a step of a task's life (team started, review round, merged, ...), in order."""
    tx.execute(
        "INSERT INTO task_log (job_id, task_number, event, detail, at) VALUES (?, ?, ?, ?, ?)",
        (job_id, number, event, detail, now()),
    )


def count_events(tx: Tx, job_id: int, event: str) -> int:
    """How many times `event` is on the job's task log."""
    (count,) = tx.execute(
        "SELECT count(*) FROM task_log WHERE job_id = ? AND event = ?", (job_id, event)
    ).fetchone()
    return int(count)


def since_started(tx: Tx, job_id: int, number: int, event: str) -> str | None:
    """The detail of task `number`'s first `event` since its mini-team last started."""
    row = tx.execute(
        "SELECT detail FROM task_log WHERE job_id = ? AND task_number = ? AND event = ?"
        " AND entry_id > (SELECT max(entry_id) FROM task_log WHERE job_id = ? AND"
        " task_number = ? AND event = 'started') ORDER BY entry_id LIMIT 1",
        (job_id, number, event, job_id, number),
    ).fetchone()
    return None if row is None else str(row[0])


def locate(tx: Tx, task_id: int) -> tuple[int, int] | None:
    """The job and number of the task stored as `task_id` (None: no such task)."""
    row = tx.execute("SELECT job_id, number FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
    return None if row is None else (int(row[0]), int(row[1]))


def mark_merged(tx: Tx, job_id: int, number: int, summary: str, commit: str | None) -> bool:
    """Mark task `number` (and a task it resolved) done, merged; whether the board is now
    all done or cancelled."""
    stamp = now()
    tx.execute(
        "UPDATE tasks SET state = 'done', result = ?, blocked_reason = NULL, updated_at = ?"
        " WHERE job_id = ? AND number = ?",
        (summary, stamp, job_id, number),
    )
    tx.execute(
        "UPDATE tasks SET state = 'done', blocked_reason = NULL, result = ?, updated_at = ?"
        " WHERE job_id = ? AND state != 'done' AND number = (SELECT resolves FROM tasks"
        " WHERE job_id = ? AND number = ?)",
        (f"merged through task #{number}", stamp, job_id, job_id, number),
    )
    log_event(tx, job_id, number, "merged", commit or "")
    return not open_numbers(tx, job_id)


def cancel_unfinished(tx: Tx, job_id: int, *, at: float) -> list[int]:
    """Cancel the job's tasks not yet done (the job ended); their numbers."""
    marks = ", ".join("?" * len(UNFINISHED))
    rows = tx.execute(
        f"UPDATE tasks SET state = 'cancelled', updated_at = ? WHERE job_id = ?"
        f" AND state IN ({marks}) RETURNING number",
        (at, job_id, *UNFINISHED),
    ).fetchall()
    return sorted(int(number) for (number,) in rows)


def set_merge_base(tx: Tx, job_id: int, number: int, base: str) -> None:
    """The commit task `number` merges into its worktree before its worker starts."""
    tx.execute(
        "UPDATE tasks SET merge_base = ? WHERE job_id = ? AND number = ?", (base, job_id, number)
    )


def set_allowance(tx: Tx, task_id: int, usd: float | None) -> None:
    """What the task's mini-team may spend, in dollars (None: an even share of the job's)."""
    tx.execute("UPDATE tasks SET allowance_usd = ? WHERE task_id = ?", (usd, task_id))


def find(tx: Tx, job_id: int, number: int) -> tuple[int, Task] | None:
    """Task `number` of the job and its stored id (None: no such task)."""
    stored = task_id(tx, job_id, number)
    return None if stored is None else (stored, get_task(tx, job_id, number))


def open_numbers(tx: Tx, job_id: int) -> list[int]:
    """The job's tasks neither done nor cancelled, by number."""
    rows = tx.execute(
        "SELECT number FROM tasks WHERE job_id = ? AND state NOT IN ('done', 'cancelled')"
        " ORDER BY number",
        (job_id,),
    ).fetchall()
    return [int(number) for (number,) in rows]


def task_log(tx: Tx, job_id: int) -> list[tuple[int | None, str, str]]:
    """The job's task log in order: (task number, event, detail)."""
    return [
        (number, event, detail)
        for number, event, detail in tx.execute(
            "SELECT task_number, event, detail FROM task_log WHERE job_id = ? ORDER BY entry_id",
            (job_id,),
        )
    ]


def board_line(task: Task) -> str:
    """One line of the board: `#n [state] title (blocked by #a) — result or blocked reason`."""
    line = f"#{task.number} [{task.state}] {task.title}"
    if task.blocked_by:
        line += f" (blocked by {_numbers(task.blocked_by)})"
    note = task.blocked_reason if task.state == "blocked" else task.result
    if note:
        flat = " ".join(note.split())
        line += " — " + (flat if len(flat) <= NOTE_MAX else flat[: NOTE_MAX - 1] + "…")
    return line


def summarize(tx: Tx, job_id: int) -> str:
    """The compact board the lead reads: a count by state, then one line per task."""
    tasks = _load(tx, job_id)
    if not tasks:
        return "The board is empty: no tasks yet."
    tally = ", ".join(f"{n} {s}" for s in STATES if (n := sum(t.state == s for t in tasks)))
    return "\n".join([f"{len(tasks)} tasks: {tally}", *(board_line(t) for t in tasks)])


class TaskBoard:
    """The task board over a store: each call is one transaction."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def merge_base(self, job_id: int, number: int) -> str | None:
        """The base commit task `number` merges in, if the engine made it for that."""
        row = await self._store.read(
            lambda tx: tx.execute(
                "SELECT merge_base FROM tasks WHERE job_id = ? AND number = ?", (job_id, number)
            ).fetchone()
        )
        return None if row is None or row[0] is None else str(row[0])

    async def create(
        self,
        job_id: int,
        *,
        title: str,
        spec: str,
        created_by: str,
        workgroup: str | None = None,
        review: str = "full",
        blocked_by: Iterable[int] = (),
        resolves: int | None = None,
    ) -> Task:
        """Add a task to the job's board."""
        blockers = tuple(blocked_by)  # taken here: the write runs in the store's thread
        fn = partial(create_task, title=title, spec=spec, created_by=created_by, review=review)
        return await self._store.write(
            lambda tx: fn(tx, job_id, workgroup=workgroup, blocked_by=blockers, resolves=resolves)
        )

    async def get(self, job_id: int, number: int) -> Task:
        """One task by number."""
        return await self._store.read(lambda tx: get_task(tx, job_id, number))

    async def ready(self, job_id: int) -> builtins.list[Task]:
        """Pending tasks whose every blocker is done."""
        return await self._store.read(lambda tx: ready_tasks(tx, job_id))

    async def update(
        self,
        job_id: int,
        number: int,
        *,
        state: str | None = None,
        result: str | None = None,
        blocked_reason: str | None = None,
        add_blocked_by: Iterable[int] = (),
    ) -> Task:
        """Change a task; see update_task for what is refused."""
        blockers = tuple(add_blocked_by)
        fn = partial(update_task, state=state, result=result, blocked_reason=blocked_reason)
        return await self._store.write(lambda tx: fn(tx, job_id, number, add_blocked_by=blockers))

    async def summary(self, job_id: int) -> str:
        """The compact board the lead reads."""
        return await self._store.read(lambda tx: summarize(tx, job_id))

    async def list(self, job_id: int, *, state: str | None = None) -> builtins.list[Task]:
        """The job's tasks, optionally only those in `state`."""
        return await self._store.read(lambda tx: list_tasks(tx, job_id, state=state))


# Named for the modules whose own SQL named these tables (issue 32).


def allowance(tx: Tx, task_id: int) -> tuple[int, float | None] | None:
    """The number of the task stored as `task_id` and the dollars its mini-team may spend
    (None: no allowance of its own); None: no such task."""
    row = tx.execute(
        "SELECT number, allowance_usd FROM tasks WHERE task_id = ?", (task_id,)
    ).fetchone()
    return None if row is None else (int(row[0]), row[1])


def unfinished_ids(tx: Tx, job_id: int) -> list[int]:
    """The stored ids of the job's tasks neither done nor cancelled."""
    rows = tx.execute(
        "SELECT task_id FROM tasks WHERE job_id = ? AND state NOT IN ('done', 'cancelled')",
        (job_id,),
    ).fetchall()
    return [int(task_id) for (task_id,) in rows]


# The workspace's side of a task slot's lease (workspace/spaces.py's TaskIds): the slots are
# leased by the tasks' stored ids, and the composition root hands this module to the workspace.


def task_id(tx: Tx, job_id: int, number: int) -> int | None:
    """The stored id of task `number` of the job (None: no such task)."""
    row = tx.execute(
        "SELECT task_id FROM tasks WHERE job_id = ? AND number = ?", (job_id, number)
    ).fetchone()
    return None if row is None else int(row[0])


def ids_of(tx: Tx, job_id: int) -> list[int]:
    """The stored ids of every task of the job."""
    rows = tx.execute("SELECT task_id FROM tasks WHERE job_id = ?", (job_id,)).fetchall()
    return [int(stored) for (stored,) in rows]


def is_done(tx: Tx, task_id: int) -> bool:
    """Whether the task stored as `task_id` is done (merged)."""
    row = tx.execute("SELECT state FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
    return row is not None and row[0] == "done"
