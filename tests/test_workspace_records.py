"""The workspace's records in the store: which leased slots and job worktrees a restart
cleans up, and which leases a moved workspace takes again. The slots are leased by the
task board's ids, which the workspace asks the board for (its TaskIds port)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.bus import jobs as job_rows
from orchestrator.bus import transactions as txn
from orchestrator.core.messages import ConversationKind
from orchestrator.store.sqlite import Store, Tx
from orchestrator.teams import board
from orchestrator.workspace import spaces
from orchestrator.workspace.spaces import JobSpace


def _job(tx: Tx, key: str, tasks: int) -> JobSpace:
    job_id = job_rows.create(
        tx,
        job_key=key,
        project="widgets",
        title=key,
        max_parallel=2,
        project_text=None,
        learnings=None,
        ready=True,
    )
    for number in range(1, tasks + 1):
        board.create_task(tx, job_id, title=f"t{number}", spec="s", created_by="lead")
    root = Path(f"/state/repos/widgets/jobs/job-{job_id}--{key}")
    space = JobSpace(
        job_id, root / "repo.git", Path("/state/mirror.git"), key, "0" * 40, root / "worktree"
    )
    assert spaces.record_job(tx, space) is None
    return space


def _slots(space: JobSpace) -> Path:
    return space.path.parent / "slots"


async def test_a_restart_finds_slots_no_mini_team_works_in_and_done_jobs(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "teaparty.db")
    try:

        def arrange(tx: Tx) -> None:
            busy, idle = _job(tx, "busy", 2), _job(tx, "idle", 1)
            for space, number in ((busy, 1), (busy, 2), (idle, 1)):
                spaces.lease(tx, board, space, number, _slots(space))
            txn.create_conversation(
                tx,
                conversation_id="task:1:1:x",
                kind=ConversationKind.TASK,
                agent="worker",
                initiator="lead",
                parent_id=None,
                job_id=busy.job_id,
                task_id=board.task_id(tx, busy.job_id, 1),
            )
            job_rows.complete(tx, idle.job_id, "done")

        await store.write(arrange)
        slots, ended, legacy = await store.read(lambda tx: spaces.orphans(tx, board))
        assert slots == [(1, 2), (2, 1)], "task 1 of job 1 has its mini-team: its slot stays"
        assert ended == [2]
        assert legacy == []
    finally:
        await store.close()


async def test_a_moved_workspace_names_its_leased_tasks_and_whether_each_is_merged(
    tmp_path: Path,
) -> None:
    store = await Store.open(tmp_path / "teaparty.db")
    try:

        def move(tx: Tx) -> list[tuple[int, bool]]:
            space = _job(tx, "moved", 3)
            for number in (3, 1):
                spaces.lease(tx, board, space, number, _slots(space))
            board.update_task(tx, space.job_id, 1, state="in_progress")
            board.mark_merged(tx, space.job_id, 1, "merged", None)
            there = JobSpace(
                space.job_id, tmp_path / "repo.git", tmp_path / "m.git", space.branch, "", tmp_path
            )
            return spaces.record_moved(tx, board, space, there)

        assert await store.write(move) == [(1, True), (3, False)]
        assert await store.read(lambda tx: spaces.slot_of(tx, board, 1, 1)) is None
        recorded = await store.read(lambda tx: spaces.recorded_of(tx, 1))
        assert recorded is not None
        assert recorded.repo == str(tmp_path / "repo.git")
    finally:
        await store.close()
