"""A shell call's own egress proxy: what it refused is that call's, whoever else runs.

The proxies `Sandbox` shares per allowlist serve every call with that list at once, so a
refusal they see belongs to nobody in particular. A call whose refusals someone wants
(an agent's shell, to report them and ask about widening) gets a proxy of its own instead,
for its lifetime only: under bubblewrap a unix socket in a fresh directory that only its
namespace has bound in, under Landlock an ephemeral loopback port that only its Landlock
rules let it connect to. Attribution then needs nothing from the client (no credentials in
the proxy URL, which some tools drop) and cannot be forged by another call, which cannot
reach this listener. A call's proxy also carries the call's own allowlist, so one job's
approved hosts never widen another job's calls.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

from orchestrator.sandbox.netproxy import EgressProxy, Refusal


class CallProxy:
    """One call's proxy: started on the transport the call's sandbox reaches, closed with it."""

    def __init__(self, proxy: EgressProxy) -> None:
        self.proxy = proxy
        self._folder: Path | None = None

    async def unix(self) -> Path:
        """Listen on a unix socket in a directory of its own (bound into bwrap)."""
        folder = Path(tempfile.mkdtemp(prefix="teaparty-egress-"))
        os.chmod(folder, 0o711)  # the sandbox's uid reaches the socket, lists nothing
        self._folder = folder
        await self.proxy.start_unix(folder / "proxy.sock")
        return folder / "proxy.sock"

    async def tcp(self) -> int:
        """Listen on an ephemeral port of 127.0.0.1 (Landlock lets the call reach it alone)."""
        return await self.proxy.start_tcp("127.0.0.1")

    @property
    def refusals(self) -> Counter[Refusal]:
        """What the call asked for and was refused, with how often."""
        return self.proxy.refusals

    async def close(self) -> None:
        """Stop listening, cut what is still open, remove the socket's directory."""
        await self.proxy.close()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
