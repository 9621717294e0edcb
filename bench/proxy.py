"""Benchmark of the human proxy's autonomy rule: how often it answers alone, and how safely.

    python bench/proxy.py [--quick] [--seeds N] [--notice P]

Three simulated deciders with known preferences each meet 200 plan gates (approve or
reject a plan of n tasks touching some areas of the code). The proxy is the engine's own:
`Proxy.consult` on a real store file, with its brief, its parser and its autonomy rule; its
model is a function model that knows the decider's answer and gives it at a set accuracy
(70%, 90%, 97%), stating a confidence that is usually informative and sometimes wrong:
right answers state 0.80–0.99 and wrong ones 0.45–0.80, except that a fifth of the time
the confidence comes from the other range. A gate the proxy does not answer is answered by
the decider; a wrong answer it gave alone is overridden when the decider notices it
(`--notice`, default half the time).

Per accuracy: the share of gates answered alone, the accuracy of those answers, and the
false-approval rate (gates approved alone that the decider would have rejected, over all
gates), beside always asking and always letting the proxy answer; and the same rule with
every decision comparable (issue 14's other reading of "comparable"). Exit 1 when the
goal is missed: false approvals <= 2% at every accuracy, alone >= 20% at 90% and >= 50% at
97% (docs/performance.md).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.api import load_project
from orchestrator.bus import gates
from orchestrator.bus.conversations import ConversationBus
from orchestrator.bus.events import EventBus
from orchestrator.bus.transactions import conversation
from orchestrator.config import Project, load_organisation, shipped_org_dir
from orchestrator.core.messages import AssistantTurn
from orchestrator.core.model import ModelRequest
from orchestrator.jobs import revisions
from orchestrator.jobs.features import extensions
from orchestrator.models.scripted import FunctionModel
from orchestrator.proxy.autonomy import Rules
from orchestrator.proxy.proxy import Proxy
from orchestrator.store.sqlite import Store, Tx

ACCURACIES = (0.70, 0.90, 0.97)
GATES = 200
SWAPPED = 0.2  # how often the stated confidence comes from the wrong range
AREAS = ("docs", "tests", "core", "cli", "deps", "ci")
GOAL_FALSE_APPROVALS = 0.02
GOAL_ALONE = {0.90: 0.20, 0.97: 0.50}


@dataclass(frozen=True)
class Plan:
    """What a plan gate asks to approve."""

    tasks: int
    areas: frozenset[str]

    def question(self) -> str:
        touched = ", ".join(sorted(self.areas))
        return f"Plan: {self.tasks} task(s), touching {touched}. Approve?"


Decider = tuple[str, Callable[[Plan], bool]]
DECIDERS: tuple[Decider, ...] = (
    ("dana", lambda p: p.tasks <= 3 and not p.areas & {"deps", "ci"}),  # cautious
    ("eli", lambda p: "ci" not in p.areas),  # approves nearly everything
    ("fay", lambda p: p.areas <= {"docs", "tests"} or p.tasks == 1),  # strict
)


@dataclass
class Tally:
    """Counts over a run's gates."""

    gates: int = 0
    alone: int = 0
    alone_right: int = 0
    false_approvals: int = 0
    proxy_right: int = 0  # always-proxy: the predictor's answer on every gate
    proxy_false_approvals: int = 0
    seconds: float = 0.0

    def add(self, other: Tally) -> None:
        for name in vars(self):
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class Oracle:
    """The simulation's truth, which the function model answers from at its accuracy."""

    accuracy: float
    rng: random.Random
    truth: dict[int, str] = field(default_factory=dict)
    said: dict[int, str] = field(default_factory=dict)

    def reply(self, request: ModelRequest) -> AssistantTurn:
        found = re.search(r"at gate (\d+)\.", request.messages[0].text)
        assert found is not None, "the brief names its gate"
        gate_id = int(found.group(1))
        truth = self.truth[gate_id]
        right = self.rng.random() < self.accuracy
        answer = truth if right else ("reject" if truth == "approve" else "approve")
        confident = right if self.rng.random() >= SWAPPED else not right
        low, high = (0.80, 0.99) if confident else (0.45, 0.80)
        self.said[gate_id] = answer
        stated = self.rng.uniform(low, high)
        return AssistantTurn(
            text=f"answer: {answer}\nconfidence: {stated:.3f}\nreasons: simulated."
        )


def plan_of(rng: random.Random) -> Plan:
    tasks = rng.choice((1, 1, 2, 2, 3, 4, 5, 8))
    areas = frozenset(rng.sample(AREAS, rng.choice((1, 1, 2, 3))))
    return Plan(tasks, areas)


def asked(tx: Tx, intent: gates.AskIntent, conversation_id: str, decider: str) -> int:
    """A gate asked in the decider's job, posted to them."""
    gate_id = gates.ask(
        tx, conversation(tx, conversation_id), intent, content=revisions.job_content
    )
    gates.posted(tx, gate_id, comment_ref=f"c{gate_id}", decider=decider)
    return gate_id


async def run(
    accuracy: float, seed: int, *, notice: float, rules: Rules, project: Project, home: Path
) -> Tally:
    """Every decider's 200 gates on a fresh store; what the proxy did."""
    store = await Store.open(home / f"proxy-{accuracy}-{seed}-{rules.comparable}.db")
    bus = ConversationBus(store, EventBus(), extensions())  # the kinds the features ask
    org = load_organisation(shipped_org_dir())
    oracle = Oracle(accuracy, random.Random(f"model:{accuracy}:{seed}"))
    model = FunctionModel(oracle.reply)
    proxy = Proxy(store, bus, agent=org.proxy, models=lambda _: model, rules=rules)
    await proxy.use_seed(f"bench-{seed}")
    world = random.Random(f"world:{seed}")
    tally = Tally()
    started = time.perf_counter()
    for name, approves in DECIDERS:
        job = await bus.start_job(
            job_key=f"bench:{name}", project=project.name, title="bench", agent="om", brief="-"
        )
        for n in range(GATES):
            plan = plan_of(world)
            truth = "approve" if approves(plan) else "reject"
            intent = gates.AskIntent(f"{name}-{n}", plan.question(), ("approve", "reject"), "plan")

            gate_id = await store.write(
                lambda tx, i=intent, c=job.conversation_id, d=name: asked(tx, i, c, d)
            )
            oracle.truth[gate_id] = truth
            gate = await store.read(lambda tx, g=gate_id: gates.get(tx, g))
            decision = await proxy.consult(gate, project=project)
            said = oracle.said[gate_id]
            tally.gates += 1
            tally.proxy_right += said == truth
            tally.proxy_false_approvals += said == "approve" != truth
            if decision.alone:
                tally.alone += 1
                tally.alone_right += said == truth
                tally.false_approvals += said == "approve" != truth
                if said != truth and world.random() < notice:
                    await proxy.record_override(gate_id, truth, name)
            else:
                await bus.answer_gate(gate_id, text=truth, answered_by=name)
    tally.seconds = time.perf_counter() - started
    await store.close()
    return tally


async def measure(seeds: int, notice: float) -> dict[tuple[str, float], Tally]:
    org = load_organisation(shipped_org_dir())
    project = load_project("humans: {decider: dana}\n", org=org, source="bench", default_name="b")
    results: dict[tuple[str, float], Tally] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for comparable in ("confident", "all"):
            rules = Rules(comparable=comparable)  # type: ignore[arg-type]
            for accuracy in ACCURACIES:
                total = Tally()
                for seed in range(seeds):
                    total.add(
                        await run(
                            accuracy,
                            seed,
                            notice=notice,
                            rules=rules,
                            project=project,
                            home=Path(tmp),
                        )
                    )
                results[(comparable, accuracy)] = total
    return results


def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:5.1f}%" if whole else "   — "


def report(results: dict[tuple[str, float], Tally]) -> bool:
    print(
        f"{'rule':<28} {'accuracy':>8} {'alone':>7} {'right alone':>11} "
        f"{'false appr.':>11} {'gates':>6} {'ms/gate':>8}"
    )
    met = True
    for accuracy in ACCURACIES:
        t = results[("confident", accuracy)]
        rows = [
            ("always ask", 0, 0, 0),
            ("always proxy", t.gates, t.proxy_right, t.proxy_false_approvals),
            ("proxy (confident comparable)", t.alone, t.alone_right, t.false_approvals),
        ]
        every = results[("all", accuracy)]
        rows.append(
            ("proxy (every decision)", every.alone, every.alone_right, every.false_approvals)
        )
        for name, alone, right, false in rows:
            ms = 1000 * t.seconds / t.gates if name.startswith("proxy (c") else None
            print(
                f"{name:<28} {accuracy:>8.0%} {pct(alone, t.gates):>7} {pct(right, alone):>11} "
                f"{pct(false, t.gates):>11} {t.gates:>6} {'' if ms is None else f'{ms:8.2f}'}"
            )
        share, false_rate = t.alone / t.gates, t.false_approvals / t.gates
        if false_rate > GOAL_FALSE_APPROVALS:
            print(f"  goal missed: false approvals {false_rate:.1%} > {GOAL_FALSE_APPROVALS:.0%}")
            met = False
        if accuracy in GOAL_ALONE and share < GOAL_ALONE[accuracy]:
            print(f"  goal missed: alone {share:.1%} < {GOAL_ALONE[accuracy]:.0%}")
            met = False
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one seed instead of five")
    parser.add_argument("--seeds", type=int, help="runs per accuracy (default 5; 1 with --quick)")
    parser.add_argument(
        "--notice", type=float, default=0.5, help="share of wrong alone answers overridden"
    )
    args = parser.parse_args()
    seeds = args.seeds or (1 if args.quick else 5)
    print(
        f"{len(DECIDERS)} deciders x {GATES} plan gates, {seeds} seed(s); confidence from the "
        f"wrong range {SWAPPED:.0%} of the time; wrong alone answers overridden {args.notice:.0%}"
    )
    met = report(asyncio.run(measure(seeds, args.notice)))
    print("goal met" if met else "goal missed")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
