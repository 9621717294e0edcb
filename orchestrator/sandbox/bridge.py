"""Inside a network-less sandbox: a loopback proxy port relayed to the engine's unix socket.

Run as `python3 -I -S bridge.py --listen 127.0.0.1:PORT --unix SOCKET -- CMD ARGS...`.
It binds PORT on the sandbox's own loopback, starts CMD (which inherits the environment, where
the engine has put HTTP_PROXY=http://127.0.0.1:PORT and friends), relays every connection to
PORT byte for byte to SOCKET (the engine's egress proxy, bind-mounted in), and exits with CMD's
status: its exit code, or 128 + the signal that killed it. Standard library only and no imports
from this package (-I -S: it must stand alone); silent unless something fails.

It runs before every command of a sandbox with network, so it is built for start-up time: it
imports only C modules (the public `socket`, `signal` and `selectors` pull in enum, typing and
collections) and starts the command with posix_spawn rather than fork; both together took its
median added cost from about 50 ms to about 20 ms here, most of which is Python's own start.
"""

from __future__ import annotations

import _socket
import os
import select
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _signal  # _signal (loaded at start-up anyway) has no stubs; same functions
    from collections.abc import Sequence
else:
    import _signal

_CHUNK = 65_536
_FAILED = 125  # the bridge itself failed (as env(1) and timeout(1) use 125)
_FORWARDED = (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP, _signal.SIGQUIT)
_IN, _OUT = select.POLLIN, select.POLLOUT
_GONE = select.POLLHUP | select.POLLERR | select.POLLNVAL


class _Link:
    """One relayed connection: two non-blocking sockets and what each still has to receive."""

    def __init__(
        self, links: dict[int, _Link], poller: select.poll, *socks: _socket.socket
    ) -> None:
        self.links = links
        self.poller = poller
        self.socks = socks
        self.fds = tuple(sock.fileno() for sock in socks)
        self.pending = [b"", b""]  # pending[i]: bytes read from the other side, for socks[i]
        self.eof = [False, False]  # eof[i]: socks[i] has no more to send
        self.registered = [0, 0]
        for sock in socks:
            sock.setblocking(False)
        self.update()

    def on_event(self, fd: int, events: int) -> None:
        """Move what can move without blocking, then re-arm or close."""
        side = self.fds.index(fd)
        try:
            if events & (_OUT | _GONE) and self.pending[side]:
                self._send(side)
            if events & (_IN | _GONE) and self.registered[side] & _IN:
                data = self.socks[side].recv(_CHUNK)
                self.pending[1 - side] = data
                self.eof[side] = not data
                self._send(1 - side)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self.close()
            return
        self.update()

    def _send(self, side: int) -> None:
        if self.pending[side]:
            sent = self.socks[side].send(self.pending[side])
            self.pending[side] = self.pending[side][sent:]
        if self.eof[1 - side] and not self.pending[side]:
            self.socks[side].shutdown(_socket.SHUT_WR)

    def update(self) -> None:
        """Read a side only when its output has drained; write a side that has pending bytes."""
        if all(self.eof) and not any(self.pending):
            self.close()
            return
        for side, fd in enumerate(self.fds):
            wanted = 0 if self.eof[side] or self.pending[1 - side] else _IN
            wanted |= _OUT if self.pending[side] else 0
            if wanted == self.registered[side]:
                continue
            if not wanted:
                self.poller.unregister(fd)
                del self.links[fd]
            elif self.registered[side]:
                self.poller.modify(fd, wanted)
            else:
                self.poller.register(fd, wanted)
                self.links[fd] = self
            self.registered[side] = wanted

    def close(self) -> None:
        """Drop both sockets."""
        for side, fd in enumerate(self.fds):
            if self.registered[side]:
                self.poller.unregister(fd)
                del self.links[fd]
                self.registered[side] = 0
            self.socks[side].close()


def _parse(argv: Sequence[str]) -> tuple[tuple[str, int], str, list[str]]:
    """(listen address, unix socket path, command) from the command line; ValueError if bad."""
    options: dict[str, str] = {}
    args = list(argv)
    while args and args[0] != "--":
        if len(args) < 2 or args[0] not in ("--listen", "--unix"):
            raise ValueError(f"unexpected argument {args[0]!r}")
        options[args[0]] = args[1]
        del args[:2]
    if not args[1:] or set(options) != {"--listen", "--unix"}:
        raise ValueError("usage: --listen HOST:PORT --unix PATH -- CMD [ARGS...]")
    host, _, port = options["--listen"].rpartition(":")
    return (host.strip("[]"), int(port)), options["--unix"], args[1:]


def _listen(address: tuple[str, int]) -> _socket.socket:
    family = _socket.AF_INET6 if ":" in address[0] else _socket.AF_INET
    listener = _socket.socket(family, _socket.SOCK_STREAM)  # close-on-exec, as all sockets
    listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
    listener.bind(address)
    listener.listen(128)
    listener.setblocking(False)
    return listener


def _spawn(command: list[str]) -> int:
    """Start the command with stdio only, default signal dispositions and our environment."""
    return os.posix_spawnp(
        command[0],
        command,
        os.environ,
        file_actions=[(os.POSIX_SPAWN_CLOSE, fd) for fd in _inherited_fds()],
        setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ),  # Python ignores both; exec would keep that
        setsigmask=(),  # nor may the child keep our blocked signals
    )


def _inherited_fds() -> list[int]:
    """Descriptors beyond stdio that exec would pass on (all of ours are close-on-exec)."""
    try:
        candidates = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        candidates = list(range(3, min(os.sysconf("SC_OPEN_MAX"), 65_536)))
    inherited = []
    for fd in candidates:
        try:
            if fd > 2 and os.get_inheritable(fd):
                inherited.append(fd)
        except OSError:
            pass  # not open (the directory listing's own descriptor, already closed)
    return inherited


def _accept(
    listener: _socket.socket, links: dict[int, _Link], poller: select.poll, path: str
) -> None:
    try:
        fd, _ = listener._accept()  # type: ignore[attr-defined]  # what socket.accept wraps
    except (BlockingIOError, InterruptedError):
        return
    client = _socket.socket(fileno=fd)
    upstream = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        upstream.settimeout(5.0)
        upstream.connect(path)
    except OSError as exc:
        os.write(2, f"teaparty-bridge: proxy {path}: {exc.strerror or exc}\n".encode())
        upstream.close()
        client.close()
        return
    _Link(links, poller, client, upstream)


def _serve(listener: _socket.socket, pid: int, path: str) -> int:
    """Relay connections until the command exits; return its status."""
    poller = select.poll()
    poller.register(listener.fileno(), _IN)
    try:
        exited = os.pidfd_open(pid)  # readable once the child has exited
        poller.register(exited, _IN)
    except (AttributeError, OSError):
        exited = -1  # Linux < 5.3: look every 50 ms instead
    links: dict[int, _Link] = {}
    while True:
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if done:
            return _status(wait_status)
        for fd, events in poller.poll(None if exited >= 0 else 50):
            if fd == listener.fileno():
                _accept(listener, links, poller, path)
            elif fd in links:
                links[fd].on_event(fd, events)


def _status(wait_status: int) -> int:
    if os.WIFSIGNALED(wait_status):
        return 128 + os.WTERMSIG(wait_status)
    return os.waitstatus_to_exitcode(wait_status)


def main(argv: Sequence[str]) -> int:
    """Bind, start the command, relay until it exits; return the status to exit with."""
    try:
        address, path, command = _parse(argv)
        listener = _listen(address)
    except (ValueError, OSError) as exc:
        os.write(2, f"teaparty-bridge: {exc}\n".encode())
        return _FAILED
    # Held until the child's pid is known, so that a signal sent meanwhile is still forwarded.
    _signal.pthread_sigmask(_signal.SIG_BLOCK, _FORWARDED)
    try:
        pid = _spawn(command)
    except OSError as exc:
        os.write(2, f"teaparty-bridge: {command[0]}: {exc.strerror}\n".encode())
        return 127 if isinstance(exc, FileNotFoundError) else 126
    for signum in _FORWARDED:
        _signal.signal(signum, lambda signum, frame: _forward(pid, signum))
    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, _FORWARDED)
    return _serve(listener, pid, path)


def _forward(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass  # already reaped: the loop is about to return its status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
