"""Which user a worktree's agents run as when the engine is root: a uid of its own.

RLIMIT_NPROC counts every process of a real uid, so agents that share a uid share one
process limit, and one agent's fork bomb leaves every other agent none. When the engine
runs as root, each worktree in use (a task slot, a job's worktree) therefore gets a uid and
gid of its own from TEAPARTY_SANDBOX_UIDS (`FIRST-LAST`, default 100000-199999: above the
ids distributions give people, below sssd's default id-mapping range), skipping every id
the host names in /etc/passwd, /etc/group, /etc/subuid or /etc/subgid; the workspace hands
the worktree's files to it. `TEAPARTY_SANDBOX_UIDS=shared` runs every agent as
TEAPARTY_SANDBOX_UID instead (one process limit for all, as before). These ids have no
passwd entry: HOME is set, `whoami` fails.

An id is held in memory for as long as its worktree exists (until the job's worktrees are
removed); a restarted engine hands out ids afresh and hands each worktree's files over
again. Between calls no process of an id is left (every call's processes are killed when it
ends), so an id given to another worktree later starts with none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.core.errors import SandboxError

DEFAULT_UIDS = "100000-199999"
SHARED = "shared"
MIN_FREE = 64  # fewer free ids than this in the range is a setting to fix before starting
_MAX_ID = 2**32 - 2  # (uid_t)-1 means "unchanged" to set*id


@dataclass
class Identities:
    """Ids from [first, last] for worktrees, one each, never one the host names (`taken`)."""

    first: int
    last: int
    taken: tuple[tuple[int, int], ...] = ()  # inclusive ranges, from host_ids()
    _held: dict[Path, int] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, etc: Path = Path("/etc")) -> Identities | None:
        """The pool TEAPARTY_SANDBOX_UIDS names (None: `shared`); SandboxError if malformed."""
        raw = env.get("TEAPARTY_SANDBOX_UIDS", "").strip() or DEFAULT_UIDS
        if raw.lower() == SHARED:
            return None
        first, dash, last = raw.partition("-")
        if not (dash and first.isdigit() and last.isdigit()) or not (
            0 < int(first) <= int(last) <= _MAX_ID
        ):
            raise SandboxError(
                f"TEAPARTY_SANDBOX_UIDS={raw!r}: give FIRST-LAST (non-zero ids, e.g. "
                f"{DEFAULT_UIDS}) or {SHARED!r}"
            )
        pool = cls(int(first), int(last), host_ids(etc))
        if (free := pool.free()) < MIN_FREE:
            raise SandboxError(
                f"TEAPARTY_SANDBOX_UIDS={raw!r}: only {free} of its ids are free (the others "
                f"are named in {etc}/passwd, group, subuid or subgid); give a range with at "
                f"least {MIN_FREE} free, or {SHARED!r}"
            )
        return pool

    def of(self, place: Path) -> tuple[int, int]:
        """The uid and gid (the same number) of `place`'s processes: its own, until `forget`."""
        uid = self._held.get(place)
        if uid is None:
            uid = self._held[place] = self._free()
        return uid, uid

    def forget(self, place: Path) -> None:
        """`place` is gone: its id may go to another worktree."""
        self._held.pop(place, None)

    def free(self) -> int:
        """How many ids of the range the host names nobody (held ones included)."""
        covered = 0
        for start, end in _merged(self.taken):
            covered += max(0, min(end, self.last) - max(start, self.first) + 1)
        return self.last - self.first + 1 - covered

    def describe(self) -> str:
        """One line for doctor: how ids are given out."""
        return f"a uid of its own per worktree, from {self.first}-{self.last}"

    def _free(self) -> int:
        held = set(self._held.values())
        uid = self.first
        while uid <= self.last:
            past = max((end for start, end in self.taken if start <= uid <= end), default=None)
            if past is not None:
                uid = past + 1
            elif uid in held:
                uid += 1
            else:
                return uid
        raise SandboxError(
            f"no free id left in TEAPARTY_SANDBOX_UIDS={self.first}-{self.last} "
            f"({len(held)} worktrees hold one): widen the range"
        )


def host_ids(etc: Path) -> tuple[tuple[int, int], ...]:
    """Every id the host gives someone: users, groups, and subordinate id ranges."""
    taken: list[tuple[int, int]] = []
    for name in ("passwd", "group"):
        for fields in _rows(etc / name):
            if len(fields) > 2 and fields[2].isdigit():
                taken.append((int(fields[2]), int(fields[2])))
            if name == "passwd" and len(fields) > 3 and fields[3].isdigit():
                taken.append((int(fields[3]), int(fields[3])))
    for name in ("subuid", "subgid"):
        for fields in _rows(etc / name):
            if len(fields) == 3 and fields[1].isdigit() and fields[2].isdigit():
                start = int(fields[1])
                taken.append((start, start + max(int(fields[2]), 1) - 1))
    return tuple(sorted(set(taken)))


def _merged(ranges: tuple[tuple[int, int], ...]) -> list[tuple[int, int]]:
    """Sorted inclusive ranges with overlaps joined."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _rows(path: Path) -> list[list[str]]:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return []
    return [line.split(":") for line in text.splitlines() if line and not line.startswith("#")]
