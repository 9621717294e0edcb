"""Review rounds: feedback on a job's change request, gathered and worked as one unit.

The edge hands the engine what a review said (`Feedback`: its points, each a review's text,
a review thread with a person's newer comment, or a mention) and the engine keeps it in the
store. Points gather in the job's one queued round; a round starts when no round runs and
the job rests with its change request open: the job is active again and its office manager
is sent the round's brief (the points, numbered, quoted as data). The lead triages each
point with `answer_review` (change / answer / disagree, the last only after asking the
decider); when the office manager replies, the job driver delivers the round through the
forge (one push, one reply per answered point, a summary) and `delivered` records it: each
thread's newest handled comment is kept, so a thread is input again only when a person
writes in it after that. Feedback that comes while a round runs waits in the next one.

A job's rounds are capped (`rounds.max_rounds`): the next one past the cap is a `question`
gate to the decider, approved it runs, refused it is stopped. A round needs its change
request open: a draft, a merged or closed one starts nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from orchestrator.bus import failures as failure_rows
from orchestrator.bus import gates
from orchestrator.bus import jobs as job_rows
from orchestrator.bus import transactions as txn
from orchestrator.bus import waits as wait_rows
from orchestrator.bus.extensions import Extensions
from orchestrator.bus.failures import record_job
from orchestrator.bus.gates import QUESTION, AskIntent, Gate
from orchestrator.bus.transactions import deliver
from orchestrator.core.messages import InboxKind, job_conversation_id
from orchestrator.jobs import revisions, round_brief, sources
from orchestrator.jobs.round_records import (
    ACTIONS,
    Feedback,
    Point,
    Pull,
    PullState,
    ReviewRound,
    RoundError,
    RoundPoint,
    RoundState,
    Taken,
)
from orchestrator.store.sqlite import Tx, now
from orchestrator.teams.board import create_task, set_merge_base

ENGINE_AUTHOR = "teaparty"  # who the engine's own points and tasks are from
LIMIT_CALL = "rounds:"  # call id prefix of the gate that asks for a round past the cap


# --- the change request -------------------------------------------------------------------


def record_pull(tx: Tx, job_id: int, number: int, url: str, *, state: PullState = "open") -> None:
    """The job's change request is `number` at `url` (recorded once delivered: open; or,
    a project's early draft, once its plan is approved: a draft). A later record keeps the
    state recorded first: what became of it since is the state's to say."""
    tx.execute(
        "INSERT INTO job_pulls (job_id, number, url, state, changed_at) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (job_id) DO UPDATE SET number = excluded.number, url = excluded.url",
        (job_id, number, url, state, now()),
    )


def pull(tx: Tx, job_id: int) -> Pull | None:
    """The job's change request, if it has one."""
    row = tx.execute(
        "SELECT job_id, number, url, state FROM job_pulls WHERE job_id = ?", (job_id,)
    ).fetchone()
    return None if row is None else Pull(*row)


def job_of_pull(tx: Tx, repo: str, number: int) -> int | None:
    """The job whose change request is `number` in the repository the job's source names."""
    rows = tx.execute(
        "SELECT job_id FROM job_pulls WHERE number = ? ORDER BY job_id DESC", (number,)
    ).fetchall()
    for (job_id,) in rows:
        kept = sources.of_job(tx, int(job_id))
        if kept is not None and kept.repo == repo:
            return int(job_id)
    return None


def resting_with_open_pull(tx: Tx) -> list[int]:
    """The jobs that rest (complete) with their change request open, oldest first."""
    rows = tx.execute("SELECT job_id FROM job_pulls WHERE state = 'open' ORDER BY job_id")
    resting = (job_rows.get(tx, int(job_id)) for (job_id,) in rows.fetchall())
    return [job.job_id for job in resting if job is not None and job.state == "complete"]


def set_pull_state(tx: Tx, job_id: int, state: PullState, *, max_rounds: int) -> tuple[str, ...]:
    """The change request is now `state`; opened again, a waiting round may start. Who woke."""
    tx.execute(
        "UPDATE job_pulls SET state = ?, changed_at = ? WHERE job_id = ?", (state, now(), job_id)
    )
    if state == "open":
        return maybe_start(tx, job_id, max_rounds=max_rounds)
    if state in ("merged", "closed", "gone"):  # nothing waits on a change request that ended
        _stop_waiting(tx, job_id, why=f"the change request was {state}")
    return ()


# --- feedback -----------------------------------------------------------------------------


def take(tx: Tx, job_id: int, feedback: Feedback, *, max_rounds: int) -> Taken:
    """Add feedback's new points to the job's waiting round (made if none waits), then start
    it if it may start now."""
    waiting = _waiting(tx, job_id)
    if waiting is None:
        (last,) = tx.execute(
            "SELECT coalesce(max(number), 0) FROM review_rounds WHERE job_id = ?", (job_id,)
        ).fetchone()
        round_id = _new_round(tx, job_id, int(last) + 1)
    else:
        round_id = waiting.round_id
    added = _add_points(tx, job_id, round_id, feedback.points)
    if not added and waiting is None:
        tx.execute("DELETE FROM review_rounds WHERE round_id = ?", (round_id,))
        return Taken(None, 0, None)
    if added:
        _add_reviewers(tx, round_id, feedback.reviewers)
    woken = maybe_start(tx, job_id, max_rounds=max_rounds)
    found = get(tx, round_id)
    return Taken(found.number, added, found.state, found.gate_id, woken)


def maybe_start(tx: Tx, job_id: int, *, max_rounds: int) -> tuple[str, ...]:
    """Start the job's waiting round if nothing stops it: no round running, the job resting
    (complete) with its change request open. Past the cap, ask the decider first. Who woke."""
    waiting = _waiting(tx, job_id)
    if waiting is None or waiting.state == "asked" or _running(tx, job_id) is not None:
        return ()
    job = job_rows.get(tx, job_id)
    found = pull(tx, job_id)
    if job is None or job.state != "complete" or found is None or found.state != "open":
        return ()
    if waiting.number > max_rounds:
        _ask_limit(tx, waiting, max_rounds)
        return ()
    return _start(tx, waiting)


def _ask_limit(tx: Tx, waiting: ReviewRound, max_rounds: int) -> None:
    """Ask the decider whether a round past the cap runs; the job waits on the answer."""
    question = (
        f"The pull request has had {max_rounds} review round(s), the project's limit. "
        f"Round {waiting.number} would work on {len(waiting.points)} new point(s) from "
        f"{round_brief.names(waiting.reviewers)}. Run it? (`/approve` runs it; anything else "
        "leaves the points unanswered.)"
    )
    intent = AskIntent(f"{LIMIT_CALL}{waiting.round_id}", question, ("yes", "no"), kind="question")
    gate_id = gates.ask_engine(
        tx,
        job_id=waiting.job_id,
        conversation_id=job_conversation_id(waiting.job_id),
        content=revisions.job_content,
        intent=intent,
        payload={"round": waiting.round_id},
        pinned={"round": waiting.number, "points": [p.point.source for p in waiting.points]},
    )
    tx.execute(
        "UPDATE review_rounds SET state = 'asked', gate_id = ? WHERE round_id = ?",
        (gate_id, waiting.round_id),
    )
    job_rows.set_state(tx, waiting.job_id, "active")  # waiting for an answer, while asked


def register(extensions: Extensions) -> None:
    """The question the engine asks before a round past the cap: its answer carried out."""
    extensions.gate_kind(QUESTION, settle=settle)


def settle(tx: Tx, gate: Gate) -> tuple[str, ...]:
    """The decider's answer to a round past the cap: approved, it runs; else it is stopped."""
    round_id = gate.payload.get("round")
    if gate.job_id is None or not isinstance(round_id, int):
        return ()
    found = get(tx, round_id)
    if found.state != "asked":
        return ()
    job_rows.set_state(tx, gate.job_id, "complete")
    if not gate.approved:
        _finish(tx, found, "stopped", f"the decider ({gate.answered_by}) did not approve it")
        return ()
    return _start(tx, found)


def is_limit_gate(gate: Gate) -> bool:
    """Whether the gate asks for a round past the cap."""
    return gate.engine_made and (gate.call_id or "").startswith(LIMIT_CALL)


# --- the lead's answers -------------------------------------------------------------------


def answer_point(
    tx: Tx, job_id: int, number: int, *, action: str, reply: str, asker: str | None
) -> RoundPoint:
    """The lead's answer to point `number` of the job's running round.

    `disagree` is taken only once the decider was asked in this round (a question gate of
    `asker`'s answered since the round started): the decider settles disagreements.
    """
    if action not in ACTIONS:
        raise RoundError(f"action must be one of {', '.join(ACTIONS)}, not {action!r}")
    running = _running(tx, job_id)
    if running is None:
        raise RoundError("no review round is running for this job")
    if not reply.strip():
        raise RoundError("reply is empty: say what changed, or the answer, in a sentence")
    if not any(p.number == number for p in running.points):
        raise RoundError(
            f"round {running.number} has no point {number}; its points are 1 to "
            f"{len(running.points)}"
        )
    if action == "disagree" and not _decider_asked(tx, running, asker):
        raise RoundError(
            "ask the decider first (ask_human), saying what the reviewer asked and why you "
            "disagree; then record their decision here"
        )
    tx.execute(
        "UPDATE review_points SET action = ?, reply = ? WHERE round_id = ? AND number = ?",
        (action, reply.strip(), running.round_id, number),
    )
    return next(p for p in get(tx, running.round_id).points if p.number == number)


def _decider_asked(tx: Tx, running: ReviewRound, asker: str | None) -> bool:
    started = tx.execute(
        "SELECT started_at FROM review_rounds WHERE round_id = ?", (running.round_id,)
    ).fetchone()[0]
    return any(
        gate.asked_by != gates.ENGINE
        and gate.answer is not None
        and gate.asked_at >= started
        and (asker is None or gate.conversation_id == asker)
        for gate in gates.of_kind(tx, running.job_id, "question")
    )


# --- delivery -----------------------------------------------------------------------------


def replied(tx: Tx, round_id: int, number: int, ref: str) -> None:
    """The answer to a point was posted (`ref`: the reply's id), so it is never posted twice."""
    tx.execute(
        "UPDATE review_points SET replied_ref = ? WHERE round_id = ? AND number = ?",
        (ref, round_id, number),
    )


def delivered(tx: Tx, round_id: int, *, head: str | None, outcome: str) -> None:
    """The round's work is pushed (at `head`) and answered: its threads are handled up to
    their newest comment it carried; the job rests again."""
    found = get(tx, round_id)
    for p in found.points:
        if p.point.thread_id is not None and p.point.comment_id is not None:
            tx.execute(
                "INSERT INTO review_threads (job_id, thread_id, handled) VALUES (?, ?, ?)"
                " ON CONFLICT (job_id, thread_id) DO UPDATE"
                " SET handled = max(handled, excluded.handled)",
                (found.job_id, p.point.thread_id, p.point.comment_id),
            )
    tx.execute("UPDATE review_rounds SET head = ? WHERE round_id = ?", (head, round_id))
    _finish(tx, found, "delivered", outcome)


def handled(tx: Tx, job_id: int) -> dict[str, int]:
    """Per review thread, the newest comment a round took (delivered, running or waiting)."""
    rows = tx.execute(
        "SELECT thread_id, handled FROM review_threads WHERE job_id = ?"
        " UNION ALL SELECT thread_id, comment_id FROM review_points"
        " WHERE job_id = ? AND thread_id IS NOT NULL AND comment_id IS NOT NULL",
        (job_id, job_id),
    ).fetchall()
    found: dict[str, int] = {}
    for thread_id, comment_id in rows:
        found[thread_id] = max(found.get(thread_id, 0), int(comment_id))
    return found


def running(tx: Tx, job_id: int) -> ReviewRound | None:
    """The job's running round, if any."""
    return _running(tx, job_id)


def stop_running(tx: Tx, job_id: int, *, why: str) -> ReviewRound | None:
    """The job's running round will not be delivered (its pull request ended): stopped, with
    `why` as its outcome; the round so stopped, if one ran."""
    found = _running(tx, job_id)
    if found is not None:
        _finish(tx, found, "stopped", why)
    return found


def rounds_of(tx: Tx, job_id: int) -> list[ReviewRound]:
    """The job's rounds, oldest first."""
    rows = tx.execute(
        "SELECT round_id FROM review_rounds WHERE job_id = ? ORDER BY number", (job_id,)
    ).fetchall()
    return [get(tx, round_id) for (round_id,) in rows]


def get(tx: Tx, round_id: int) -> ReviewRound:
    """A round with its points."""
    row = tx.execute(
        "SELECT round_id, job_id, number, state, reviewers, gate_id, head, outcome"
        " FROM review_rounds WHERE round_id = ?",
        (round_id,),
    ).fetchone()
    if row is None:
        raise RoundError(f"no review round {round_id}")
    rid, job_id, number, state, reviewers, gate_id, head, outcome = row
    points = tx.execute(
        "SELECT number, source, author, body, thread_id, comment_id, path, line, hunk, outdated,"
        " action, reply, replied_ref FROM review_points WHERE round_id = ? ORDER BY number",
        (round_id,),
    ).fetchall()
    return ReviewRound(
        rid,
        job_id,
        number,
        state,
        tuple(json.loads(reviewers)),
        tuple(
            RoundPoint(n, Point(src, au, bo, th, cid, pa, li, hu, bool(od)), act, rep, ref)
            for n, src, au, bo, th, cid, pa, li, hu, od, act, rep, ref in points
        ),
        gate_id,
        head,
        outcome,
    )


# --- a base the pull request conflicts with ---------------------------------------------


def base_conflict(
    tx: Tx, job_id: int, *, base: str, files: Sequence[str], workgroup: str | None
) -> int | None:
    """The base branch moved and the pull request conflicts with it: the running round gets
    a point saying so and the board a task (made by the engine) that merges the base in,
    leaving the markers for its worker; the lead dispatches it. Once per base commit; the
    task's number, or None when this base was taken already."""
    running = _running(tx, job_id)
    source = f"base:{base}"
    taken = tx.execute(
        "SELECT 1 FROM review_points WHERE job_id = ? AND source = ?", (job_id, source)
    ).fetchone()
    if running is None or taken is not None:
        return None
    listed = ", ".join(files)
    task = create_task(
        tx,
        job_id,
        title="Merge the base branch into the pull request",
        spec=(
            f"The base branch moved (to {base[:12]}) and the pull request now conflicts with "
            f"it in: {listed}. Merge it in: resolve each conflict keeping the intent of both "
            "sides, and run the tests. Done when the files hold no conflict markers and the "
            "tests pass."
        ),
        created_by=ENGINE_AUTHOR,
        workgroup=workgroup,
    )
    body = (
        f"The base branch moved and the pull request conflicts with it in: {listed}. Task "
        f"#{task.number}, made by the engine, merges it in: dispatch it."
    )
    _add_points(tx, job_id, running.round_id, (Point(source, ENGINE_AUTHOR, body),))
    set_merge_base(tx, job_id, task.number, base)
    deliver(
        tx,
        job_conversation_id(job_id),
        kind=InboxKind.REQUEST,
        sender="engine",
        content={"text": f"Also in review round {running.number}: {body}"},
    )
    return task.number


# --- the watchdog -------------------------------------------------------------------------


def _stalled(tx: Tx, job_id: int) -> tuple[int, float] | None:
    """The job's running round not stopped yet, and when it was last active (started, a
    transcript entry, an answer), unless a pause, an open gate, a wait or a failure explains
    its silence."""
    row = tx.execute(
        "SELECT round_id, started_at FROM review_rounds"
        " WHERE job_id = ? AND state = 'running' AND outcome IS NULL",
        (job_id,),
    ).fetchone()
    job = job_rows.get(tx, job_id)
    if row is None or job is None or job.paused_by is not None:
        return None
    if gates.open_counts(tx, job_id) or wait_rows.of_job(tx, job_id):
        return None
    if failure_rows.of_job(tx, job_id):
        return None
    said = txn.last_message_at(tx, job_id)
    answered = gates.last_answered_at(tx, job_id)
    return int(row[0]), max(
        row[1], 0 if said is None else said, 0 if answered is None else answered
    )


def watchdog(tx: Tx, job_id: int, *, at: float, stall_s: float) -> str | None:
    """Stop the job's running round if it made no progress for `stall_s` (no transcript
    entry, no answer, and no gate, pause, wait or failure that explains it): the job fails
    saying so, once per round, and `/retry` lets it go on. The reason, if it fired."""
    stalled = _stalled(tx, job_id)
    if stalled is None or at - float(stalled[1]) < stall_s:
        return None
    found = get(tx, stalled[0])
    minutes = stall_s / 60
    reason = (
        f"review round {found.number} made no progress for {minutes:g} minutes (no model "
        "turn, tool result or answer), so the watchdog stopped it; its work so far is on the "
        "job branch, not pushed. Retrying the job (relabelling it on GitHub) lets it go on."
    )
    tx.execute("UPDATE review_rounds SET outcome = ? WHERE round_id = ?", (reason, found.round_id))
    record_job(tx, job_id, "delivery", reason)
    return reason


# --- helpers ------------------------------------------------------------------------------


def _new_round(tx: Tx, job_id: int, number: int) -> int:
    (round_id,) = tx.execute(
        "INSERT INTO review_rounds (job_id, number, created_at) VALUES (?, ?, ?)"
        " RETURNING round_id",
        (job_id, number, now()),
    ).fetchone()
    return int(round_id)


def _add_points(tx: Tx, job_id: int, round_id: int, points: Sequence[Point]) -> int:
    (last,) = tx.execute(
        "SELECT coalesce(max(number), 0) FROM review_points WHERE round_id = ?", (round_id,)
    ).fetchone()
    added = 0
    for point in points:
        inserted = tx.execute(
            "INSERT OR IGNORE INTO review_points (round_id, number, job_id, source, author, body,"
            " thread_id, comment_id, path, line, hunk, outdated)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                round_id,
                int(last) + added + 1,
                job_id,
                point.source,
                point.author,
                point.body,
                point.thread_id,
                point.comment_id,
                point.path,
                point.line,
                point.hunk,
                int(point.outdated),
            ),
        )
        added += inserted.rowcount
    return added


def _add_reviewers(tx: Tx, round_id: int, reviewers: Sequence[str]) -> None:
    (known,) = tx.execute(
        "SELECT reviewers FROM review_rounds WHERE round_id = ?", (round_id,)
    ).fetchone()
    merged = list(dict.fromkeys([*json.loads(known), *reviewers]))
    tx.execute(
        "UPDATE review_rounds SET reviewers = ? WHERE round_id = ?", (json.dumps(merged), round_id)
    )


def _waiting(tx: Tx, job_id: int) -> ReviewRound | None:
    row = tx.execute(
        "SELECT round_id FROM review_rounds WHERE job_id = ? AND state IN ('queued', 'asked')",
        (job_id,),
    ).fetchone()
    return None if row is None else get(tx, int(row[0]))


def _running(tx: Tx, job_id: int) -> ReviewRound | None:
    row = tx.execute(
        "SELECT round_id FROM review_rounds WHERE job_id = ? AND state = 'running'", (job_id,)
    ).fetchone()
    return None if row is None else get(tx, int(row[0]))


def _start(tx: Tx, waiting: ReviewRound) -> tuple[str, ...]:
    """Run the round: the job is active again (its workspace comes back before its first
    turn, `ready`), and its office manager has the brief."""
    at = now()
    tx.execute(
        "UPDATE review_rounds SET state = 'running', started_at = ? WHERE round_id = ?",
        (at, waiting.round_id),
    )
    job_rows.reopen(tx, waiting.job_id)
    root = job_conversation_id(waiting.job_id)
    txn.clear_result(tx, root)
    deliver(
        tx,
        root,
        kind=InboxKind.REQUEST,
        sender="engine",
        content={"text": round_brief.brief(waiting)},
    )
    return (root,)


def _finish(tx: Tx, found: ReviewRound, state: RoundState, outcome: str) -> None:
    tx.execute(
        "UPDATE review_rounds SET state = ?, outcome = ?, finished_at = ? WHERE round_id = ?",
        (state, outcome, now(), found.round_id),
    )


def _stop_waiting(tx: Tx, job_id: int, *, why: str) -> None:
    """The job's waiting round will never run: stopped, its gate closed."""
    waiting = _waiting(tx, job_id)
    if waiting is None:
        return
    if waiting.gate_id is not None and gates.close(tx, waiting.gate_id, why=why):
        job_rows.set_state(tx, job_id, "complete", was="active")
    _finish(tx, waiting, "stopped", why)


# Named for the modules whose own SQL named these tables (issue 32).


def uncap_running(tx: Tx, job_id: int) -> None:
    """The job's running round's own cap gives way to what the decider approved."""
    tx.execute(
        "UPDATE review_rounds SET uncapped = 1 WHERE job_id = ? AND state = 'running'", (job_id,)
    )


def capped_since(tx: Tx, job_id: int) -> float | None:
    """When the job's running round started, if it runs under its own cap still."""
    row = tx.execute(
        "SELECT started_at FROM review_rounds WHERE job_id = ? AND state = 'running'"
        " AND uncapped = 0",
        (job_id,),
    ).fetchone()
    return None if row is None else float(row[0])
