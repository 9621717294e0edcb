"""When the proxy may answer a gate alone, and how it measures itself: pure, no I/O.

Issue 14's rule, with its numbers as `Rules`' defaults. The proxy answers alone only when
(e) the proxy may answer the kind alone (GateKind.proxy_alone, else the project lists it), (d) the
project's policy for the kind is `when_unsure`, and, unless the job is `auto`:
(a) at least `min_decisions` comparable decisions exist, (b) its agreement over the last
`window` of them, (agreements + 1) / (agreements + 3 × disagreements + 2), is at least
`agreement`, (c) its measured accuracy at the stated confidence's band is at least
`confidence`, it has had `min_decisions` new agreements since the decider's last override,
and the gate is not one of the reproducible `audit_share` that still go to the decider.

A *decision* is a gate the proxy predicted whose decider's answer is known: a person
answered it, or overrode the proxy's answer. Decisions are *comparable* when they share the
project, decider and kind, and (by default) their stated confidence falls in a band whose
measured accuracy reaches `confidence`: the predictions the proxy stood behind. An unsure
suggestion that missed says the proxy was unsure, which calibration records; it does not
count against its agreement. `comparable="all"` counts every decision instead (bench/proxy.py
measures both).
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

BAND_EDGES = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)  # band i holds [edge i-1, edge i)
_PUNCTUATION = " \t\n.!,;:'\"`*_"


@dataclass(frozen=True)
class Rules:
    """The thresholds of the autonomy rule (issue 14's numbers)."""

    min_decisions: int = 5
    window: int = 20
    agreement: float = 0.85
    confidence: float = 0.8
    audit_share: float = 0.1
    comparable: Literal["confident", "all"] = "confident"


DEFAULT_RULES = Rules()


@dataclass(frozen=True)
class Past:
    """One decision: the confidence the proxy stated, and whether the decider agreed.

    `override` marks a decider's override of an answer the proxy gave alone.
    """

    stated: float
    agreed: bool
    override: bool = False


@dataclass(frozen=True)
class Standing:
    """Where the proxy stands with one decider on one kind of gate."""

    decisions: int
    comparable: int
    agreements: int  # in the window of the last `window` comparable decisions
    disagreements: int
    agreement: float
    since_override: int | None  # comparable agreements since the last override, if any
    calibration: Mapping[int, float]  # measured accuracy per band that has decisions


@dataclass(frozen=True)
class Verdict:
    """Whether the proxy answers a gate alone; `why` says why, or why not."""

    alone: bool
    why: str
    measured: float | None


def score(agreements: int, disagreements: int) -> float:
    """The measured agreement: (agreements + 1) / (agreements + 3 × disagreements + 2)."""
    return (agreements + 1) / (agreements + 3 * disagreements + 2)


def band(confidence: float) -> int:
    """The band a stated confidence falls in (0: below 0.5; the last: 0.95 and above)."""
    return bisect.bisect_right(BAND_EDGES, confidence)


def band_name(index: int) -> str:
    """A band as a range, e.g. `0.9–0.95`."""
    low = 0.0 if index == 0 else BAND_EDGES[index - 1]
    high = 1.0 if index == len(BAND_EDGES) else BAND_EDGES[index]
    return f"{low:g}–{high:g}"


def calibrate(history: Sequence[Past]) -> dict[int, float]:
    """Measured accuracy per band: (agreements + 1) / (decisions + 2) of those stated in it."""
    counts: dict[int, list[int]] = {}
    for past in history:
        hits = counts.setdefault(band(past.stated), [0, 0])
        hits[0] += past.agreed
        hits[1] += 1
    return {b: (agreed + 1) / (n + 2) for b, (agreed, n) in counts.items()}


def measured(calibration: Mapping[int, float], stated: float) -> float:
    """The accuracy measured at the stated confidence's band (1/2 where nothing is known)."""
    return calibration.get(band(stated), 0.5)


def standing(history: Sequence[Past], rules: Rules = DEFAULT_RULES) -> Standing:
    """The proxy's standing from its decisions with one decider on one kind, oldest first."""
    calibration = calibrate(history)
    counted = [
        (at, past)
        for at, past in enumerate(history)
        if rules.comparable == "all" or measured(calibration, past.stated) >= rules.confidence
    ]
    window = [past for _, past in counted[-rules.window :]]
    agreements = sum(past.agreed for past in window)
    disagreements = len(window) - agreements
    overrides = [at for at, past in enumerate(history) if past.override]
    since = None
    if overrides:
        since = sum(past.agreed for at, past in counted if at > overrides[-1])
    return Standing(
        len(history),
        len(counted),
        agreements,
        disagreements,
        score(agreements, disagreements),
        since,
        calibration,
    )


def held_back(standing: Standing, rules: Rules = DEFAULT_RULES) -> str | None:
    """Why the proxy has not earned autonomy with this decider and kind (a, b, override)."""
    if standing.comparable < rules.min_decisions:
        return f"{standing.comparable} of {rules.min_decisions} comparable decisions so far"
    if standing.since_override is not None and standing.since_override < rules.min_decisions:
        return (
            f"overridden: {standing.since_override} of {rules.min_decisions} new agreements since"
        )
    if standing.agreement < rules.agreement:
        return (
            f"agreement {standing.agreement:.2f} < {rules.agreement:g} over the last "
            f"{standing.agreements + standing.disagreements} comparable decisions"
        )
    return None


def verdict(
    standing: Standing,
    *,
    stated: float,
    kind: str,
    policy: str | None,
    guarded: bool = False,
    auto: bool = False,
    audited: bool = False,
    rules: Rules = DEFAULT_RULES,
) -> Verdict:
    """Whether a prediction stated at `stated` answers this gate alone (policy: the
    project's mode for the kind; guarded: the proxy never answers this kind alone in the
    project, GateKind.proxy_alone and `proxy.allow`)."""
    sure = measured(standing.calibration, stated)
    if guarded:
        return Verdict(False, f"never alone on {kind} gates", sure)
    if policy != "when_unsure":
        return Verdict(False, f"the project's policy for {kind} gates is {policy or 'unset'}", sure)
    if auto:
        return Verdict(True, "the job lets the proxy answer every eligible gate", sure)
    reason = held_back(standing, rules)
    if reason is not None:
        return Verdict(False, reason, sure)
    if sure < rules.confidence:
        where = band_name(band(stated))
        return Verdict(
            False, f"measured confidence {sure:.2f} at {where} < {rules.confidence}", sure
        )
    if audited:
        return Verdict(False, "one of the eligible gates that still go to the decider", sure)
    return Verdict(True, "its measured agreement and confidence clear the thresholds", sure)


def audited(seed: str, identity: str, share: float = Rules.audit_share) -> bool:
    """Whether this gate is one of the reproducible `share` that go to the decider anyway."""
    digest = hashlib.sha256(f"{seed}\x00{identity}".encode()).digest()
    return int.from_bytes(digest[:8], "big") < share * 2**64


def normal(text: str) -> str:
    """An answer as compared: case, spacing and surrounding punctuation ignored."""
    return re.sub(r"\s+", " ", text.casefold()).strip(_PUNCTUATION)


def option_of(text: str, options: Sequence[str]) -> str | None:
    """The option an answer gives (`Yes, go ahead` gives `yes`), or None."""
    said = normal(text)
    for option in sorted(options, key=len, reverse=True):
        name = normal(option)
        if name and (said == name or re.match(rf"{re.escape(name)}(?!\w)", said)):
            return option
    return None


def agrees(predicted: str, actual: str, options: Sequence[str] = ()) -> bool:
    """Whether the decider's answer is the one predicted (the same option, or the same text)."""
    if options:
        chosen = option_of(actual, options)
        if chosen is not None:
            return chosen == option_of(predicted, options)
    return normal(predicted) == normal(actual)
