"""Benchmark of what a job costs: the hierarchy against one flat agent, billed as the API bills.

    python bench/cost.py [--quick] [--sizes 5,20,50] [--model M] [--min-cache N] [--no-search]
                          [--review full|spec-only|none]

(a) The hierarchy: the real engine (office manager -> project lead -> a mini-team of worker,
spec reviewer and quality reviewer per task, then the phase reviewer) runs the scripted job
of bench/cost_job.py on a real repository with real task worktrees in a temporary
directory. (b) The flat agent: one conversation, with the worker's system prompt and tools,
that is given the same job brief, then for each task in turn the task's brief (the
worker's, without the paragraphs about its mini-team), the same tool results (file reads,
edits, test output), the same review feedback and the reviewers' verdicts, and makes the
workers' turns with their replies: its context grows with every task.

Both are billed by the same function model (BilledModel). A request is the Messages API
body the engine's Anthropic adapter would send (orchestrator.models.anthropic
request_params): tool definitions, system, messages, in that order, with its cache
breakpoints (the last tool, the system, the last message block). Tokens are characters / 4,
rounded up, per block: a tool's JSON definition, a text, a tool call's name and JSON input,
a tool result's text. Output is the reply's text and tool calls counted the same way.
Prompt caching as the API does it (PromptCache): an entry is the exact prefix up to a
breakpoint, kept only when it is at least --min-cache tokens (1,024 for Sonnet 4.x); a
request reads the longest stored prefix found at a breakpoint or up to 20 blocks before it,
is billed for that as cache reads (0.1x input), for the rest up to its last breakpoint as
cache writes (1.25x, the 5-minute price), and for anything after as input. One cache per
side, shared by all of that side's agents (one organisation's key); entries never expire
(the model answers at once), and concurrent requests see each other's entries.

Prices: config/models.yaml for --model (default the organisation's default model), the
same for both sides; the engine's own price of the job (each agent at its configured
model, with the same tokens) is printed beside it. Printed per task count: tokens (input,
cache read, cache write, output) and dollars of both, hierarchy/flat, and the crossover:
the smallest task count at which the hierarchy is cheaper, searched by running jobs
between the measured sizes (interpolated with --no-search or --quick). Goals (issue 31,
reviews included): hierarchy/flat <= 1.3 at 1 task, <= 1.15 at 2-5, <= 0.9 at 20 and
<= 0.45 at 50; the exit code is 1 when the goal at 20 or 50, or the one on calls in series,
is missed. Also printed: a one-task job's model calls in series (each call made to take
0.25 s; calls that overlap ran side by side), and each role at the model the organisation
gives it (a prompt cache per model, at that model's minimum) beside all at --model.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sqlite3
import sys
import tempfile
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import accumulate
from pathlib import Path
from typing import Any

from cost_job import FLAWED_EVERY, TASK, Log, Script, job_brief, make_repo, run_job, user

from orchestrator.config import load_organisation, shipped_org_dir
from orchestrator.config.prices import ModelPrice, shipped_prices
from orchestrator.core.messages import AssistantTurn, Message, Usage, assistant_content
from orchestrator.core.model import ModelRequest
from orchestrator.jobs.flat_lead import WHOLE_JOB
from orchestrator.jobs.views import JobViews
from orchestrator.models.anthropic import request_params
from orchestrator.models.scripted import FunctionModel

CHARS_PER_TOKEN = 4
LOOKBACK = 20  # block boundaries before a breakpoint the API checks for a stored prefix
MIN_CACHE = 1024  # tokens: the smallest cacheable prefix of Sonnet 4.x
# hierarchy/flat at 1,024 (issue 31); CI fails on a miss of ENFORCED ones only, the others
# being goals the engine does not meet yet (a one-task job still pays its project lead).
GOALS = {1: 1.3, 2: 1.15, 3: 1.15, 5: 1.15, 20: 0.9, 50: 0.45}
ENFORCED = frozenset({20, 50})
SLOW = 0.25  # seconds a model call takes where calls in series are counted
SERIES_OVER_FLAT = 4  # goal (issue 31): a one-task job's calls in series <= the flat agent's + 4


def tokens(chars: int) -> int:
    """Characters / 4, rounded up."""
    return -(-chars // CHARS_PER_TOKEN)


# --- billing -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    """One block of a request as the prefix cache sees it."""

    key: str  # what makes it this block: its kind and whole content
    tokens: int
    breakpoint: bool


def _block(kind: str, body: dict[str, Any]) -> Block:
    plain = {k: v for k, v in body.items() if k != "cache_control"}
    if kind == "tool":
        billed = json.dumps(plain, ensure_ascii=False)
    elif plain["type"] == "tool_use":
        billed = plain["name"] + json.dumps(plain["input"], ensure_ascii=False)
    else:
        billed = str(plain.get("content", plain.get("text")))  # a tool result, or a text
    key = kind + json.dumps(plain, sort_keys=True)
    return Block(key, tokens(len(billed)), "cache_control" in body)


def blocks_of(request: ModelRequest) -> list[Block]:
    """The request's blocks in the API's prefix order: tools, system, messages."""
    params = request_params(request)
    found = [_block("tool", tool) for tool in params.get("tools", ())]
    found += [_block("system", part) for part in params.get("system", ())]
    for message in params["messages"]:
        found += [_block(message["role"], part) for part in message["content"]]
    return found


def output_tokens(reply: AssistantTurn) -> int:
    """The reply's text and tool calls, characters / 4."""
    calls = sum(
        len(c.name + json.dumps(dict(c.args), ensure_ascii=False)) for c in reply.tool_calls
    )
    return tokens(len(reply.text) + calls)


@dataclass
class PromptCache:
    """Prefixes stored by earlier requests, and what a request is billed for against them."""

    minimum: int = MIN_CACHE
    lookback: int = LOOKBACK
    entries: set[str] = field(default_factory=set)

    def bill(self, blocks: Sequence[Block]) -> Usage:
        """Input, cache read and cache write tokens of one request; stores its prefixes."""
        ends = list(accumulate(b.tokens for b in blocks))
        prefixes = list(_prefix_hashes(blocks))
        marks = [i for i, b in enumerate(blocks) if b.breakpoint]
        read_to = -1  # the last block read from the cache
        for mark in marks:
            for k in range(mark, max(mark - self.lookback, 0) - 1, -1):
                if prefixes[k] in self.entries:
                    read_to = max(read_to, k)
                    break
        read = ends[read_to] if read_to >= 0 else 0
        stored = [m for m in marks if m > read_to and ends[m] >= self.minimum]
        self.entries.update(prefixes[m] for m in stored)
        write = ends[stored[-1]] - read if stored else 0
        total = ends[-1] if ends else 0
        return Usage(total - read - write, 0, read, write)


def _prefix_hashes(blocks: Sequence[Block]) -> Iterator[str]:
    running = hashlib.sha256()
    for block in blocks:
        running.update(hashlib.sha256(block.key.encode()).digest())
        yield running.copy().hexdigest()


@dataclass
class BilledModel:
    """A FunctionModel whose every reply carries the usage the API would have billed."""

    reply: Callable[[ModelRequest], AssistantTurn]
    cache: PromptCache
    billed: list[Usage] = field(default_factory=list)
    agents: list[str] = field(default_factory=list)  # who made each call billed
    delay: float = 0.0  # seconds each call takes, to see which calls overlap
    spans: list[tuple[float, float]] = field(default_factory=list)
    route: Callable[[str], PromptCache] | None = None  # the cache of an agent's model

    def __post_init__(self) -> None:
        self.inner = FunctionModel(self.reply)

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        """The function's reply, with its usage."""
        started = time.monotonic()
        if self.delay:
            await asyncio.sleep(self.delay)
        answer = await self.inner.complete(request)
        cache = self.cache if self.route is None else self.route(request.agent)
        usage = cache.bill(blocks_of(request)) + Usage(output_tokens=output_tokens(answer))
        self.billed.append(usage)
        self.agents.append(request.agent)
        self.spans.append((started, time.monotonic()))
        return replace(answer, usage=usage)


ORG = load_organisation(shipped_org_dir())


def model_of(agent: str) -> str:
    """The model the organisation gives the agent at `agent` (an address)."""
    found = ORG.agents.get(agent.rsplit("/", 1)[-1])
    return (found.model if found is not None else None) or ORG.defaults.model


@dataclass
class PerModel:
    """The prompt caches of an organisation's models: a request reads only what requests to
    the same model stored, and each keeps only prefixes of its model's minimum length."""

    caches: dict[str, PromptCache] = field(default_factory=dict)

    def __call__(self, agent: str) -> PromptCache:
        model = model_of(agent)
        if model not in self.caches:
            self.caches[model] = PromptCache(shipped_prices().price(model).min_cache)
        return self.caches[model]


def in_series(spans: Sequence[tuple[float, float]]) -> int:
    """The longest chain of calls each started after the one before it ended: the model
    calls a job waits for one after another (calls that overlap ran side by side)."""
    ordered = sorted(spans, key=lambda span: span[1])
    longest: list[int] = []
    for start, _ in ordered:
        before = [n for (_, end), n in zip(ordered, longest, strict=False) if end <= start]
        longest.append(1 + max(before, default=0))
    return max(longest, default=0)


# --- the two sides -------------------------------------------------------------------------


@dataclass(frozen=True)
class Bill:
    """What one side was billed: tokens, dollars at the bench's model, model calls."""

    usage: Usage
    usd: float
    calls: int


def bill(usages: Sequence[Usage], price: ModelPrice) -> Bill:
    total = sum(usages, Usage())
    return Bill(total, price.cost_usd(total), len(usages))


def role_of(agent: str) -> str:
    short = agent.rsplit("/", 1)[-1]
    return short.removesuffix("-reviewer") + (" review" if short.endswith("-reviewer") else "")


def task_brief(brief: Message) -> str:
    """The worker's brief without what only a mini-team needs (its worktree, its review):
    the task all its members share, and what the lead added; nothing for a task that is
    the whole job (jobs/flat_lead.py), whose brief the flat agent was given already."""
    if WHOLE_JOB in brief.text:
        return ""
    lead = [p for p in brief.text.split("\n\n") if p.startswith("From your lead")]
    return "\n\n".join([str(brief.content.get("shared", "")), *lead])


WORKER = "implementer"
WORKER_TOOLS = frozenset(load_organisation(shipped_org_dir()).agents[WORKER].tools)


def alone(system: str, member: str) -> str:
    """A mini-team's system prompt as `member` alone would have it (roster.team_prompt):
    its own rules and what the project gives every agent."""
    sections = system.split("\n\n## ")[1:]
    kept = [s for s in sections if "'s rules (tools:" not in s.split("\n", 1)[0]]
    own = [s for s in sections if s.startswith(f"The {member}'s rules")]
    return "\n\n".join([own[0].split("\n", 1)[1], *("## " + s for s in kept)])


def flat_requests(log: Log) -> Iterator[tuple[ModelRequest, AssistantTurn]]:
    """The flat agent's calls: the workers' turns, each over everything given before it.

    It starts from the job brief; then per task in order the task's brief, the worker's
    calls and their results, the review feedback, and, after its last reply, each
    reviewer's last verdict. Its system prompt and tools are the worker's own: the
    mini-team's shared prompt without its opening and the reviewers' rules, and only the
    tools the worker may call.
    """
    workers: dict[int, list[tuple[ModelRequest, AssistantTurn]]] = {}
    verdicts: dict[int, dict[str, str]] = {}  # the last verdict of each reviewer
    for request, answer in log:
        role, first = role_of(request.agent), request.messages[0].text
        if role == "implementer" and (found := TASK.search(first)):
            workers.setdefault(int(found.group(1)), []).append((request, answer))
        elif role in ("spec review", "quality review") and not answer.tool_calls:
            task = int(first.split("#", 1)[1].split(" ", 1)[0])  # "Review task #N (round..."
            verdicts.setdefault(task, {})[role] = f"{role} of task #{task}: {answer.text}"
    first_call = workers[1][0][0]
    system, tools = alone(first_call.system, WORKER), first_call.tools
    tools = tuple(t for t in tools if t.name in WORKER_TOOLS)
    given: list[Message] = [user(job_brief(len(workers)))]
    for task in sorted(workers):
        for request, answer in workers[task]:
            brief, *rest = request.messages
            told = task_brief(brief)
            seen = (*given, *([user(told)] if told else []), *rest)
            yield ModelRequest("flat", system, seen, tools), answer
        reply = Message("flat", 0, "flat", "assistant", assistant_content(answer))
        given += [*seen[len(given) :], reply]
        given += [user(text) for _, text in sorted(verdicts.get(task, {}).items())]


@dataclass(frozen=True)
class Measured:
    """One task count: both sides' bills, the hierarchy's by role, the engine's own price."""

    tasks: int
    hierarchy: Bill
    flat: Bill
    roles: dict[str, Bill]
    engine_usd: float | None
    flat_context: int  # tokens of the flat agent's last request
    seconds: float
    log: Log = field(default_factory=list, repr=False)  # the hierarchy's calls and replies
    checks: int = 0  # the project's checks the engine ran, and their seconds
    check_seconds: float = 0.0
    series: int = 0  # the hierarchy's model calls in series (with a delay: see in_series)

    @property
    def ratio(self) -> float:
        return self.hierarchy.usd / self.flat.usd


async def measure(
    tasks: int,
    tmp: Path,
    *,
    price: ModelPrice,
    min_cache: int,
    checks: bool = True,
    delay: float = 0.0,
    configured: bool = False,
    review: str = "full",
) -> Measured:
    """Run the job of `tasks` tasks through the engine, replay it flat, bill both. With
    `checks` the engine runs the project's tests (the quality reviewer reads the result),
    without, the quality reviewer runs them. With `delay`, each model call takes that long,
    so that the calls in series can be counted. With `configured`, each agent's calls are
    billed at the model the organisation gives it (PerModel), the roles priced so."""
    started = time.perf_counter()
    script = Script(tasks, review=review)
    route = PerModel() if configured else None
    model = BilledModel(script.reply, PromptCache(min_cache), delay=delay, route=route)
    name = f"{tasks}{'' if checks else '-unchecked'}{'-slow' if delay else ''}"
    name += ("-configured" if configured else "") + ("" if review == "full" else f"-{review}")
    home = tmp / f"home-{name}"
    repo = make_repo(tmp / f"repo-{name}", tasks)
    job_id = await run_job(home, repo, tasks=tasks, model=model, checks=checks)
    ran = engine_checks(home)
    stored: dict[str, Usage] = {}
    async with JobViews.open(home, org_dir=shipped_org_dir()) as views:
        for entry in await views.log(job_id):
            # The mini-team's coordinator and the office manager's flat turns are the
            # engine's code (jobs/flat_manager.py): they record no tokens.
            used = entry.message.usage
            if used is not None and not entry.agent.endswith("/mini-team"):
                role = role_of(entry.agent)
                stored[role] = stored.get(role, Usage()) + used
        engine_usd = (await views.job(job_id)).summary.cost_usd
    by_role: dict[str, list[Usage]] = {}
    for agent, used in zip(model.agents, model.billed, strict=True):
        by_role.setdefault(role_of(agent), []).append(used)
    # The engine recorded every token the model billed, agent by agent (a lead's triage is
    # recorded with the turn it decided: jobs/flat_lead.py).
    billed = {role: sum(used, Usage()) for role, used in by_role.items()}
    assert {r: u for r, u in stored.items() if u != Usage()} == billed, "usage lost"
    calls = list(flat_requests(script.log))
    answers = deque(answer for _, answer in calls)
    flat = BilledModel(lambda _: answers.popleft(), PromptCache(min_cache))
    for request, _ in calls:
        await flat.complete(request)
    return Measured(
        tasks,
        bill(model.billed, price),
        bill(flat.billed, price),
        {role: bill(used, role_price(role, price, configured)) for role, used in by_role.items()},
        engine_usd,
        sum(b.tokens for b in blocks_of(calls[-1][0])),
        time.perf_counter() - started,
        script.log,
        *ran,
        in_series(model.spans),
    )


def role_price(role: str, price: ModelPrice, configured: bool) -> ModelPrice:
    """The price a role is billed at: the bench's model's, or the one it is configured with."""
    if not configured:
        return price
    agent = role.replace(" review", "-reviewer") if role.endswith(" review") else role
    return shipped_prices().price(model_of(agent))


def engine_checks(home: Path) -> tuple[int, float]:
    """How many checks the engine ran for the job, and their seconds in all."""
    with sqlite3.connect(home / "teaparty.db") as db:
        records = [json.loads(r) for (r,) in db.execute("SELECT record FROM checks")]
    return len(records), sum(run["seconds"] for r in records for run in r["runs"])


# --- the crossover -------------------------------------------------------------------------


async def crossover(
    found: dict[int, Measured], run: Callable[[int], Awaitable[Measured]], *, search: bool
) -> str:
    """Where the hierarchy becomes cheaper: searched by running more sizes, or interpolated."""
    sizes = sorted(found)
    cheaper = [n for n in sizes if found[n].ratio < 1]
    if not cheaper:
        return f"not reached up to {sizes[-1]} tasks{extrapolated(found)}"
    hi = cheaper[0]
    lo = max((n for n in sizes if n < hi), default=0)
    if not search:
        if lo == 0:
            return f"at most {hi} tasks (the smallest size measured; search to find it)"
        r_lo, r_hi = found[lo].ratio, found[hi].ratio
        at = lo + (r_lo - 1) * (hi - lo) / (r_lo - r_hi)
        return f"about {at:.1f} tasks (interpolated between {lo}: {r_lo:.2f} and {hi}: {r_hi:.2f})"
    while hi - lo > 1:
        mid = (lo + hi) // 2
        found[mid] = await run(mid)
        lo, hi = (lo, mid) if found[mid].ratio < 1 else (mid, hi)
    below = f"{lo}: {found[lo].ratio:.2f}, " if lo else ""
    return f"{hi} tasks (searched; hierarchy/flat at {below}{hi}: {found[hi].ratio:.2f})"


def extrapolated(found: dict[int, Measured]) -> str:
    """Where the ratio of the two largest sizes, extended as a line, reaches 1."""
    if len(found) < 2:
        return ""
    (a, ra), (b, rb) = ((n, found[n].ratio) for n in sorted(found)[-2:])
    return f"; about {a + (ra - 1) * (b - a) / (ra - rb):.0f} extrapolated" if rb < ra else ""


# --- report --------------------------------------------------------------------------------


HEADER = (
    f"{'tasks':>5}  {'side':<15}{'calls':>6}{'input':>9}{'cache read':>12}{'cache write':>12}"
    f"{'output':>9}{'$':>9}{'h/f':>7}"
)


def row(tasks: str, side: str, spent: Bill, ratio: str = "") -> None:
    u = spent.usage
    print(
        f"{tasks:>5}  {side:<15}{spent.calls:>6}{u.input_tokens:>9,}{u.cache_read_tokens:>12,}"
        f"{u.cache_write_tokens:>12,}{u.output_tokens:>9,}{spent.usd:>9.3f}{ratio:>7}"
    )


def report(found: dict[int, Measured]) -> None:
    """Both sides per task count, then the hierarchy by role at the largest count."""
    print(HEADER)
    for tasks in sorted(found):
        m = found[tasks]
        row(str(tasks), "hierarchy", m.hierarchy, f"{m.ratio:.2f}")
        row("", "flat", m.flat)
        engine = "not priced" if m.engine_usd is None else f"${m.engine_usd:.3f}"
        print(
            f"{'':>7}(hierarchy at each agent's configured model: {engine}; flat agent's last"
            f" request {m.flat_context:,} tokens; {m.seconds:.1f} s)"
        )
    largest = found[max(found)]
    print(f"\nhierarchy by role at {largest.tasks} tasks:")
    for role, spent in sorted(largest.roles.items(), key=lambda kv: -kv[1].usd):
        row("", role, spent, f"{spent.usd / largest.hierarchy.usd:.0%}")


def checks_report(checked: Measured, unchecked: Measured) -> None:
    """What the engine's own test runs add (time) and save (the quality reviewer's runs)."""
    quality = [checked.roles.get("quality review"), unchecked.roles.get("quality review")]
    print(
        f"\nengine-run checks at {checked.tasks} tasks: {checked.checks} runs of the project's "
        f"tests, {checked.check_seconds:.1f} s of checks (the job took {checked.seconds:.1f} s, "
        f"{unchecked.seconds:.1f} s without them); 0 model tokens"
    )
    row("", "with checks", checked.hierarchy)
    row("", "without", unchecked.hierarchy)
    if quality[0] is not None and quality[1] is not None:
        row("", "qual. w/ checks", quality[0], f"{quality[0].usd / quality[1].usd:.2f}")
        row("", "qual. without", quality[1])
    saved = unchecked.hierarchy.usd - checked.hierarchy.usd
    ratio = checked.hierarchy.usd / unchecked.hierarchy.usd
    print(f"{'':>7}hierarchy with checks / without: {ratio:.3f} (${saved:.3f} saved)")


def models_report(same: Measured, configured: Measured, model: str) -> None:
    """Whether each role's own model earns it: the role at the model the organisation gives
    it (a cache of that model's own, at its minimum) beside the role at the bench's model."""
    print(
        f"\neach role at its configured model, {same.tasks} tasks (own cache per model, "
        f"each model's minimum), beside all at {model}:"
    )
    for role, spent in sorted(configured.roles.items(), key=lambda kv: -kv[1].usd):
        at_one = same.roles.get(role)
        agent = role.replace(" review", "-reviewer") if role.endswith(" review") else role
        ratio = f"{spent.usd / at_one.usd:.2f}" if at_one is not None and at_one.usd else ""
        row("", f"{role}"[:15], spent, ratio)
        print(f"{'':>9}{model_of(agent)}; at {model}: ${at_one.usd if at_one else 0:.3f}")
    total = sum(spent.usd for spent in configured.roles.values())
    print(
        f"{'':>7}hierarchy at configured models ${total:.3f} / all at {model} "
        f"${same.hierarchy.usd:.3f}: {total / same.hierarchy.usd:.2f}"
    )


def verdicts(found: dict[int, Measured]) -> bool:
    """Each goal at the sizes measured; False when an enforced one is missed."""
    met = True
    for tasks, goal in GOALS.items():
        if tasks not in found:
            continue
        ratio = found[tasks].ratio
        said = "met" if ratio <= goal else "NOT met"
        if tasks in ENFORCED:
            met &= ratio <= goal
        else:
            said += " (not enforced yet)"
        print(f"goal at {tasks} tasks (hierarchy/flat <= {goal} at 1,024): {said}, {ratio:.2f}")
    return met


async def main(options: argparse.Namespace) -> bool:
    price = shipped_prices().price(options.model)
    if options.min_cache is None:  # the model's own (config/models.yaml)
        options.min_cache = price.min_cache
    print(
        f"one job of T tasks (review {options.review} as the lead plans them, a job of one change "
        f"full; every {FLAWED_EVERY}th task's first version misses its spec), "
        f"billed at {options.model}\n(per M tokens: input ${price.input}, cache read "
        f"${price.cache_read}, cache write ${price.cache_write}, output ${price.output}); "
        f"smallest cacheable prefix {options.min_cache:,} tokens; tokens = characters / 4\n"
    )
    with tempfile.TemporaryDirectory(prefix="teaparty-cost-") as name:
        tmp = Path(name)

        async def run(tasks: int) -> Measured:
            return await measure(
                tasks, tmp, price=price, min_cache=options.min_cache, review=options.review
            )

        found = {tasks: await run(tasks) for tasks in options.sizes}
        where = await crossover(found, run, search=options.search)
        smallest = min(options.sizes)
        unchecked = await measure(
            smallest, tmp, price=price, min_cache=options.min_cache, checks=False
        )
        slow = await measure(1, tmp, price=price, min_cache=options.min_cache, delay=SLOW)
        configured = await measure(
            smallest, tmp, price=price, min_cache=options.min_cache, configured=True
        )
    report(found)
    checks_report(found[smallest], unchecked)
    models_report(found[smallest], configured, options.model)
    print(f"\ncrossover (smallest task count where the hierarchy is cheaper): {where}")
    return verdicts(found) & series_verdict(slow)


def series_verdict(slow: Measured) -> bool:
    """Latency: the model calls a one-task job waits for in turn, from label to pull
    request, beside the flat agent's (each of its calls waits for the one before)."""
    goal = slow.flat.calls + SERIES_OVER_FLAT
    met = slow.series <= goal
    print(
        f"model calls in series, one task (each call {SLOW:g} s): hierarchy {slow.series} "
        f"of {slow.hierarchy.calls}, flat {slow.flat.calls}; goal <= flat + "
        f"{SERIES_OVER_FLAT}: {'met' if met else 'NOT met'}"
    )
    return met


def sizes(text: str) -> list[int]:
    return sorted({int(n) for n in text.split(",")})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="sizes 5,20, crossover interpolated")
    parser.add_argument("--sizes", type=sizes, default=[5, 20, 50], help="e.g. 5,20,50")
    parser.add_argument("--model", default=load_organisation(shipped_org_dir()).defaults.model)
    parser.add_argument(
        "--min-cache", type=int, default=None, help="tokens (default: the model's, models.yaml)"
    )
    parser.add_argument("--no-search", dest="search", action="store_false")
    parser.add_argument(
        "--review",
        choices=("full", "spec-only", "none"),
        default="full",
        help="the review level the scripted lead gives every task it plans",
    )
    options = parser.parse_args()
    if options.quick:
        options.sizes, options.search = [5, 20], False
    sys.exit(0 if asyncio.run(main(options)) else 1)
