"""What a confined call asked for and was refused is that call's, network off or listed.

A call given a `refused` counter gets an egress proxy of its own (sandbox/egress.py), with
the network off too: curl and Python's urllib ask it for the host they want, and it says
which. Two calls at once, each with its own allowlist, see only their own refusals. Names
resolve through the test's resolver, and the one "public" address it gives is connected to
a local server: nothing leaves this machine.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import confined
from netproxy_support import PUBLIC, Hello, egress_to

from orchestrator.sandbox.confine import Network, Place, Sandbox
from orchestrator.sandbox.netproxy import Refusal, is_public
from orchestrator.workspace.shell import agent_env

CURL = "curl -sS --max-time 20 -o /dev/null -w 'status %{http_code}\\n' "
URLLIB = (
    'python3 -c "import urllib.request, sys\n'
    "try:\n print(urllib.request.urlopen(sys.argv[1], timeout=20).read().decode())\n"
    "except Exception as exc:\n print('failed:', exc)\" "
)


@pytest.fixture(params=["bwrap", "landlock"])
def box(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Sandbox, Path]]:
    yield from confined(request.param, f"refused-{tmp_path.name}")


async def call(
    sandbox: Sandbox, work: Path, command: str, network: Network
) -> tuple[str, Counter[Refusal]]:
    refused: Counter[Refusal] = Counter()
    done = await sandbox.run(
        command,
        place=Place(work, writable=True),
        env=agent_env({"PATH": "/usr/bin:/bin"}, sandbox=sandbox),
        timeout_s=60,
        cap=10_000,
        network=network,
        refused=refused,
    )
    return done.output.text(), refused


async def test_a_refused_request_is_the_calls_with_the_network_off_or_listed(
    box: tuple[Sandbox, Path], hello: Hello
) -> None:
    found, work = box
    sandbox = replace(found, egress=egress_to(hello))
    text, refused = await call(sandbox, work, CURL + "https://example.org/x", Network())
    assert refused == {Refusal("example.org", 443, "host"): 1}, text
    text, refused = await call(sandbox, work, URLLIB + "http://crates.test/", Network())
    assert "failed: HTTP Error 403" in text
    assert refused == {Refusal("crates.test", 80, "host"): 1}

    listed = Network(hosts=("pypi.test",))
    text, refused = await call(sandbox, work, URLLIB + "http://pypi.test/", listed)
    assert (text.strip(), refused) == ("hello", Counter())
    text, refused = await call(sandbox, work, CURL + "https://example.org/", listed)
    assert refused == {Refusal("example.org", 443, "host"): 1}, text
    # a listed name that resolves to loopback: refused for its address, whatever is listed
    looped = Network(hosts=("loop.test",))
    text, refused = await call(sandbox, work, URLLIB + "http://loop.test/", looped)
    assert refused == {Refusal("loop.test", 80, "address"): 1}, text
    assert not sandbox._proxies, "a call's own proxy is not kept after it"


async def test_calls_at_once_see_only_their_own_refusals(
    box: tuple[Sandbox, Path], hello: Hello
) -> None:
    found, work = box
    sandbox = replace(found, egress=egress_to(hello))
    wide = Network(hosts=("crates.test",))
    (text_a, a), (text_b, b) = await asyncio.gather(
        call(
            sandbox, work, URLLIB + "http://crates.test/ ; " + URLLIB + "http://other.test/", wide
        ),
        call(sandbox, work, URLLIB + "http://crates.test/", Network()),
    )
    assert "hello" in text_a
    assert a == {Refusal("other.test", 80, "host"): 1}
    assert b == {Refusal("crates.test", 80, "host"): 1}, "the other call's list is not this one's"


def test_the_public_stand_in_is_public() -> None:
    assert is_public(ipaddress.ip_address(PUBLIC))
