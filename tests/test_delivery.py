"""The engine's half of a delivery (jobs/delivery.py): the forge only returns what it made
outside, and the engine records it: the pull request it opened, where it put a gate's
question, and each reply of a review round as soon as it is posted, so a round that fails
halfway answers no point twice when it is retried."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fakes import FakeForge
from local_repo import git as local_git
from local_repo import make_repo as repository
from test_budget_gate import drive, open_office, start
from test_rounds import TEXT, demo, points

from orchestrator.bus import gates
from orchestrator.core.errors import ForgeError
from orchestrator.jobs.ports import Delivered, GatePosted, PushTarget

URL = "https://github.test/o/r/pull/7"


@dataclass
class GitHubLike(FakeForge):
    """A FakeForge that answers as a pull request forge does: the engine pushes to `remote`,
    the delivery is pull request 7, a gate's comment is `gate-N`, and a round's replies are
    posted one by one (the `fail_at`-th reply refused once)."""

    remote: Path | None = None
    fail_at: int | None = None
    replies: list[str] = field(default_factory=list)
    pushed: int = 0

    async def ask(self, status: Any, gate: Any, *, suggestion: Any = None) -> GatePosted:
        await super().ask(status, gate, suggestion=suggestion)
        return GatePosted(f"gate-{gate.gate_id}", "dora")

    async def push_target(self, job: Any) -> PushTarget:
        assert self.remote is not None
        return PushTarget(str(self.remote))

    async def deliver(self, status: Any, job: Any) -> Delivered:
        await super().deliver(status, job)
        return Delivered(URL, 7)

    async def deliver_round(self, status: Any, job: Any, review: Any, ledger: Any) -> str | None:
        assert ledger.pull is not None
        assert ledger.pull.number == 7
        head = await ledger.push()
        self.pushed += 1
        for point in review.points:
            if point.replied_ref is not None:
                continue
            if len(self.replies) + 1 == self.fail_at:
                self.fail_at = None
                raise ForgeError("GitHub answered 502")
            ref = f"reply-{point.number}"
            self.replies.append(ref)
            await ledger.replied(point.number, ref)
        self.rounds_delivered.append(review)
        return head


async def test_the_engine_records_the_pull_request_and_the_gate_comment_the_forge_made(
    tmp_path: Path,
) -> None:
    repo, remote = repository(tmp_path / "widgets"), repository(tmp_path / "remote")
    text = "humans: {decider: carol}\n"  # the plan is a gate
    office = await open_office(tmp_path / "home", text, demo())
    try:
        forge = GitHubLike(office, answers={"The plan:": "yes"}, remote=remote)
        job_id = await start(office, repo, text)
        assert await drive(office, forge, job_id) == "done"
        pull = await office.rounds.pull(job_id)
        assert pull is not None
        assert (pull.number, pull.url) == (7, URL)
        (gate_id,) = forge.asked
        gate = await office.engine.store.read(lambda tx: gates.get(tx, gate_id))
        assert (gate.comment_ref, gate.decider) == (f"gate-{gate_id}", "dora")
        branch = f"teaparty/job-{job_id}-changelog"
        assert local_git(remote, "rev-parse", "--verify", f"refs/heads/{branch}")
    finally:
        await office.close()


async def test_a_round_that_fails_halfway_answers_no_point_twice_when_retried(
    tmp_path: Path,
) -> None:
    repo, remote = repository(tmp_path / "widgets"), repository(tmp_path / "remote")
    office = await open_office(tmp_path / "home", TEXT, demo())
    try:
        forge = GitHubLike(office, remote=remote)
        job_id = await start(office, repo, TEXT)
        assert await drive(office, forge, job_id) == "done"
        await office.rounds.feedback(job_id, points("Rename it.", "Add a test.", "Docs."))
        forge.fail_at = 2
        assert await drive(office, forge, job_id) == "failed"
        (running,) = await office.rounds.of_job(job_id)
        assert [p.replied_ref for p in running.points] == ["reply-1", None, None]

        await office.retry(job_id)
        assert await drive(office, forge, job_id) == "done"
        assert forge.replies == ["reply-1", "reply-2", "reply-3"]
        assert forge.pushed == 2
        (done,) = await office.rounds.of_job(job_id)
        assert done.state == "delivered"
    finally:
        await office.close()
