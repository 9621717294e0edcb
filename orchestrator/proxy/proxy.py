"""The human proxy at work: consulted once per gate before it is asked, told of overrides.

`consult` makes the proxy's decision at a gate once: it settles what the decider answered
since it last looked, briefs the proxy's model on the artifact with the decider's history
(brief.py), and in one transaction records its prediction and, where the autonomy rule
(autonomy.py) lets it, answers the gate as the proxy. A model that fails or writes
something else than a prediction leaves the gate to the decider, with the reason recorded.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from orchestrator.bus import answers, gates
from orchestrator.bus.conversations import ConversationBus
from orchestrator.bus.events import GateAnswered
from orchestrator.config import AgentDef, Project
from orchestrator.core.clock import Clock
from orchestrator.core.errors import ModelError
from orchestrator.core.messages import Message, Usage
from orchestrator.core.model import Model, ModelRequest
from orchestrator.proxy import decisions, overrides
from orchestrator.proxy.autonomy import (
    DEFAULT_RULES,
    Rules,
    Standing,
    audited,
    standing,
    verdict,
)
from orchestrator.proxy.brief import Artifact, PastGate, Prediction, brief, parse
from orchestrator.proxy.decisions import Group, ProxyDecision
from orchestrator.proxy.overrides import Override
from orchestrator.store.sqlite import Store, Tx

log = logging.getLogger(__name__)


class Proxy:
    """The organisation's human proxy over one store."""

    def __init__(
        self,
        store: Store,
        bus: ConversationBus,
        *,
        agent: AgentDef,
        models: Callable[[AgentDef], Model],
        rules: Rules = DEFAULT_RULES,
        clock: Clock = time.time,
    ) -> None:
        self.store = store
        self.bus = bus
        self.agent = agent
        self.models = models
        self.rules = rules  # each project's N replaces rules.min_decisions
        self.clock = clock

    async def consult(
        self,
        gate: gates.Gate,
        *,
        project: Project,
        job_title: str = "",
        learnings: str | None = None,
        preferences: Sequence[str] = (),
        spent: str | None = None,
    ) -> ProxyDecision:
        """The proxy's decision at a gate: made once (one model call), then read back.

        `spent` says why the job may make no model call (its budget is spent, it is paused):
        no prediction then.
        """
        known = await self.store.read(lambda tx: decisions.get(tx, gate.gate_id))
        if known is not None:
            return known
        group, answers = await self.store.write(lambda tx: self._look(tx, gate, project))
        kind = self.bus.extensions.kinds.get(gate.kind)
        about = kind.about if kind is not None else "a gate"
        artifact = Artifact(gate.gate_id, gate.kind, gate.question, gate.options, job_title, about)
        if spent is not None:
            prediction, why, usage = None, f"no prediction: {spent}", Usage()
        else:
            context = (answers, learnings, tuple(preferences))
            prediction, why, usage = await self._predict(artifact, group.decider, *context)
        decided = await self.store.write(
            lambda tx: self._decide(
                tx, gate, group=group, project=project, prediction=prediction, why=why, usage=usage
            )
        )
        if decided.alone:
            self.bus.events.publish(
                GateAnswered(gate.gate_id, gate.conversation_id, self.agent.name, "proxy")
            )
            # what the answer set going (a plan's dispatches, say) is found in the store
            more = await self.bus.runnable(gate.job_id) if gate.job_id is not None else []
            self.bus.on_wake([gate.conversation_id, *more])
        return decided

    def _look(self, tx: Tx, gate: gates.Gate, project: Project) -> tuple[Group, list[PastGate]]:
        decisions.settle(tx)
        decider = gates.get(tx, gate.gate_id).decider or project.humans.decider
        group = Group(project.name, decider, gate.kind)
        return group, decisions.history(tx, group)[1]

    async def _predict(
        self,
        artifact: Artifact,
        decider: str,
        answers: list[PastGate],
        learnings: str | None,
        preferences: tuple[str, ...],
    ) -> tuple[Prediction | None, str, Usage]:
        text = brief(
            artifact, decider=decider, history=answers, learnings=learnings, preferences=preferences
        )
        message = Message(f"proxy:{artifact.gate_id}", 1, "engine", "user", {"text": text})
        request = ModelRequest(self.agent.name, self.agent.prompt.strip(), (message,), ())
        try:
            turn = await self.models(self.agent).complete(request)
        except ModelError as exc:
            log.warning("gate %d: the proxy's model failed: %s", artifact.gate_id, exc)
            return None, f"no prediction: the proxy's model failed ({exc})", Usage()
        prediction = None if turn.tool_calls else parse(turn.text, options=artifact.options)
        if prediction is None:
            return None, "no prediction: the proxy's reply was not in its shape", turn.usage
        return prediction, "", turn.usage

    def _decide(
        self,
        tx: Tx,
        gate: gates.Gate,
        *,
        group: Group,
        project: Project,
        prediction: Prediction | None,
        why: str,
        usage: Usage,
    ) -> ProxyDecision:
        """Judge the prediction on the history as it is now, record it, and answer the gate
        if the proxy may: one transaction."""
        decisions.settle(tx)
        rules = replace(self.rules, min_decisions=project.proxy.min_decisions)
        now = standing(decisions.history(tx, group)[0], rules)
        decision = ProxyDecision(
            gate_id=gate.gate_id,
            job_id=gate.job_id,
            project=group.project,
            decider=group.decider,
            kind=group.kind,
            answer=None,
            confidence=None,
            reasons="",
            measured=None,
            agreement=now.agreement,
            comparable=now.comparable,
            policy={str(k): mode for k, mode in project.gates.items()}.get(gate.kind, "unset"),
            alone=False,
            why=why,
        )
        if prediction is not None:
            decision = self._judge(
                tx,
                gate,
                decision=decision,
                prediction=prediction,
                now=now,
                rules=rules,
                project=project,
            )
        read = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        terms = decisions.Terms(
            guarded=self._guarded(gate.kind, project),
            min_decisions=rules.min_decisions,
            tokens=(read, usage.output_tokens),
        )
        return decisions.insert(tx, decision, terms, at=self.clock())

    def _guarded(self, kind: str, project: Project) -> bool:
        """Whether the proxy never answers `kind` alone in `project`: a kind it never answers
        alone (GateKind.proxy_never), or one it may not answer alone (GateKind.proxy_alone)
        that the project's `proxy.allow` does not list."""
        known = self.bus.extensions.kinds.get(kind)
        if known is not None and known.proxy_never:
            return True
        return (known is None or not known.proxy_alone) and kind not in project.proxy.allow

    def _judge(
        self,
        tx: Tx,
        gate: gates.Gate,
        *,
        decision: ProxyDecision,
        prediction: Prediction,
        now: Standing,
        rules: Rules,
        project: Project,
    ) -> ProxyDecision:
        """The decision with its prediction; the gate answered by the proxy if it may."""
        judged = verdict(
            now,
            stated=prediction.confidence,
            kind=gate.kind,
            policy=decision.policy,
            guarded=self._guarded(gate.kind, project),
            auto=decisions.auto(tx, gate.job_id),
            audited=audited(decisions.seed(tx), f"gate:{gate.gate_id}", rules.audit_share),
            rules=rules,
        )
        why, alone = judged.why, judged.alone
        latest = gates.get(tx, gate.gate_id)
        if alone and latest.answer is not None:
            why, alone = "the decider answered before the proxy was done", False
        elif alone and latest.closed_at is not None:
            why, alone = "the gate was closed (its job cancelled) before the proxy was done", False
        if alone:
            by = self.agent.name
            answers.answer(
                tx,
                gate.gate_id,
                text=prediction.answer,
                answered_by=by,
                via="proxy",
                extensions=self.bus.extensions,
            )
        return replace(
            decision,
            answer=prediction.answer,
            confidence=prediction.confidence,
            reasons=prediction.reasons,
            measured=judged.measured,
            alone=alone,
            why=why,
        )

    async def record_override(
        self, gate_id: int, answer: str, by: str, *, ref: str | None = None
    ) -> Override:
        """Record the decider's `/override` of the proxy's answer at a gate and send the
        asking conversation the correction (NotProxyAnsweredError if it did not answer it).

        `ref` names the override's source (a comment's id): seen again, it changes nothing.
        """
        done = await self.store.write(
            lambda tx: overrides.record(tx, gate_id, answer=answer, by=by, at=self.clock(), ref=ref)
        )
        if done.delivered_to is not None:
            self.bus.on_wake([done.delivered_to])
        return done

    async def set_auto(self, job_id: int, *, on: bool, by: str) -> None:
        """Let the proxy answer every eligible gate of a job (the edge's `teaparty-auto`)."""
        await self.store.write(
            lambda tx: decisions.set_auto(tx, job_id, on=on, by=by, at=self.clock())
        )

    async def use_seed(self, seed: str) -> None:
        """Set the seed of the audit sample (which eligible gates still go to the decider)."""
        await self.store.write(lambda tx: decisions.use_seed(tx, seed))

    async def decision(self, gate_id: int) -> ProxyDecision | None:
        """The proxy's decision at a gate, if it was consulted."""
        return await self.store.read(lambda tx: decisions.get(tx, gate_id))

    async def unannounced(self, job_id: int) -> list[tuple[gates.Gate, ProxyDecision]]:
        """The job's alone answers the forge has not said yet (a crash came between)."""

        def read(tx: Tx) -> list[tuple[gates.Gate, ProxyDecision]]:
            return [(gates.get(tx, d.gate_id), d) for d in decisions.unannounced(tx, job_id)]

        return await self.store.read(read)

    async def announced(self, gate_id: int) -> None:
        """The forge said the proxy's answer at the gate."""
        await self.store.write(lambda tx: decisions.announced(tx, gate_id, at=self.clock()))

    async def alone_answers(self, job_id: int) -> list[ProxyDecision]:
        """The job's gates the proxy answered alone, oldest first."""
        return await self.store.read(lambda tx: decisions.alone_answers(tx, job_id))
