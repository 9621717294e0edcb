"""The network gate: a host the sandbox refused an agent may be put to the decider, and an
approval widens that job's network from then on.

Every agent shell call of a job gets an egress proxy of its own (sandbox/egress.py) with
the project's `sandbox.network` plus the hosts approved for the job, the network off
included; what it refused is recorded (jobs/refusals.py) and shown on the tracking comment
and by `teaparty jobs show`. With `sandbox.ask: true`, the first refusal of a host in a job
opens a `network` gate on the job's root conversation: "allow `index.crates.io` for this
job?". The call that was refused has failed already and is not held: its result tells the
agent that the decider was asked. An approval lets the job's later calls reach the host (the
approved gates are the job's widened list, so it survives a restart, and another job's calls
never see it); any other answer keeps it refused. A job is asked once per host, and at most
MAX_OPEN such questions wait at once.

No approval reaches what must stay unreachable: only a refused *name* (or a public IP
literal) is ever asked about, never localhost, a single label or a private, loopback or
link-local address, and the proxy still refuses a granted name that resolves to one. The
human proxy never answers this gate alone (`GateKind.proxy_never`): widening what agents
can reach is the decider's call.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from orchestrator.bus import gates
from orchestrator.bus.events import EventBus, GateAsked
from orchestrator.bus.extensions import Extensions
from orchestrator.bus.gates import AskIntent, Gate
from orchestrator.bus.jobs import project_of
from orchestrator.bus.transactions import listed
from orchestrator.core.gate_kinds import GateKind
from orchestrator.core.messages import job_conversation_id
from orchestrator.jobs import refusals, revisions
from orchestrator.jobs.refusals import Refused
from orchestrator.sandbox.netproxy import Refusal, is_public, normalize_host
from orchestrator.store.sqlite import Store, Tx
from orchestrator.teams.board import locate

KIND = GateKind(
    "network",
    "always",
    title="a host for this job's network",
    about="whether this job's agents may reach a host its project does not list",
    proxy_alone=False,
    proxy_never=True,  # widening what agents reach is the decider's, whatever a project says
    wakes_asker=False,  # the refused call has ended: no agent waits on the answer
)
OPTIONS = ("yes", "no")
MAX_OPEN = 3  # network questions of one job waiting at once
_NEVER_PUBLIC = ("localhost", ".localhost", ".local", ".internal", ".home.arpa", ".arpa")


def askable(host: str) -> str | None:
    """`host` as a gate would name it, or None where no approval could make it reachable: a
    name that fails validation, localhost and local-only names, a single label, an address
    that is not public."""
    try:
        normal = normalize_host(host)
    except ValueError:
        return None
    try:
        address = ipaddress.ip_address(normal)
    except ValueError:
        local = normal.endswith(_NEVER_PUBLIC) or normal == _NEVER_PUBLIC[0]
        return None if local or "." not in normal else normal
    return normal if is_public(address) else None


def granted(tx: Tx, job_id: int) -> tuple[str, ...]:
    """The hosts approved for the job, in the order they were."""
    return tuple(
        str(gate.payload["host"])
        for gate in _asked(tx, job_id)
        if gate.approved and gate.payload.get("host")
    )


@dataclass(frozen=True)
class _Caller:
    job_id: int
    task: int | None
    project: str


class NetworkDesk:
    """The engine's side of agents' shell calls' network (workspace's EgressWatch): what a
    job may reach beyond its project's list, and what its calls were refused.

    `asks(project)`: whether the project put refused hosts to its decider (`sandbox.ask`).
    """

    def __init__(self, store: Store, events: EventBus, *, asks: Callable[[str], bool]) -> None:
        self.store = store
        self.events = events
        self.asks = asks

    async def granted(self, conversation_id: str) -> tuple[str, ...]:
        """Hosts the conversation's job may reach beyond its project's `sandbox.network`."""

        def read(tx: Tx) -> tuple[str, ...]:
            caller = _caller(tx, conversation_id)
            return () if caller is None else granted(tx, caller.job_id)

        return await self.store.read(read)

    async def refused(
        self, conversation_id: str, *, agent: str, command: str, refusals: Mapping[Refusal, int]
    ) -> str:
        """Record what the call was refused, ask about the refused hosts the project lets
        its decider widen to; the note the agent's result carries."""
        asked = await self.store.write(
            lambda tx: self._record(tx, conversation_id, agent, command, refusals)
        )
        for gate in asked:
            self.events.publish(
                GateAsked(gate.gate_id, gate.conversation_id, KIND.name, gate.question)
            )
        return note(refusals, asked)

    def _record(
        self,
        tx: Tx,
        conversation_id: str,
        agent: str,
        command: str,
        refused: Mapping[Refusal, int],
    ) -> list[Gate]:
        caller = _caller(tx, conversation_id)
        if caller is None:
            return []
        refusals.record(
            tx, caller.job_id, task=caller.task, agent=agent, command=command, refusals=refused
        )
        if not self.asks(caller.project) or gates.mode(tx, caller.job_id, KIND) == "never":
            return []
        asked = []
        for refusal in refused:
            host = askable(refusal.host) if refusal.why == "host" else None
            if host is not None and (gate := _ask(tx, caller, host, agent, command)) is not None:
                asked.append(gate)
        return asked

    async def of_job(self, job_id: int) -> tuple[Refused, ...]:
        """What the job's agents were refused, most recent first."""
        return await self.store.read(lambda tx: refusals.of_job(tx, job_id))


def _ask(tx: Tx, caller: _Caller, host: str, agent: str, command: str) -> Gate | None:
    """The gate asking about `host` for the job, unless one asked already or MAX_OPEN wait."""
    asked = _asked(tx, caller.job_id)
    if any(gate.payload.get("host") == host for gate in asked):
        return None
    if sum(gate.answer is None and gate.closed_at is None for gate in asked) >= MAX_OPEN:
        return None
    task = refusals.caller(agent, caller.task)
    text = question(host, command=refusals.clip(command), caller=task)
    gate_id = gates.ask_engine(
        tx,
        job_id=caller.job_id,
        conversation_id=job_conversation_id(caller.job_id),
        content=revisions.job_content,
        intent=AskIntent(f"{KIND.name}:{host}", text, OPTIONS, kind=KIND.name),
        payload={"host": host, "command": refusals.clip(command), "caller": task},
        pinned={"host": host},
    )
    return gates.get(tx, gate_id)


def question(host: str, *, command: str, caller: str) -> str:
    """The question: the host, who asked for it with which command, what approving does."""
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in command)
    return (
        f"Allow `{host}` for this job?\n\n"
        f"The sandbox refused a request to {host} from {caller}, which ran:\n\n"
        f"{revisions.fenced(shown, 'text')}\n\n"
        f"Approving lets this job's agents reach {host} from their next command on (not "
        "other jobs; addresses it resolves to must still be public: private, loopback and "
        "link-local ones stay refused). Any other answer keeps it refused, and this job is "
        "not asked about it again."
    )


def note(refused: Mapping[Refusal, int], asked: list[Gate]) -> str:
    """What the agent reads after its output: each refused destination, and what was done."""
    lines = []
    for refusal in sorted(refused, key=lambda r: (r.host, r.port)):
        what = refusals.WHY.get(refusal.why, refusal.why)
        lines.append(f"[sandbox: refused egress to {refusal.host}:{refusal.port} ({what})]")
    for gate in asked:
        lines.append(
            f"[sandbox: the decider was asked whether this job may reach "
            f"{gate.payload['host']} (question {gate.gate_id}); the call is not retried: "
            "carry on without it, or try again later]"
        )
    return "\n".join(lines)


def register(extensions: Extensions) -> None:
    """The network gate: its kind; an answer changes nothing but the gate (calls read it)."""
    extensions.gate_kind(KIND, settle=settle)


def settle(tx: Tx, gate: Gate) -> tuple[str, ...]:
    """An approved host is read from its gate by the job's next call: nobody has new work."""
    return ()


def _asked(tx: Tx, job_id: int) -> list[Gate]:
    return gates.of_kind(tx, job_id, KIND.name)


def _caller(tx: Tx, conversation_id: str) -> _Caller | None:
    found = listed(tx, conversation_id)
    project = None if found is None or found.job_id is None else project_of(tx, found.job_id)
    if found is None or found.job_id is None or project is None:
        return None
    place = None if found.task_id is None else locate(tx, found.task_id)
    return _Caller(found.job_id, None if place is None else place[1], project)
