"""The process environment is cut to an allowlist at start: read once, then re-exec.

`/proc/<pid>/environ` shows the environment a program was *started* with, whatever it
deletes from `os.environ` later, and any process that may read it (the same user, root,
a confined process on a host whose sandbox is weaker than hoped) would find the App's
private key, the webhook secret, the model key, and whatever else the operator's
environment holds (`DATABASE_URL`, `SENTRY_DSN`: credentials no name pattern finds). So the
`teaparty` command keeps only the variables the engine names for itself
(`orchestrator.core.secrecy.engine_keeps`: PATH, HOME, the locale, proxies ...) and hands
every other one to a fresh image of itself through an anonymous file descriptor, then
`execve`s with the short environment; the new image reads them, closes the descriptor, and
passes them down explicitly. The pid stays the same, and its `environ` now shows no secret.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Mapping

from bot.errors import SettingsError
from orchestrator.core.secrecy import engine_keeps

HANDOVER = "TEAPARTY_SECRETS_FD"


def handed_names(environ: Mapping[str, str]) -> list[str]:
    """The variables that leave the process environment: all but those the engine keeps."""
    return sorted(name for name in environ if not engine_keeps(name))


def take_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """The whole environment, with only what the engine keeps left in the process's own.

    Does not return in the first image when anything else is set: it re-executes itself.
    """
    if HANDOVER in environ:
        return _receive(environ)
    names = handed_names(environ)
    if not names:
        return dict(environ)
    payload = json.dumps({name: environ[name] for name in names}).encode()
    descriptor = _anonymous_file(payload)
    clean = {name: value for name, value in environ.items() if name not in names}
    clean[HANDOVER] = str(descriptor)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, sys.orig_argv, clean)
    raise AssertionError("execve returned")  # pragma: no cover - execve does not return


def _anonymous_file(payload: bytes) -> int:
    """A descriptor, inherited across exec, from which `payload` reads back."""
    if hasattr(os, "memfd_create"):
        descriptor = os.memfd_create("teaparty-secrets", 0)  # no MFD_CLOEXEC: exec keeps it
        os.write(descriptor, payload)
        os.lseek(descriptor, 0, os.SEEK_SET)
        return descriptor
    import tempfile  # an unlinked file: a whole environment may not fit a pipe's buffer

    handle = tempfile.TemporaryFile()
    descriptor = os.dup(handle.fileno())  # still open once `handle` is closed
    handle.close()
    os.set_inheritable(descriptor, True)
    os.write(descriptor, payload)
    os.lseek(descriptor, 0, os.SEEK_SET)
    return descriptor


def _receive(environ: Mapping[str, str]) -> dict[str, str]:
    raw = environ[HANDOVER]
    os.environ.pop(HANDOVER, None)
    if not raw.isdigit():
        raise SettingsError(f"{HANDOVER}={raw!r} is not a file descriptor; do not set it yourself")
    descriptor = int(raw)
    chunks = []
    try:
        while chunk := os.read(descriptor, 65_536):
            chunks.append(chunk)
    except OSError as exc:
        raise SettingsError(f"{HANDOVER}: cannot read the secrets handed over: {exc}") from exc
    finally:
        with contextlib.suppress(OSError):  # a descriptor that was never open: said above
            os.close(descriptor)
    try:
        secrets = json.loads(b"".join(chunks))
    except ValueError as exc:
        raise SettingsError(f"{HANDOVER}: the secrets handed over are not JSON") from exc
    rest = {name: value for name, value in environ.items() if name != HANDOVER}
    return {**rest, **{str(k): str(v) for k, v in secrets.items()}}
