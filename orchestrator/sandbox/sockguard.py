"""Sockets under the Landlock launcher: a seccomp filter on which ones a command may make,
and a supervisor that makes every `connect()` on the command's behalf.

Stdlib-only, like `launch.py`, which loads it by path (it runs as ``python3 -I -S``).

Landlock checks TCP by port (ABI 4+) and abstract unix sockets by domain (ABI 6+), but
below ABI 9 (Linux 7.1) not connecting to a unix socket by its path — a root-owned
``docker.sock`` or a D-Bus socket outside the granted directories was reachable — and below
ABI 10 not UDP. Seccomp-BPF sees a system call's numbers, never the memory they point at,
so the rules are:

- `socket()` and `socketpair()` by family and type. Unix stream and seqpacket sockets are
  always allowed; IPv4 and IPv6 TCP (stream, protocol 0 or 6) where the Landlock port rules
  hold; UDP, raw, MPTCP, SCTP and every other family (vsock, netlink, packet…) only when the
  network is open. A unix *datagram* socket is refused unless the kernel checks paths itself
  (ABI 9): `sendmsg()` names its recipient in memory a filter cannot read. A unix stream or
  seqpacket socket sends only to the peer it connected to.
- `sendto()`, `sendmsg()`, `sendmmsg()` with MSG_FASTOPEN (a TCP connect inside a send)
  are refused unless the network is open; `io_uring_setup()` always (its operations are
  not system calls, so no filter would see them).
- System V IPC (`shmget()`, `msgget()`, `semget()` and the calls on what they made) always:
  Landlock has no IPC namespace, so a segment a command made would outlive its call, count
  against no limit, and be open to the next worktree given the same uid.
- `connect()` is handed to the launcher (SECCOMP_RET_USER_NOTIF) below ABI 9. The launcher
  takes the command's socket (`pidfd_getfd`), copies the address once, and connects that
  socket itself: a unix path only when it resolves beneath a writable directory of the call
  (`openat2` with RESOLVE_BENEATH, then connected through ``/proc/self/fd/N``, so nothing is
  looked up twice), an abstract or unnamed address never, an IP address only to a port the
  policy lists (any when the network is open). Nothing is read again from the command's
  memory after the check (no SECCOMP_USER_NOTIF_FLAG_CONTINUE), so another of its threads
  cannot change what was checked. The connection carries the launcher's credentials
  (SO_PEERCRED shows its uid), not the command's.

Only on x86-64 and AArch64 (elsewhere `install` returns None and nothing is filtered);
another architecture's system calls (i386, x32) kill the process.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import socket
import stat
import struct
import threading
from collections.abc import Sequence

# struct seccomp_data: int nr; u32 arch; u64 ip; u64 args[6] (little-endian: low word first)
_NR, _ARCH = 0, 4


def _arg(index: int) -> int:
    return 16 + 8 * index


_BPF_LD_W_ABS, _BPF_JEQ, _BPF_JGE, _BPF_JSET, _BPF_AND, _BPF_RET = (
    0x20,
    0x15,
    0x35,
    0x45,
    0x54,
    0x06,
)
_RET_KILL_PROCESS, _RET_USER_NOTIF, _RET_ALLOW, _RET_ERRNO = (
    0x80000000,
    0x7FC00000,
    0x7FFF0000,
    0x00050000,
)
_SET_MODE_FILTER = 1
_FLAG_NEW_LISTENER, _FLAG_WAIT_KILLABLE_RECV = 1 << 3, 1 << 5
_NOTIF_RECV, _NOTIF_SEND, _NOTIF_ID_VALID = 0xC0502100, 0xC0182101, 0x40082102
_NOTIF_SIZE, _RESP_SIZE = 80, 24
_NR_PIDFD_OPEN, _NR_OPENAT2, _NR_PIDFD_GETFD = 434, 437, 438  # the same on every arch
_RESOLVE_NO_MAGICLINKS, _RESOLVE_BENEATH = 0x02, 0x08
_PIDFD_THREAD = os.O_EXCL  # Linux 6.9
_SOCK_TYPE_MASK = 0xF
_MSG_FASTOPEN = 0x20000000
_SO_DOMAIN = 39
_SOCKADDR_MAX = 128  # sizeof(struct sockaddr_storage): the kernel refuses longer
_WORKERS = 64  # connects in flight per call; more wait for a free worker


class _Arch:
    def __init__(
        self,
        audit: int,
        seccomp: int,
        calls: dict[str, int],
        *,
        sysv: tuple[int, ...],
        x32: bool,
    ) -> None:
        self.audit, self.seccomp, self.calls, self.x32 = audit, seccomp, calls, x32
        self.sysv = sysv


_ARCHES = {
    "x86_64": _Arch(
        0xC000003E,
        317,
        {
            "socket": 41,
            "connect": 42,
            "sendto": 44,
            "sendmsg": 46,
            "socketpair": 53,
            "sendmmsg": 307,
            "io_uring_setup": 425,
        },
        # shmget shmat shmctl semget semop semctl shmdt msgget msgsnd msgrcv msgctl semtimedop
        sysv=(29, 30, 31, 64, 65, 66, 67, 68, 69, 70, 71, 220),
        x32=True,
    ),
    "aarch64": _Arch(
        0xC00000B7,
        277,
        {
            "socket": 198,
            "socketpair": 199,
            "connect": 203,
            "sendto": 206,
            "sendmsg": 211,
            "sendmmsg": 269,
            "io_uring_setup": 425,
        },
        sysv=tuple(range(186, 198)),  # msgget … shmdt, the twelve calls of System V IPC
        x32=False,
    ),
}


def _arch() -> _Arch | None:
    return _ARCHES.get(os.uname().machine)


def supported() -> bool:
    """Whether this machine's architecture has the filter (x86-64, AArch64)."""
    return _arch() is not None


class _Program:
    """A classic BPF program with forward jumps to labels (resolved by `code`)."""

    def __init__(self) -> None:
        self.ops: list[tuple[int, str | int, str | int, int]] = []
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self.labels[name] = len(self.ops)

    def load(self, offset: int) -> None:
        self.ops.append((_BPF_LD_W_ABS, 0, 0, offset))

    def mask(self, bits: int) -> None:
        self.ops.append((_BPF_AND, 0, 0, bits))

    def jump(self, op: int, value: int, yes: str | int = 0, no: str | int = 0) -> None:
        self.ops.append((op, yes, no, value))

    def ret(self, value: int) -> None:
        self.ops.append((_BPF_RET, 0, 0, value))

    def code(self) -> bytes:
        out = b""
        for index, (op, yes, no, value) in enumerate(self.ops):
            jt = self.labels[yes] - index - 1 if isinstance(yes, str) else yes
            jf = self.labels[no] - index - 1 if isinstance(no, str) else no
            out += struct.pack("=HBBI", op, jt, jf, value)
        return out


def filter_code(arch_name: str, *, network_open: bool, supervise: bool, unix_dgram: bool) -> bytes:
    """The filter for `arch_name` (see the module's rules); its sock_filter array as bytes."""
    arch = _ARCHES[arch_name]
    calls = arch.calls
    denied = _RET_ERRNO | errno.EACCES
    p = _Program()
    p.load(_ARCH)
    p.jump(_BPF_JEQ, arch.audit, 0, "kill")
    p.load(_NR)
    if arch.x32:
        p.jump(_BPF_JGE, 0x40000000, "kill", 0)
    p.jump(_BPF_JEQ, calls["io_uring_setup"], "nosys", 0)
    for number in arch.sysv:
        p.jump(_BPF_JEQ, number, "nosys", 0)
    if supervise:
        p.jump(_BPF_JEQ, calls["connect"], "notify", 0)
    p.jump(_BPF_JEQ, calls["socket"], "socket", 0)
    p.jump(_BPF_JEQ, calls["socketpair"], "unix_type", 0)
    if not network_open:
        p.jump(_BPF_JEQ, calls["sendto"], "flags3", 0)
        p.jump(_BPF_JEQ, calls["sendmsg"], "flags2", 0)
        p.jump(_BPF_JEQ, calls["sendmmsg"], "flags3", 0)
    p.ret(_RET_ALLOW)

    p.label("socket")
    p.load(_arg(0))
    p.jump(_BPF_JEQ, socket.AF_UNIX, "unix_type", 0)
    if network_open:
        p.ret(_RET_ALLOW)
    else:
        p.jump(_BPF_JEQ, socket.AF_INET, "inet", 0)
        p.jump(_BPF_JEQ, socket.AF_INET6, "inet", 0)
        p.ret(denied)
        p.label("inet")
        p.load(_arg(1))
        p.mask(_SOCK_TYPE_MASK)
        p.jump(_BPF_JEQ, socket.SOCK_STREAM, 0, "deny")
        p.load(_arg(2))
        p.jump(_BPF_JEQ, 0, "allow", 0)
        p.jump(_BPF_JEQ, socket.IPPROTO_TCP, "allow", "deny")

    p.label("unix_type")
    if unix_dgram:
        p.ret(_RET_ALLOW)
    else:
        p.load(_arg(1))
        p.mask(_SOCK_TYPE_MASK)
        p.jump(_BPF_JEQ, socket.SOCK_DGRAM, "deny", "allow")

    if not network_open:
        for name, index in (("flags2", 2), ("flags3", 3)):
            p.label(name)
            p.load(_arg(index))
            p.jump(_BPF_JSET, _MSG_FASTOPEN, "deny", "allow")

    p.label("allow")
    p.ret(_RET_ALLOW)
    p.label("deny")
    p.ret(denied)
    p.label("nosys")
    p.ret(_RET_ERRNO | errno.ENOSYS)
    p.label("kill")
    p.ret(_RET_KILL_PROCESS)
    p.label("notify")
    p.ret(_RET_USER_NOTIF if supervise else _RET_ALLOW)
    return p.code()


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _call(number: int, *args: object) -> int:
    call = _libc().syscall
    call.restype = ctypes.c_long
    result = int(call(ctypes.c_long(number), *args))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def install(*, network_open: bool, supervise: bool, unix_dgram: bool) -> tuple[bool, int | None]:
    """Install the filter on this process (no_new_privs must be set); (installed, listener).

    ``installed`` is False on an architecture the filter does not know. The listener fd, when
    ``supervise``, is for the launcher: the caller must pass it on and close it before the
    command runs (a command holding it would answer its own connects). ``supervise`` on a
    kernel without user notification (before 5.0) installs the rest and returns no listener.
    """
    arch = _arch()
    if arch is None:
        return False, None
    attempts = (
        [_FLAG_NEW_LISTENER | _FLAG_WAIT_KILLABLE_RECV, _FLAG_NEW_LISTENER] if supervise else []
    )
    for flags in [*attempts, 0]:
        code = filter_code(
            os.uname().machine,
            network_open=network_open,
            supervise=bool(flags),
            unix_dgram=unix_dgram,
        )
        buffer = ctypes.create_string_buffer(code, len(code))
        prog = _Fprog(len(code) // 8, ctypes.addressof(buffer))
        try:
            fd = _call(
                arch.seccomp,
                ctypes.c_ulong(_SET_MODE_FILTER),
                ctypes.c_ulong(flags),
                ctypes.byref(prog),
            )
        except OSError as exc:
            if exc.errno == errno.EINVAL and flags:
                continue  # a flag this kernel does not know: try with fewer
            raise
        return True, (fd if flags else None)
    raise AssertionError("unreachable")


class Supervisor:
    """Answers the command's `connect()` calls from the listener fd, each in a worker thread.

    ``roots``: the directories (resolved) beneath which a unix socket may be reached;
    ``ports``: TCP ports an IP connect may reach, None for any.
    """

    def __init__(self, listener: int, roots: Sequence[str], ports: Sequence[int] | None) -> None:
        self.listener = listener
        self.roots = [root.rstrip("/") or "/" for root in roots]
        self.ports = None if ports is None else frozenset(ports)
        self._workers = threading.BoundedSemaphore(_WORKERS)
        self._libc = _libc()

    def start(self) -> None:
        """Serve notifications in a daemon thread until the listener has no process left."""
        threading.Thread(target=self._serve, name="teaparty-connects", daemon=True).start()

    def _serve(self) -> None:
        ioctl = self._libc.ioctl
        while True:
            notif = ctypes.create_string_buffer(_NOTIF_SIZE)
            if ioctl(self.listener, ctypes.c_ulong(_NOTIF_RECV), notif) != 0:
                code = ctypes.get_errno()
                if code in (errno.EINTR, errno.ENOENT):  # a call gone before we took it
                    continue
                return  # ENOTCONN and the like: no process of the command is left
            self._workers.acquire()
            worker = threading.Thread(target=self._answer, args=(notif.raw,), daemon=True)
            try:
                worker.start()
            except RuntimeError:  # no thread to be had: answer here, or the call waits for ever
                self._answer(notif.raw)

    def _answer(self, raw: bytes) -> None:
        ident, pid, _flags, _nr, _arch_id, _ip = struct.unpack_from("=QIIiIQ", raw)
        fd, address, length = struct.unpack_from("=QQQ", raw, 32)
        try:
            error = self._connect(ident, pid, fd & 0xFFFFFFFF, address, length & 0xFFFFFFFF)
        except OSError as exc:
            error = exc.errno or errno.EIO
        except Exception:  # a worker always answers, or the command's call waits for ever
            error = errno.EFAULT
        finally:
            self._workers.release()
        response = ctypes.create_string_buffer(struct.pack("=QqiI", ident, 0, -error, 0))
        self._libc.ioctl(self.listener, ctypes.c_ulong(_NOTIF_SEND), response)  # gone: ENOENT

    def _valid(self, ident: int) -> bool:
        value = ctypes.c_uint64(ident)
        result: int = self._libc.ioctl(
            self.listener, ctypes.c_ulong(_NOTIF_ID_VALID), ctypes.byref(value)
        )
        return result == 0

    def _connect(self, ident: int, pid: int, fd: int, address: int, length: int) -> int:
        """Connect the command's socket as its call asked, if the policy allows; 0 or an errno."""
        if not 2 <= length <= _SOCKADDR_MAX:
            return errno.EINVAL
        pidfd = _pidfd(pid)
        try:
            if not self._valid(ident):  # the pid is no longer the caller's
                return errno.ESRCH
            sockfd = _call(_NR_PIDFD_GETFD, ctypes.c_int(pidfd), ctypes.c_int(fd), ctypes.c_uint(0))
        finally:
            os.close(pidfd)
        with contextlib.ExitStack() as stack:
            stack.callback(os.close, sockfd)
            mem = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
            stack.callback(os.close, mem)
            try:
                sockaddr = os.pread(mem, length, address)
            except OSError:  # EIO: not mapped in the caller
                return errno.EFAULT
            cwd = os.readlink(f"/proc/{pid}/cwd")
            if len(sockaddr) != length or not self._valid(ident):
                return errno.EFAULT
            if not stat.S_ISSOCK(os.fstat(sockfd).st_mode):
                return errno.ENOTSOCK
            domain = _domain(sockfd)
            if domain == socket.AF_UNIX:
                return self._unix(sockfd, sockaddr, cwd, stack)
            if domain in (socket.AF_INET, socket.AF_INET6) and not self._port_allowed(sockaddr):
                return errno.EACCES
            return self._raw_connect(sockfd, sockaddr)

    def _port_allowed(self, sockaddr: bytes) -> bool:
        family = struct.unpack_from("=H", sockaddr)[0]
        if self.ports is None or family == socket.AF_UNSPEC:
            return True
        if family not in (socket.AF_INET, socket.AF_INET6) or len(sockaddr) < 4:
            return False
        return struct.unpack_from("!H", sockaddr, 2)[0] in self.ports

    def _unix(self, sockfd: int, sockaddr: bytes, cwd: str, stack: contextlib.ExitStack) -> int:
        family = struct.unpack_from("=H", sockaddr)[0]
        path = sockaddr[2:].split(b"\0", 1)[0]
        if family != socket.AF_UNIX or not path:  # abstract or unnamed: never for another
            return errno.EPERM if family == socket.AF_UNIX else errno.EINVAL  # as the scope
        target = os.fsdecode(path)
        if not target.startswith("/"):
            target = f"{cwd.rstrip('/')}/{target}"
        for root in self.roots:
            prefix = root if root.endswith("/") else root + "/"
            if not target.startswith(prefix):
                continue
            node = _open_beneath(root, target[len(prefix) :])
            if node < 0:
                return -node
            stack.callback(os.close, node)
            if not stat.S_ISSOCK(os.fstat(node).st_mode):
                return errno.ECONNREFUSED
            via = f"/proc/self/fd/{node}".encode()
            return self._raw_connect(sockfd, struct.pack("=H", socket.AF_UNIX) + via + b"\0")
        return errno.EACCES

    def _raw_connect(self, sockfd: int, sockaddr: bytes) -> int:
        buffer = ctypes.create_string_buffer(sockaddr, len(sockaddr))
        if self._libc.connect(ctypes.c_int(sockfd), buffer, ctypes.c_uint(len(sockaddr))) == 0:
            return 0
        return ctypes.get_errno() or errno.EIO


def _pidfd(tid: int) -> int:
    """A pidfd for the thread `tid` (a notification names the calling thread, which in a
    threaded program is not its process's leader): the thread's own from Linux 6.9
    (PIDFD_THREAD), else its process's, found from /proc (the fd table is shared)."""
    try:
        return os.pidfd_open(tid, _PIDFD_THREAD)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
    with open(f"/proc/{tid}/status", "rb") as status:
        for line in status:
            if line.startswith(b"Tgid:"):
                return os.pidfd_open(int(line.split()[1]))
    raise OSError(errno.ESRCH, "no thread group")


def _domain(sockfd: int) -> int:
    with socket.socket(fileno=os.dup(sockfd)) as sock:
        return sock.getsockopt(socket.SOL_SOCKET, _SO_DOMAIN)


def _open_beneath(root: str, relative: str) -> int:
    """An O_PATH fd of `relative` resolved beneath `root`, or minus an errno: what the kernel
    would say of a missing path (ENOENT, ENOTDIR, ELOOP), EACCES for one that leaves `root`
    (by `..` or a symlink: EXDEV from openat2) or cannot be opened."""
    try:
        base = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return -errno.EACCES
    try:
        flags = os.O_PATH | os.O_CLOEXEC
        how = ctypes.create_string_buffer(
            struct.pack("=QQQ", flags, 0, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
        )
        name = ctypes.create_string_buffer(os.fsencode(relative or "."))
        return _call(_NR_OPENAT2, ctypes.c_int(base), name, how, ctypes.c_size_t(24))
    except OSError as exc:
        kept = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG)
        return -(exc.errno if exc.errno in kept else errno.EACCES)
    finally:
        os.close(base)
