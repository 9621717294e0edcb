"""Landlock fallback launcher: runs one agent command confined and kills its whole tree after.

Used where user namespaces (bubblewrap) are unavailable. Self-contained and stdlib-only, it is
both imported by the engine (``abi_version()``, 0 when Landlock is unavailable) and run as::

    python3 -I -S /abs/path/orchestrator/sandbox/launch.py SPEC_JSON

SPEC_JSON (argv[1], not secret; the command inherits the launcher's environment)::

    {"argv": [...], "cwd": "/abs", "uid": int|null, "gid": int|null,
     "rlimits": {"NPROC": n, "FSIZE": bytes, "CPU": s, "DATA": bytes, "NOFILE": n},  # any subset
     "landlock": {"read": [abs], "write": [abs], "tcp_connect": [ports] | null},
     "status_fd": int, "parent_pid": int}                                         # optional

``read`` paths get EXECUTE, READ_FILE and READ_DIR; ``write`` paths every filesystem right the
running ABI knows; rights a file cannot hold are masked off for non-directories (so /dev/null
works in ``write``); missing paths are skipped. ``tcp_connect``: null leaves the network alone,
[] denies every TCP connect and bind, [p, ...] allows connecting to those ports only (ABI >= 4;
below it the command still runs and the status line says ``"net": "unenforced"``). From ABI 6
abstract unix sockets and signals are scoped to the command's own domain. Sockets
(``sockguard.py``, seccomp): UDP and every family but unix and TCP only when
``tcp_connect`` is null; a unix socket is reached by its path only beneath a ``write``
directory — checked by Landlock from ABI 9, below it by the launcher, which makes every
``connect()`` of the command itself. uid and gid come together and are never 0; the
command gets no supplementary groups.

Exit status: the command's code, or 128+N when signal N ended it; 128+N when the launcher got
signal N (SIGTERM, SIGINT, SIGHUP) and killed the tree. Launcher failures print one line
``teaparty-sandbox: <reason>`` on stderr and exit 125 (126: cannot execute, 127: not found).
On ``status_fd`` the launcher writes one JSON line once every restriction is in force, just
before exec: ``{"abi": 7, "fs": true, "net": "open"|"off"|"ports"|"unenforced",
"scopes": true|false, "unix": "kernel"|"supervised"|"open", "udp": "off"|"open", "uid": n}``;
no line means the command never started confined.

Process handling: Landlock has no PID namespace, so the launcher is a child subreaper. It forks
the command, waits for it (or for SIGTERM/SIGINT/SIGHUP; SIGTERM is also its parent-death
signal), then SIGKILLs every process whose parent is the launcher, which every orphaned
descendant becomes (``setsid`` and double forks included), reaping until none is left. Killing
by pid is race-free: a child's pid cannot be reused before the launcher reaps it. RLIMIT_CPU's
hard limit is one second above the soft one, since at soft == hard the kernel sends SIGKILL.
The parent-death signal follows the engine *thread* that started the launcher: start it from a
thread that lives as long as the call (asyncio's loop thread does).

The launcher process keeps the engine's uid (root when a uid is given): it runs no agent code,
and a different uid from the command's means the command can neither signal it (which would
orphan the tree to init; below ABI 6 Landlock does not scope signals) nor read its /proc files,
while root can still kill every descendant.

/proc, measured on kernel 6.18 (ABI 7) with /proc in ``read``: a confined process running as a
non-root uid cannot open ``environ`` or ``maps`` of any process outside its domain (the
engine, the launcher), even one of its own uid, which an unconfined process of that uid can:
Landlock's ptrace rule. A confined *root* process still reads ``environ`` and ``maps`` of every
process: the kernel's mm_access() lets CAP_PERFMON/CAP_SYS_ADMIN read an mm before any LSM is
asked (``mem`` and ptrace attach stay denied). That is the leak issue 10 reports, and why the
launcher refuses to run a command as root. ``cmdline`` and ``stat`` of every process stay
readable (no secret belongs in an argv), and the command's own processes read each other's.

Limits: no filesystem view of its own (unlisted paths stay visible by name, only access is
denied); a connection the launcher made for the command carries the launcher's credentials
(SO_PEERCRED), abstract unix sockets are refused outright below ABI 9 (the launcher cannot
connect inside the command's scope), and so are unix datagram sockets (their recipient is
named in memory no filter reads); RLIMIT_NPROC counts every process of the uid (give each
slot its own uid); a launcher SIGKILLed before it can clean up leaves grandchildren behind
(the direct child dies with it).

Errors: ``LaunchError`` alone, with its exit code (not an OrchestratorError: no imports of ours).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import socket
import stat
import struct
import sys

EXIT_LAUNCH_FAILED = 125
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127

_NR_CREATE_RULESET, _NR_ADD_RULE, _NR_RESTRICT_SELF = 444, 445, 446  # same on every arch
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1, 2, 4, 8
_FS_ABI1 = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # ABI 2, 3, 5
_FS_RESOLVE_UNIX = 1 << 16  # ABI 9: connecting to a unix socket by its path
_FS_READ = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
_FS_FILE_ONLY = (
    _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV | _FS_RESOLVE_UNIX
)
_NET_BIND_TCP, _NET_CONNECT_TCP = 1, 2  # ABI 4
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1, 2  # ABI 6
_ABI_RESOLVE_UNIX = 9

_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER, _PR_SET_NO_NEW_PRIVS = 1, 36, 38
_WAKE_SIGNALS = frozenset((signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP))
_KILL_ROUNDS = 1000
_SPEC_KEYS = frozenset(
    ("argv", "cwd", "uid", "gid", "rlimits", "landlock", "status_fd", "parent_pid")
)
_LANDLOCK_KEYS = frozenset(("read", "write", "tcp_connect"))


try:  # imported by the engine
    from orchestrator.sandbox import sockguard
except ImportError:  # run as a script (-I: no package on the path): the file beside this one
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))  # after the standard library
    import sockguard  # type: ignore[no-redef,import-not-found]


class LaunchError(Exception):
    """The launcher could not start the command confined; ``exit_code`` is what it exits with."""

    def __init__(self, reason: str, exit_code: int = EXIT_LAUNCH_FAILED) -> None:
        super().__init__(reason)
        self.exit_code = exit_code


class Policy:
    """What the command may reach: Landlock paths and TCP ports."""

    def __init__(self, read: list[str], write: list[str], tcp_connect: list[int] | None) -> None:
        self.read = read
        self.write = write
        self.tcp_connect = tcp_connect


class Spec:
    """One validated launch request."""

    def __init__(self, raw: dict[str, object]) -> None:
        unknown = set(raw) - _SPEC_KEYS
        if unknown:
            raise LaunchError(f"unknown spec keys {sorted(unknown)!r}")
        self.argv = _str_list(raw.get("argv"), "argv", absolute=False)
        if not self.argv:
            raise LaunchError("argv is empty")
        self.cwd = _abs_path(raw.get("cwd"), "cwd")
        self.uid = _opt_int(raw.get("uid"), "uid", low=1)
        self.gid = _opt_int(raw.get("gid"), "gid", low=1)
        if (self.uid is None) != (self.gid is None):
            raise LaunchError("uid and gid must be given together")
        self.rlimits = _rlimits(raw.get("rlimits", {}))
        self.policy = _policy(raw.get("landlock"))
        self.status_fd = _opt_int(raw.get("status_fd"), "status_fd", low=3)
        self.parent_pid = _opt_int(raw.get("parent_pid"), "parent_pid", low=1)


def _str_list(value: object, name: str, *, absolute: bool) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise LaunchError(f"{name} must be a list of strings")
    if absolute and not all(item.startswith("/") for item in value):
        raise LaunchError(f"{name} must hold absolute paths")
    return list(value)


def _abs_path(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.startswith("/"):
        raise LaunchError(f"{name} must be an absolute path")
    return value


def _int(value: object, name: str, *, low: int, high: int = 2**32 - 2) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise LaunchError(f"{name} must be an integer in [{low}, {high}]")
    return value


def _opt_int(value: object, name: str, *, low: int) -> int | None:
    return None if value is None else _int(value, name, low=low)


def _rlimits(value: object) -> dict[int, int]:
    if not isinstance(value, dict):
        raise LaunchError("rlimits must be an object")
    limits: dict[int, int] = {}
    for name, limit in value.items():
        number = getattr(resource, f"RLIMIT_{name}", None)
        if not isinstance(number, int):
            raise LaunchError(f"unknown rlimit {name!r}")
        limits[number] = _int(limit, f"rlimits.{name}", low=0, high=2**62)
    return limits


def _policy(value: object) -> Policy:
    if not isinstance(value, dict) or set(value) - _LANDLOCK_KEYS:
        raise LaunchError("landlock must be an object with read, write and tcp_connect")
    read = _str_list(value.get("read", []), "landlock.read", absolute=True)
    write = _str_list(value.get("write", []), "landlock.write", absolute=True)
    ports = value.get("tcp_connect")
    if ports is None:
        return Policy(read, write, None)
    if not isinstance(ports, list):
        raise LaunchError("landlock.tcp_connect must be null or a list of ports")
    return Policy(read, write, [_int(port, "port", low=1, high=65535) for port in ports])


def parse_spec(text: str) -> Spec:
    """Decode and validate SPEC_JSON; raises LaunchError on anything malformed."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise LaunchError(f"spec is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise LaunchError("spec must be a JSON object")
    return Spec(raw)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _syscall(number: int, *args: int | bytes) -> int:
    call = _libc().syscall
    call.restype = ctypes.c_long
    wide = [arg if isinstance(arg, bytes) else ctypes.c_long(arg) for arg in args]
    result = int(call(ctypes.c_long(number), *wide))
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return result


def _prctl(option: int, value: int) -> None:
    zero = ctypes.c_ulong(0)
    if _libc().prctl(ctypes.c_int(option), ctypes.c_ulong(value), zero, zero, zero) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


def abi_version() -> int:
    """Return the kernel's Landlock ABI version, or 0 when Landlock is unavailable."""
    try:
        return _syscall(_NR_CREATE_RULESET, 0, 0, _CREATE_RULESET_VERSION)
    except OSError:
        return 0


def _fs_rights(abi: int) -> int:
    rights = _FS_ABI1
    for since, right in (
        (2, _FS_REFER),
        (3, _FS_TRUNCATE),
        (5, _FS_IOCTL_DEV),
        (9, _FS_RESOLVE_UNIX),
    ):
        if abi >= since:
            rights |= right
    return rights


def _net_mode(policy: Policy, abi: int) -> str:
    if policy.tcp_connect is None:
        return "open"
    if abi < 4:
        return "unenforced"
    return "ports" if policy.tcp_connect else "off"


def _add_path(ruleset_fd: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FS_FILE_ONLY
        attr = struct.pack("=Qi", rights, fd)
        _syscall(_NR_ADD_RULE, ruleset_fd, _RULE_PATH_BENEATH, attr, 0)
    except OSError as exc:
        raise LaunchError(f"Landlock rule for {path!r}: {exc.strerror}") from None
    finally:
        os.close(fd)


def build_ruleset(policy: Policy, abi: int) -> int:
    """Create a Landlock ruleset fd holding the policy's path and port rules."""
    fs_rights = _fs_rights(abi)
    net_rights = (
        _NET_BIND_TCP | _NET_CONNECT_TCP if _net_mode(policy, abi) in ("off", "ports") else 0
    )
    scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("=QQQ", fs_rights, net_rights, scoped)
    ruleset_fd = _syscall(_NR_CREATE_RULESET, attr, len(attr), 0)
    try:
        for path in policy.read:
            _add_path(ruleset_fd, path, _FS_READ)
        for path in policy.write:
            _add_path(ruleset_fd, path, fs_rights)
        for port in (policy.tcp_connect or []) if net_rights else []:
            attr = struct.pack("=QQ", _NET_CONNECT_TCP, port)
            _syscall(_NR_ADD_RULE, ruleset_fd, _RULE_NET_PORT, attr, 0)
    except (LaunchError, OSError):
        os.close(ruleset_fd)
        raise
    return ruleset_fd


def enforce(ruleset_fd: int) -> None:
    """Set no_new_privs and confine this process (and its future children) to the ruleset."""
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    _syscall(_NR_RESTRICT_SELF, ruleset_fd, 0)
    os.close(ruleset_fd)


def _fail(exc: LaunchError | OSError) -> int:
    reason = str(exc).replace("\n", " ")
    try:
        os.write(2, f"teaparty-sandbox: {reason}\n".encode(errors="replace"))
    except OSError:  # nobody is reading any more (the engine died)
        pass
    return exc.exit_code if isinstance(exc, LaunchError) else EXIT_LAUNCH_FAILED


def _reset_signals(mask: set[int | signal.Signals]) -> None:
    for signum in signal.valid_signals():
        if signum not in (signal.SIGKILL, signal.SIGSTOP):
            try:
                signal.signal(signum, signal.SIG_DFL)
            except (OSError, ValueError):  # signals the C library reserves (32, 33)
                pass
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _drop_identity(uid: int | None, gid: int | None) -> None:
    if uid is None or gid is None:
        return
    try:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    except OSError as exc:
        raise LaunchError(f"cannot switch to uid {uid}: {exc.strerror}") from None


def _confine(spec: Spec, abi: int, launcher_pid: int) -> None:
    """Turn the forked child into the confined command's process (everything but exec)."""
    for number, limit in spec.rlimits.items():
        # CPU: at soft == hard the kernel sends SIGKILL, not SIGXCPU; allow one more second.
        hard = limit + 1 if number == resource.RLIMIT_CPU else limit
        resource.setrlimit(number, (limit, hard))
    ruleset_fd = build_ruleset(spec.policy, abi)  # opens the paths before the uid drop
    _drop_identity(spec.uid, spec.gid)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # after the uid change, which clears it
    if os.getppid() != launcher_pid:
        raise LaunchError("launcher died before the command started")
    enforce(ruleset_fd)
    os.chdir(spec.cwd)


def _guard_sockets(spec: Spec, abi: int, channel: socket.socket | None) -> str:
    """Install the socket filter (after `enforce`: it needs no_new_privs) and hand its
    listener to the launcher over `channel`; how unix paths are checked: "kernel" (Landlock
    ABI 9), "supervised" (the launcher connects), or "open"."""
    installed, listener = sockguard.install(
        network_open=spec.policy.tcp_connect is None,
        supervise=channel is not None,
        unix_dgram=abi >= _ABI_RESOLVE_UNIX,
    )
    if listener is not None and channel is not None:
        try:
            socket.send_fds(channel, [b"L"], [listener])
        finally:
            os.close(listener)  # the command must never hold it: it would answer itself
    if channel is not None:
        channel.close()
    if abi >= _ABI_RESOLVE_UNIX:
        return "kernel"
    return "supervised" if listener is not None else "open"


def _status_line(spec: Spec, abi: int, unix: str) -> bytes:
    net = _net_mode(spec.policy, abi)
    status = {
        "abi": abi,
        "fs": True,
        "net": net,
        "scopes": abi >= 6,
        "unix": unix,
        "udp": "open" if spec.policy.tcp_connect is None else "off",
        "uid": os.getuid(),
    }
    return (json.dumps(status) + "\n").encode()


def _exec(argv: list[str]) -> int:
    """Exec argv[0] searched on PATH like a shell; returns 126 or 127 when that fails.

    Not os.execvp: it imports a module lazily, which the confined child can no longer read.
    """
    name = argv[0]
    dirs = os.environ.get("PATH", os.defpath).split(":")
    candidates = [name] if "/" in name else [os.path.join(d or ".", name) for d in dirs]
    denied = None
    for path in candidates:
        try:
            os.execve(path, argv, os.environ)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except PermissionError as exc:
            denied = exc
        except OSError as exc:
            return _fail(LaunchError(f"{name}: {exc.strerror}", EXIT_CANNOT_EXECUTE))
    if denied is not None:
        return _fail(LaunchError(f"{name}: {denied.strerror}", EXIT_CANNOT_EXECUTE))
    return _fail(LaunchError(f"{name}: command not found", EXIT_NOT_FOUND))


def _run_child(
    spec: Spec,
    abi: int,
    *,
    mask: set[int | signal.Signals],
    launcher_pid: int,
    channel: socket.socket | None,
) -> int:
    """Confine this forked process and exec the command; returns an exit code on failure."""
    try:
        _reset_signals(mask)
        _confine(spec, abi, launcher_pid)
        unix = _guard_sockets(spec, abi, channel)
    except ValueError as exc:  # resource.setrlimit reports EPERM and EINVAL this way
        return _fail(LaunchError(f"rlimits: {exc}"))
    except (LaunchError, OSError) as exc:
        return _fail(exc)
    if spec.status_fd is not None:
        try:
            os.write(spec.status_fd, _status_line(spec, abi, unix))
        except OSError as exc:
            return _fail(exc)
    return _exec(spec.argv)


def _children(launcher_pid: int) -> list[int]:
    """Return the pids whose parent is the launcher, from /proc/<pid>/stat."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as file:
                fields = file.read().rpartition(b")")[2].split()
        except OSError:  # the process ended while we looked
            continue
        if len(fields) > 1 and int(fields[1]) == launcher_pid:
            found.append(int(name))
    return found


def _has_children() -> bool:
    """Reap every zombie child; True while some child is still alive."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def kill_tree(launcher_pid: int) -> bool:
    """SIGKILL and reap every descendant, round after round; False if some survived."""
    for _ in range(_KILL_ROUNDS):
        if not _has_children():  # no child at all means no descendant: skip the /proc scan
            return True
        pids = _children(launcher_pid)
        for pid in pids:
            os.kill(pid, signal.SIGKILL)  # our child, unreaped: the pid cannot be reused
        for pid in pids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
    return False


def _exit_code(wait_status: int) -> int:
    code = os.waitstatus_to_exitcode(wait_status)
    return 128 - code if code < 0 else code


def _wait_command(pid: int) -> int:
    """Block until the command ends (its exit code) or a stop signal arrives (128+N)."""
    while True:
        info = signal.sigwaitinfo(_WAKE_SIGNALS)
        if info.si_signo != signal.SIGCHLD:
            return 128 + info.si_signo
        while True:
            try:
                reaped, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if reaped == 0:
                break
            if reaped == pid:
                return _exit_code(wait_status)


def _start_supervising(spec: Spec) -> None:
    started_under = os.getppid()
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != (spec.parent_pid or started_under):
        raise LaunchError("the engine died before the launcher started")
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # SIG_IGN would auto-reap the command
    if spec.status_fd is not None:
        os.set_inheritable(spec.status_fd, False)


def _supervise(channel: socket.socket, policy: Policy) -> None:
    """Take the child's listener (none when it failed first) and answer its connects."""
    with channel:
        _, fds, _, _ = socket.recv_fds(channel, 1, 1)
    if not fds:
        return
    roots = [os.path.realpath(path) for path in policy.write if os.path.isdir(path)]
    sockguard.Supervisor(fds[0], roots, policy.tcp_connect).start()


def run(spec: Spec) -> int:
    """Run the command confined, kill whatever it left behind, and return the exit status."""
    abi = abi_version()
    if abi == 0:
        raise LaunchError("Landlock is not available on this kernel")
    if spec.uid is None and os.geteuid() == 0:
        raise LaunchError("refusing to run the command as root: give a uid and gid")
    _start_supervising(spec)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _WAKE_SIGNALS)
    launcher_pid = os.getpid()
    # Below ABI 9 the launcher makes the command's connects (sockguard): the child hands
    # over its filter's listener on this channel before it execs.
    ours, theirs = socket.socketpair() if abi < _ABI_RESOLVE_UNIX else (None, None)
    pid = os.fork()
    if pid == 0:
        code = EXIT_LAUNCH_FAILED
        try:  # whatever happens, the child never returns into the launcher's code
            if ours is not None:
                ours.close()
            code = _run_child(spec, abi, mask=mask, launcher_pid=launcher_pid, channel=theirs)
        finally:
            os._exit(code)
    if spec.status_fd is not None:
        os.close(spec.status_fd)
    if ours is not None and theirs is not None:
        theirs.close()
        _supervise(ours, spec.policy)
    code = _wait_command(pid)
    if not kill_tree(launcher_pid):
        return _fail(LaunchError("some processes survived the kill"))
    return code


def main(args: list[str]) -> int:
    """Script entry point: ``launch.py SPEC_JSON``; returns the exit status."""
    if len(args) != 1:
        return _fail(LaunchError("usage: launch.py SPEC_JSON"))
    try:
        return run(parse_spec(args[0]))
    except (LaunchError, OSError) as exc:
        return _fail(exc)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
