"""The edge's way into CI rounds (jobs/ci_rounds.py): the facts of a job's head commit, the
re-runs asked, what is said on the tracking comment, and the automatic round started. Each
call is one write; a round's points and the fact that this head had its round commit
together."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from orchestrator.bus import jobs as job_rows
from orchestrator.bus.conversations import ConversationBus
from orchestrator.config import Project
from orchestrator.config.schema import Rounds
from orchestrator.core.secrecy import SecretValues
from orchestrator.jobs import ci_rounds
from orchestrator.jobs.ci_rounds import CiFacts, CiSay, FailedCheck
from orchestrator.jobs.round_records import Taken
from orchestrator.store.sqlite import Store, Tx


class CiDesk:
    """CI rounds over the engine's store; a round's woken conversations go to the bus."""

    def __init__(
        self,
        store: Store,
        bus: ConversationBus,
        projects: Mapping[str, Project],
        secrets: SecretValues,
    ) -> None:
        self._store = store
        self._bus = bus
        self._projects = projects
        self._secrets = secrets

    def _settings(self, tx: Tx, job_id: int) -> Rounds:
        name = job_rows.project_of(tx, job_id)
        project = self._projects.get(name) if name is not None else None
        return project.rounds if project else Rounds()

    async def facts(self, job_id: int, sha: str) -> CiFacts:
        """What the store says of CI on the job and head `sha`."""
        return await self._store.read(lambda tx: ci_rounds.facts(tx, job_id, sha))

    async def reran(self, job_id: int, sha: str, names: Sequence[str], *, note: str | None) -> None:
        """Checks were re-run on `sha`, or could not be (once each, ever); `note`, if any,
        says so on the tracking comment."""

        def write(tx: Tx) -> None:
            for name in names:
                ci_rounds.record(tx, job_id, sha, "rerun", name=name)
            if note is not None:
                key = f"rerun:{','.join(names)}"
                ci_rounds.record(tx, job_id, sha, "note", name=key, note=note)

        await self._store.write(write)

    async def say(self, job_id: int, sha: str, said: CiSay) -> bool:
        """Keep what a decision says (flaky checks, a failure held for a person, CI that did
        not run); False when it was said before."""

        def write(tx: Tx) -> bool:
            if said.kind == "note":  # CI that did not run: only said
                return ci_rounds.record(tx, job_id, sha, "note", name="not run", note=said.note)
            if said.kind == "flaky":
                new = [ci_rounds.record(tx, job_id, sha, "flaky", name=n) for n in said.names]
                fresh = any(new)
            else:
                fresh = ci_rounds.record(tx, job_id, sha, said.kind)
            if fresh:
                ci_rounds.record(tx, job_id, sha, "note", name=said.kind, note=said.note)
            return fresh

        return await self._store.write(write)

    async def note(self, job_id: int, sha: str, key: str, note: str) -> bool:
        """CiSay `note` on the tracking comment, once per head commit and `key`."""
        return await self._store.write(
            lambda tx: ci_rounds.record(tx, job_id, sha, "note", name=key, note=note)
        )

    async def start_round(
        self, job_id: int, sha: str, checks: Sequence[FailedCheck], *, flaky: Sequence[str] = ()
    ) -> Taken | None:
        """Start the automatic round of head `sha` with its failing checks (None: it had its
        round); checks that passed when re-run are said to be flaky."""
        scanner = ci_rounds.masker(self._secrets.values())
        points = ci_rounds.points(checks, sha=sha, scanner=scanner)

        def write(tx: Tx) -> Taken | None:
            for name in flaky:
                ci_rounds.record(tx, job_id, sha, "flaky", name=name)
            limit = self._settings(tx, job_id).max_rounds
            taken = ci_rounds.start_round(tx, job_id, sha, points, max_rounds=limit)
            if taken is not None:
                names = ", ".join(f"`{c.name}`" for c in checks)
                said = f"❌ {names} failed on {sha[:12]}: round {taken.round_number} works on it."
                if flaky:
                    said += " " + ci_rounds.flaky_note(flaky, sha[:12])
                ci_rounds.record(tx, job_id, sha, "note", name="round", note=said)
            return taken

        taken = await self._store.write(write)
        if taken is not None:
            self._bus.on_wake(taken.woken)
        return taken

    async def watch(self, job_id: int, sha: str, *, now: float, wait_s: float) -> str | None:
        """Whether to look for CI on the resting head `sha` now (`ci_rounds.watch`); its
        first sight is kept."""

        seen_at, ran, deferred = await self._store.read(lambda tx: ci_rounds.seen(tx, job_id, sha))
        step = ci_rounds.watch(seen_at=seen_at, ran=ran, now=now, wait_s=wait_s, deferred=deferred)
        if step == "seen":  # written once per head; every other sweep only reads
            await self._store.write(lambda tx: ci_rounds.record(tx, job_id, sha, "seen"))
        return step

    async def defer(self, job_id: int, sha: str) -> None:
        """Checks completed on `sha` while the pull request was a draft: decided once it is
        ready and the job rests (`watch` says `decide`)."""
        await self._store.write(lambda tx: ci_rounds.record(tx, job_id, sha, "deferred"))

    async def take_deferred(self, job_id: int, sha: str) -> bool:
        """Take `sha`'s deferred checks to decide on them; False when another took them
        (or none were deferred). A decision that fails defers them again (`defer`)."""
        return await self._store.write(lambda tx: ci_rounds.take_deferred(tx, job_id, sha))

    async def ran(self, job_id: int, sha: str, *, note: str | None = None) -> None:
        """CI ran on `sha`, or (with `note`, said on the tracking comment) it did not and
        that is said: either way it is looked for no more."""

        def write(tx: Tx) -> None:
            ci_rounds.record(tx, job_id, sha, "ran")
            if note is not None:
                ci_rounds.record(tx, job_id, sha, "note", name="no ci", note=note)

        await self._store.write(write)

    async def notes(self, job_id: int) -> tuple[str, ...]:
        """What the tracking comment says of CI, newest first."""
        return await self._store.read(lambda tx: ci_rounds.notes(tx, job_id))
