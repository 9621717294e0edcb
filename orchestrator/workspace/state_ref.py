"""The store kept on a git ref of a repository: fetched, put in place, snapshotted, pushed.

The mechanics of runner mode's state between workflow runs (bot/runner/state.py holds its
policy: when to load and save, how often to try again). The store (`teaparty.db`) lives on a
ref outside `refs/heads` (`refs/teaparty/state` by default): no push workflow and no branch
ruleset fires on it, and it shows in no branch list. Each save is a commit whose tree holds
two files:

- `teaparty.db`, a consistent snapshot of the store made with SQLite's backup API (never the
  bytes of a WAL-mode file, which may be missing committed transactions), pruned of jobs
  that ended long ago and bounded in size;
- `state.json`: the format of this layout (`format`), the store's schema version
  (`schema`), when it was saved and by which run.

**Compare-and-swap.** `StoreRef.load` names the ref's commit (`Loaded.base`), and `save`
pushes a commit whose parent is that one, without force: if another run pushed first, the
push is not a fast-forward and the remote refuses it, a `StateRaceError`. Nothing here
pushes with `+` or `--force`, so no run can overwrite another's state. A push whose answer
was lost but which landed is a success. The parent link makes the ref a history, one commit
per save; fetches are shallow (depth 1), so a run downloads one snapshot however long that
history grows.

**Who can read it.** Anyone with read access to the repository can fetch this ref. The
store holds no secret, and the `auth` header given here is passed to git in the environment
of the one command that needs it, never in its arguments, configuration, or the commit.

StateError               the ref cannot be loaded or saved (git's words included)
 ├── StateRaceError       another run moved the ref since it was loaded
 ├── StateFormatError     the ref holds state this teaparty cannot read (newer, or not ours)
 └── StateTooLargeError   the snapshot is over the size bound
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit, urlunsplit

from orchestrator.core.errors import OrchestratorError, StoreError
from orchestrator.store.migrations import SCHEMA_VERSION
from orchestrator.store.prune import KEEP_ENDED_DAYS, prune_store
from orchestrator.store.snapshot import restore_store, snapshot_store
from orchestrator.workspace.git import (
    IDENTITY,
    NETWORK_TIMEOUT_S,
    GitError,
    auth_env,
    contended,
    git,
    git_bytes,
    reset_config,
)

log = logging.getLogger(__name__)

STORE_FILE = "teaparty.db"
INFO_FILE = "state.json"
_REF = re.compile(r"refs/[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)+")


class StateError(OrchestratorError):
    """The state ref cannot be loaded or saved."""


class StateRaceError(StateError):
    """Another run moved the ref from `base` (what this run loaded) to `found`."""

    def __init__(self, message: str, *, base: str | None, found: str | None) -> None:
        super().__init__(message)
        self.base = base
        self.found = found


class StateFormatError(StateError):
    """The ref holds state this teaparty cannot read."""


class StateTooLargeError(StateError):
    """The snapshot (`size` bytes) is over the bound (`limit` bytes)."""

    def __init__(self, message: str, *, size: int, limit: int) -> None:
        super().__init__(message)
        self.size = size
        self.limit = limit


@dataclass(frozen=True)
class StateInfo:
    """What `state.json` says of a saved state."""

    format: int
    schema: int
    saved_at: str
    run: str

    def to_json(self) -> str:
        """The file's text."""
        return json.dumps(self.__dict__, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, *, where: str) -> StateInfo:
        """Parse `state.json`; StateFormatError when it is not one of ours."""
        try:
            raw = json.loads(text)
            info = cls(
                int(raw["format"]), int(raw["schema"]), str(raw["saved_at"]), str(raw["run"])
            )
        except (ValueError, TypeError, KeyError) as exc:
            raise StateFormatError(f"{where}: {INFO_FILE} is not TeaParty state ({exc})") from exc
        return info


@dataclass(frozen=True)
class Loaded:
    """What `load` found: the commit loaded (None: no state yet, a first run) and its info."""

    base: str | None
    info: StateInfo | None = None


class StoreRef:
    """The store of one repository on one ref, loaded into and saved from a home directory.

    `remote` is a URL or a local path; `auth` an HTTP header git sends to that URL alone (an
    `Authorization` header from GITHUB_TOKEN). `work` is a directory of this run's own, not
    in the home: it holds a private bare repository the ref is fetched into. `run` names the
    run in each save (the workflow run's URL or id). Saves are pruned of jobs that ended
    `keep_days` ago (None: not pruned) and refused over `max_bytes`.
    """

    FORMAT: ClassVar[int] = 1  # of the commit's layout and state.json; a newer one is refused
    DEFAULT_REF: ClassVar[str] = "refs/teaparty/state"
    MAX_BYTES: ClassVar[int] = 50 * 1024 * 1024  # GitHub warns over 50 MiB, refuses 100 MiB
    KEEP_DAYS: ClassVar[float] = KEEP_ENDED_DAYS
    IDENTITY: ClassVar[tuple[str, str]] = IDENTITY

    def __init__(
        self,
        remote: str,
        *,
        work: Path,
        ref: str = DEFAULT_REF,
        auth: str | None = None,
        run: str = "",
        keep_days: float | None = KEEP_DAYS,
        max_bytes: int = MAX_BYTES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if remote.startswith("-"):
            raise StateError(f"remote {remote!r} would be read as a git option")
        if not _REF.fullmatch(ref) or ".." in ref or ref.endswith(".lock"):
            raise StateError(f"{ref!r} is not a full ref name such as {self.DEFAULT_REF!r}")
        self.remote = remote
        self.ref = ref
        self.work = work
        self.run = run
        self.keep_days = keep_days
        self.max_bytes = max_bytes
        self._auth = auth
        self._clock = clock

    def __repr__(self) -> str:  # never the credential
        shown = f"{_shown(self.remote)!r}, ref={self.ref!r}, work={str(self.work)!r}"
        return f"{type(self).__name__}({shown})"

    @property
    def repo(self) -> Path:
        """The private bare repository the ref is fetched into."""
        return self.work / "state.git"

    @property
    def where(self) -> str:
        """The ref and its remote, as messages name them (no credential in a URL)."""
        return f"{self.ref} of {_shown(self.remote)}"

    async def load(self, home: Path) -> Loaded:
        """Fetch the ref and put its store in `home`; nothing when the ref does not exist yet.

        A snapshot of a newer format or schema than this teaparty's is refused
        (StateFormatError). No engine may have `home`'s store open meanwhile.
        """
        if _inside(self.work, home):
            raise StateError(f"the work directory {self.work} must not be inside {home}")
        repo = await self._repository()
        try:
            await self._git("fetch", "--quiet", "--no-tags", "--depth=1", self.remote, self.ref)
        except StateError:
            if await self.remote_commit() is None:
                return Loaded(None)
            raise
        _, fetched = await git(repo, "rev-parse", "--verify", "FETCH_HEAD^{commit}")
        base = fetched.strip()
        await git(repo, "update-ref", "refs/teaparty/loaded", base)
        info = StateInfo.from_json(
            (await self._blob(base, INFO_FILE)).decode(), where=f"{self.where} at {base[:12]}"
        )
        self._check(info, base)
        loaded = self.work / "loaded.db"
        loaded.write_bytes(await self._blob(base, STORE_FILE))
        try:
            await restore_store(loaded, home / STORE_FILE)
        except StoreError as exc:
            raise StateError(f"cannot load {self.where} at {base[:12]}: {exc}") from exc
        loaded.unlink()
        log.info("loaded %s at %s (saved %s by %s)", self.where, base[:12], info.saved_at, info.run)
        return Loaded(base, info)

    async def save(self, home: Path, base: str | None, *, message: str) -> str:
        """Snapshot `home`'s store, commit it on `base` and push it without force; the commit.

        Nothing changed since `base`: nothing is pushed, and `base` comes back. Another run
        pushed first: StateRaceError. Over the size bound: StateTooLargeError.
        """
        snapshot = self.work / "snapshot.db"
        await self._repository()
        try:
            schema = await snapshot_store(home / STORE_FILE, snapshot)
            if self.keep_days is not None:
                await prune_store(snapshot, keep_days=self.keep_days)
        except StoreError as exc:
            raise StateError(f"cannot save {self.where}: {exc}") from exc
        self._bound(snapshot.stat().st_size)
        store_blob = await self._hash(snapshot)
        if base is not None and store_blob == await self._blob_id(base, STORE_FILE):
            log.info("state unchanged since %s: nothing to save", base[:12])
            return base
        saved_at = datetime.fromtimestamp(self._clock(), UTC).isoformat(timespec="seconds")
        info_file = self.work / INFO_FILE
        info_file.write_text(StateInfo(self.FORMAT, schema, saved_at, self.run).to_json())
        tree = await self._tree({STORE_FILE: store_blob, INFO_FILE: await self._hash(info_file)})
        parents = () if base is None else ("-p", base)
        name, email = self.IDENTITY
        who = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email}
        who |= {"GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email}
        _, out = await git(self.repo, "commit-tree", tree, *parents, "-m", message, env=who)
        commit = out.strip()
        await self._push(commit, base)
        log.info("saved %s at %s", self.where, commit[:12])
        return commit

    async def remote_commit(self) -> str | None:
        """The commit the ref names on the remote now, or None when it does not exist."""
        await self._repository()
        out = await self._git("ls-remote", self.remote, self.ref)
        for line in out.splitlines():
            commit, _, name = line.partition("\t")
            if name == self.ref:
                return commit
        return None

    def _check(self, info: StateInfo, base: str) -> None:
        if info.format > self.FORMAT:
            raise StateFormatError(
                f"{self.where} at {base[:12]} has state format {info.format}, newer than this "
                f"teaparty's ({self.FORMAT}): upgrade teaparty in every workflow that uses "
                "this ref"
            )
        if info.schema > SCHEMA_VERSION:
            raise StateFormatError(
                f"{self.where} at {base[:12]} has store schema {info.schema}, newer than this "
                f"teaparty's ({SCHEMA_VERSION}): upgrade teaparty in every workflow that uses "
                "this ref"
            )

    def _bound(self, size: int) -> None:
        if size <= self.max_bytes:
            return
        pruned = (
            f"jobs that ended over {self.keep_days:g} days ago were pruned; keep fewer days"
            if self.keep_days is not None
            else "pruning is off; turn it on"
        )
        raise StateTooLargeError(
            f"the store is {size / 2**20:.1f} MiB, over the {self.max_bytes / 2**20:.1f} MiB "
            f"bound for {self.where}: {pruned} (keep_days), or raise the bound (max_bytes)",
            size=size,
            limit=self.max_bytes,
        )

    async def _push(self, commit: str, base: str | None) -> None:
        try:  # never `+` or --force: a push that is not a fast-forward must fail
            await self._git("push", "--quiet", self.remote, f"{commit}:{self.ref}")
        except StateError as failed:
            found = await self.remote_commit()
            if found == commit:  # it landed; only the answer was lost
                return
            if found != base:
                raise StateRaceError(
                    f"{self.where} moved to {(found or 'nothing')[:12]} since this run loaded "
                    f"{(base or 'nothing')[:12]}: another run saved first",
                    base=base,
                    found=found,
                ) from failed
            if contended(str(failed)):  # another run's push held the ref at that moment
                raise StateRaceError(
                    f"{self.where} was being written by another run: {failed}",
                    base=base,
                    found=found,
                ) from failed
            raise

    async def _git(self, *args: str) -> str:
        """A network git command with the credential for the remote alone; git's own words
        in a StateError when it fails."""
        reset_config(self.repo)
        try:
            _, out = await git(
                self.repo,
                *args,
                env=auth_env(self.remote, self._auth),
                timeout_s=NETWORK_TIMEOUT_S,
            )
        except GitError as exc:
            raise StateError(str(exc)) from exc
        return out

    async def _repository(self) -> Path:
        if not (self.repo / "HEAD").exists():
            partial = self.work / "state.git.partial"
            shutil.rmtree(partial, ignore_errors=True)
            self.work.mkdir(mode=0o700, parents=True, exist_ok=True)
            await git(None, "init", "--quiet", "--bare", "--template=", str(partial))
            partial.rename(self.repo)
        reset_config(self.repo)
        return self.repo

    async def _blob(self, commit: str, name: str) -> bytes:
        code, out = await git_bytes(self.repo, "cat-file", "blob", f"{commit}:{name}", check=False)
        if code != 0:
            raise StateFormatError(
                f"{self.where} at {commit[:12]} has no {name}: not TeaParty state"
            )
        return out

    async def _blob_id(self, commit: str, name: str) -> str | None:
        code, out = await git(
            self.repo, "rev-parse", "--verify", "--quiet", f"{commit}:{name}", check=False
        )
        return out.strip() if code == 0 else None

    async def _hash(self, path: Path) -> str:
        _, out = await git(self.repo, "hash-object", "-w", "--no-filters", "--", str(path))
        return out.strip()

    async def _tree(self, blobs: dict[str, str]) -> str:
        """A tree of these files, made in an index of its own (no checkout needed)."""
        index = self.work / "index"
        index.unlink(missing_ok=True)
        env = {"GIT_INDEX_FILE": str(index)}
        for name, blob in sorted(blobs.items()):
            await git(
                self.repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{name}", env=env
            )
        _, out = await git(self.repo, "write-tree", env=env)
        index.unlink()
        return out.strip()


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


def _shown(remote: str) -> str:
    """`remote` without any user or password a URL carries."""
    parts = urlsplit(remote)
    if not parts.scheme or "@" not in parts.netloc:
        return remote
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
