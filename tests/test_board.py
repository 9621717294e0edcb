"""The task board on a real SQLite file: numbering, dependencies, readiness, the board tools."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from orchestrator.core.errors import ToolError
from orchestrator.core.messages import ToolCall, ToolResult
from orchestrator.store.sqlite import Store
from orchestrator.teams.board import RESULT_MAX, TaskBoard
from orchestrator.teams.board_tools import SPECS, BoardTools, job_of_conversation

LEAD = "widgets/coding-lead"
CONVERSATION = "job:1"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    store = await Store.open(tmp_path / "s.db")
    yield store
    await store.close()


async def add_job(store: Store, key: str = "widgets#1") -> int:
    def insert(tx: Any) -> int:
        (job_id,) = tx.execute(
            "INSERT INTO jobs (job_key, project, title, created_at, updated_at)"
            " VALUES (?, 'widgets', 't', 0, 0) RETURNING job_id",
            (key,),
        ).fetchone()
        return int(job_id)

    return await store.write(insert)


async def add_conversation(store: Store, conversation_id: str, job_id: int | None) -> None:
    await store.write(
        lambda tx: tx.execute(
            "INSERT INTO conversations (conversation_id, kind, agent, initiator, job_id,"
            " created_at) VALUES (?, 'job', ?, 'human', ?, 0)",
            (conversation_id, LEAD, job_id),
        )
    )


@pytest.fixture
async def job(store: Store) -> int:
    return await add_job(store)


@pytest.fixture
def board(store: Store) -> TaskBoard:
    return TaskBoard(store)


async def plan(board: TaskBoard, job: int, *blockers: tuple[int, ...]) -> None:
    for n, blocked_by in enumerate(blockers, start=1):
        await board.create(
            job, title=f"t{n}", spec=f"do {n}", created_by=LEAD, blocked_by=blocked_by
        )


async def ready(board: TaskBoard, job: int) -> list[int]:
    return [task.number for task in await board.ready(job)]


async def test_tasks_are_numbered_per_job_and_read_back_whole(
    board: TaskBoard, store: Store, job: int
) -> None:
    other = await add_job(store, "widgets#2")
    first = await board.create(job, title="Parser", spec="parse it", created_by=LEAD)
    second = await board.create(
        job,
        title="CLI",
        spec="wire it",
        created_by=LEAD,
        workgroup="coding",
        review="spec-only",
        blocked_by=[1, 1],
    )
    elsewhere = await board.create(other, title="x", spec="y", created_by=LEAD)
    assert (first.number, second.number, elsewhere.number) == (1, 2, 1)
    got = await board.get(job, 2)
    assert got == second
    assert (got.title, got.spec, got.workgroup, got.review) == (
        "CLI",
        "wire it",
        "coding",
        "spec-only",
    )
    assert (got.state, got.result, got.blocked_reason) == ("pending", None, None)
    assert (got.blocked_by, got.created_by) == ((1,), LEAD)
    assert [t.number for t in await board.list(job)] == [1, 2]
    assert [t.number for t in await board.list(other)] == [1]


async def test_a_task_becomes_ready_only_when_every_blocker_is_done(
    board: TaskBoard, job: int
) -> None:
    await plan(board, job, (), (), (1, 2))
    assert await ready(board, job) == [1, 2]
    await board.update(job, 1, state="in_progress")
    assert await ready(board, job) == [2]
    await board.update(job, 1, state="done", result="parser works")
    assert await ready(board, job) == [2]
    await board.update(job, 2, state="done", result="cli works")
    assert await ready(board, job) == [3]
    assert [t.number for t in await board.list(job, state="done")] == [1, 2]


@pytest.mark.parametrize("state", ["blocked", "cancelled", "in_review"])
async def test_a_task_whose_blocker_is_not_done_is_never_ready_nor_started(
    board: TaskBoard, job: int, state: str
) -> None:
    await plan(board, job, (), (1,))
    reason = "no credentials" if state == "blocked" else None
    await board.update(job, 1, state="in_progress")
    await board.update(job, 1, state=state, blocked_reason=reason)
    assert await ready(board, job) == []
    with pytest.raises(
        ToolError, match=rf"#2 cannot be 'in_progress' while it waits for #1 \({state}\)"
    ):
        await board.update(job, 2, state="in_progress")
    assert (await board.get(job, 2)).state == "pending"


async def test_a_task_cannot_start_before_its_blockers_are_done(board: TaskBoard, job: int) -> None:
    await plan(board, job, (), ())
    await board.update(job, 2, add_blocked_by=[1])
    with pytest.raises(ToolError, match=r"waits for #1 \(pending\)"):
        await board.update(job, 2, state="done", result="r")


async def test_a_dependency_cycle_is_refused_and_changes_nothing(
    board: TaskBoard, job: int
) -> None:
    await plan(board, job, (), (1,), (2,))
    with pytest.raises(ToolError, match="add_blocked_by: #1 cannot wait for #3: that would make"):
        await board.update(job, 1, add_blocked_by=[3])
    with pytest.raises(ToolError, match="cycle"):
        await board.update(job, 2, add_blocked_by=[2])
    with pytest.raises(ToolError, match="cycle"):
        await board.update(job, 1, state="in_progress", add_blocked_by=[2])
    assert [(t.number, t.state, t.blocked_by) for t in await board.list(job)] == [
        (1, "pending", ()),
        (2, "pending", (1,)),
        (3, "pending", (2,)),
    ]
    updated = await board.update(job, 3, add_blocked_by=[1, 2])
    assert updated.blocked_by == (1, 2)


async def test_done_needs_a_result_of_at_most_the_cap(board: TaskBoard, job: int) -> None:
    await plan(board, job, ())
    with pytest.raises(ToolError, match="result: a done task needs a result"):
        await board.update(job, 1, state="done")
    with pytest.raises(ToolError, match="result: 2,001 characters, over the limit of 2,000"):
        await board.update(job, 1, state="done", result="x" * (RESULT_MAX + 1))
    with pytest.raises(ToolError, match="result: must not be empty"):
        await board.update(job, 1, state="done", result="  ")
    done = await board.update(job, 1, state="done", result="x" * RESULT_MAX)
    assert (done.state, done.result) == ("done", "x" * RESULT_MAX)


async def test_blocked_needs_a_reason_that_leaves_with_the_state(
    board: TaskBoard, job: int
) -> None:
    await plan(board, job, ())
    with pytest.raises(ToolError, match="blocked_reason: say why"):
        await board.update(job, 1, state="blocked")
    with pytest.raises(ToolError, match="blocked_reason: only a blocked task has one"):
        await board.update(job, 1, blocked_reason="why not")
    blocked = await board.update(job, 1, state="blocked", blocked_reason="needs a token")
    assert blocked.blocked_reason == "needs a token"
    again = await board.update(job, 1, blocked_reason="needs a bigger token")
    assert (again.state, again.blocked_reason) == ("blocked", "needs a bigger token")
    resumed = await board.update(job, 1, state="pending")
    assert (resumed.state, resumed.blocked_reason) == ("pending", None)


async def test_bad_fields_are_refused_by_name(board: TaskBoard, job: int) -> None:
    await plan(board, job, ())
    cases: list[tuple[Callable[[], Awaitable[object]], str]] = [
        (
            lambda: board.create(job, title="a", spec="b", created_by=LEAD, blocked_by=[7]),
            "blocked_by: ",
        ),
        (
            lambda: board.create(job, title="", spec="b", created_by=LEAD),
            "title: must not be empty",
        ),
        (
            lambda: board.create(job, title="a", spec="b", created_by=LEAD, review="some"),
            "review: ",
        ),
        (lambda: board.get(job, 9), "number: there is no task #9"),
        (lambda: board.update(job, 9, state="done"), "number: there is no task #9"),
        (lambda: board.update(job, 1, state="finished"), "state: must be one of"),
        (lambda: board.update(job, 1, add_blocked_by=[5]), "add_blocked_by: there is no task #5"),
        (lambda: board.list(job, state="finished"), "state: must be one of"),
    ]
    for attempt, message in cases:
        with pytest.raises(ToolError, match=message):
            await attempt()
    assert [t.number for t in await board.list(job)] == [1]


async def test_the_summary_is_one_line_per_task(board: TaskBoard, job: int) -> None:
    assert await board.summary(job) == "The board is empty: no tasks yet."
    await plan(board, job, (), (), (1, 2))
    await board.update(job, 1, state="done", result="Parser done;\nsee src/parse.py. " * 10)
    await board.update(job, 2, state="blocked", blocked_reason="needs an API key")
    note = " ".join(("Parser done;\nsee src/parse.py. " * 10).split())
    assert await board.summary(job) == "\n".join(
        [
            "3 tasks: 1 pending, 1 done, 1 blocked",
            f"#1 [done] t1 — {note[:199]}…",
            "#2 [blocked] t2 — needs an API key",
            "#3 [pending] t3 (blocked by #1, #2)",
        ]
    )


@pytest.fixture
async def tools(store: Store, job: int) -> BoardTools:
    await add_conversation(store, CONVERSATION, job)
    return BoardTools(store, lambda conversation_id: job_of_conversation(store, conversation_id))


async def call(
    tools: BoardTools, name: str, conversation: str = CONVERSATION, **args: Any
) -> ToolResult:
    return await tools.run(LEAD, conversation, ToolCall("c1", name, args))


async def test_the_tools_plan_and_complete_work(tools: BoardTools, job: int) -> None:
    created = await call(tools, "task_create", title="Parser", spec="parse it", review="none")
    assert created == ToolResult("c1", "created #1 [pending] Parser")
    await call(tools, "task_create", title="Docs", spec="document it", blocked_by=[1])
    got = await call(tools, "task_get", number=2)
    assert not got.is_error
    assert got.output.splitlines()[:2] == ["#2 Docs", "state: pending"]
    assert "blocked by: #1" in got.output
    assert got.output.endswith("spec:\ndocument it")
    assert (await call(tools, "task_list", state="ready")).output == "#1 [pending] Parser"
    await call(tools, "task_update", number=1, state="in_progress")
    done = await call(tools, "task_update", number=1, state="done", result="parses", workgroup=None)
    assert done.output == "updated #1 [done] Parser — parses\nnow ready: #2 Docs"
    board = await call(tools, "task_list")
    assert board.output == await tools.board.summary(job)
    assert (await call(tools, "task_list", state="cancelled")).output == "no tasks are cancelled"
    assert (await call(tools, "task_list", state="done")).output == "#1 [done] Parser — parses"
    assert "\nresult: parses\n" in (await call(tools, "task_get", number=1)).output
    await call(tools, "task_update", number=2, state="blocked", blocked_reason="no docs site")
    assert "\nblocked because: no docs site\n" in (await call(tools, "task_get", number=2)).output
    assert (await tools.board.get(job, 1)).created_by == LEAD


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("task_create", {"title": "a"}, "task_create: missing required arguments ['spec']"),
        ("task_create", {"title": 3, "spec": "b"}, "task_create: title: must be a string, not int"),
        (
            "task_create",
            {"title": "a", "spec": "b", "blocked_by": ["1"]},
            "blocked_by[0]: must be an integer, not str",
        ),
        (
            "task_create",
            {"title": "a", "spec": "b", "blocked_by": 1},
            "blocked_by: must be a list, not int",
        ),
        ("task_create", {"title": "a", "spec": "b", "owner": "x"}, "unknown arguments ['owner']"),
        ("task_create", {"title": "a", "spec": "b", "review": "all"}, "review: must be one of"),
        ("task_create", {"title": "a", "spec": "b", "blocked_by": [4]}, "there is no task #4"),
        ("task_get", {"number": "1"}, "task_get: number: must be an integer, not str"),
        ("task_get", {"number": True}, "number: must be an integer, not bool"),
        ("task_get", {"number": 4}, "task_get: number: there is no task #4"),
        ("task_update", {"number": 1}, "task_update: nothing to change"),
        ("task_update", {"number": 1, "state": "finished"}, "state: must be one of"),
        ("task_update", {"number": 1, "state": "blocked"}, "blocked_reason: say why"),
        ("task_update", {"number": 1, "state": "done"}, "result: a done task needs a result"),
        ("task_update", {"number": 1, "add_blocked_by": [1]}, "cycle"),
        ("task_list", {"state": "finished"}, "task_list: state: must be one of"),
        ("task_delete", {"number": 1}, "unknown tool 'task_delete'; the board tools are"),
    ],
)
async def test_a_bad_call_comes_back_as_an_error_naming_the_field(
    tools: BoardTools, name: str, args: dict[str, Any], message: str
) -> None:
    await call(tools, "task_create", title="Parser", spec="parse it")
    result = await call(tools, name, **args)
    assert result.is_error
    assert message in result.output


async def test_a_conversation_outside_any_job_has_no_board(tools: BoardTools, store: Store) -> None:
    await add_conversation(store, "om:1", None)
    for conversation in ("om:1", "nope"):
        result = await call(tools, "task_list", conversation=conversation)
        assert result.is_error
        assert "belongs to no job" in result.output


def test_every_spec_is_a_closed_object_schema() -> None:
    assert set(SPECS) == {"task_create", "task_get", "task_update", "task_list"}
    for spec in SPECS.values():
        assert spec.input_schema["additionalProperties"] is False
        assert set(spec.input_schema["required"]) <= set(spec.input_schema["properties"])
        assert spec.description
