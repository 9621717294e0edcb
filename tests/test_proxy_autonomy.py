"""The proxy's autonomy rule, pure: the agreement formula, calibration, and each condition."""

from __future__ import annotations

import pytest

from orchestrator.proxy.autonomy import (
    Past,
    Rules,
    agrees,
    audited,
    band,
    band_name,
    calibrate,
    held_back,
    measured,
    option_of,
    score,
    standing,
    verdict,
)

SURE = 0.93  # a stated confidence in the 0.9–0.95 band


def agreeing(n: int, stated: float = SURE) -> list[Past]:
    return [Past(stated, True) for _ in range(n)]


@pytest.mark.parametrize(
    ("agreements", "disagreements", "expected"),
    [
        (0, 0, 1 / 2),
        (5, 0, 6 / 7),
        (4, 0, 5 / 6),
        (18, 2, 19 / 26),
        (19, 1, 20 / 24),
        (0, 3, 1 / 11),
    ],
)
def test_the_agreement_formula(agreements: int, disagreements: int, expected: float) -> None:
    assert score(agreements, disagreements) == pytest.approx(expected)


def test_five_agreements_clear_the_bar_and_four_do_not() -> None:
    assert score(5, 0) >= Rules().agreement > score(4, 0)


def test_one_disagreement_among_twenty_keeps_the_score_below_the_bar() -> None:
    assert score(19, 1) < Rules().agreement


@pytest.mark.parametrize(
    ("confidence", "name"),
    [(0.0, "0–0.5"), (0.49, "0–0.5"), (0.5, "0.5–0.6"), (0.8, "0.8–0.9"), (0.93, "0.9–0.95")],
)
def test_bands(confidence: float, name: str) -> None:
    assert band_name(band(confidence)) == name


def test_the_top_band_ends_at_one() -> None:
    assert band_name(band(1.0)) == "0.95–1"


def test_calibration_is_the_measured_accuracy_per_stated_band() -> None:
    history = [*agreeing(3, 0.93), Past(0.92, False), *agreeing(2, 0.55), Past(0.97, False)]
    calibration = calibrate(history)
    assert calibration == {
        band(0.93): pytest.approx((3 + 1) / (4 + 2)),
        band(0.55): pytest.approx((2 + 1) / (2 + 2)),
        band(0.97): pytest.approx(1 / 3),
    }
    assert measured(calibration, 0.91) == pytest.approx(4 / 6)
    assert measured(calibration, 0.75) == 0.5, "a band with no decisions is a coin toss"


def test_a_stated_confidence_is_not_taken_at_its_word() -> None:
    """The model says 0.97 every time and is right half the time: its measured confidence
    there is what counts, so it never answers alone however many decisions exist."""
    history = [Past(0.97, n % 2 == 0) for n in range(20)]
    now = standing(history)
    decided = verdict(now, stated=0.97, kind="plan", policy="when_unsure")
    assert decided.measured == pytest.approx(11 / 22)
    assert not decided.alone


def test_unsure_misses_count_for_calibration_but_not_against_agreement() -> None:
    history = [Past(0.6, False), *agreeing(5), Past(0.55, True), Past(0.62, False)]
    now = standing(history)
    assert (now.decisions, now.comparable, now.agreements, now.disagreements) == (8, 5, 5, 0)
    assert now.agreement == pytest.approx(6 / 7)
    every = standing(history, Rules(comparable="all"))
    assert (every.comparable, every.agreements, every.disagreements) == (8, 6, 2)


def test_the_window_is_the_last_twenty_comparable_decisions() -> None:
    now = standing([Past(SURE, False), *agreeing(20)])
    assert (now.agreements, now.disagreements) == (20, 0)
    assert standing([Past(SURE, False), *agreeing(19)]).disagreements == 1


def test_held_back_names_each_reason() -> None:
    assert held_back(standing(agreeing(4))) == "4 of 5 comparable decisions so far"
    assert held_back(standing(agreeing(5))) is None
    overridden = standing([*agreeing(30), Past(SURE, False, override=True), *agreeing(3)])
    assert overridden.since_override == 3
    assert held_back(overridden) == "overridden: 3 of 5 new agreements since"
    assert held_back(standing([*agreeing(6), Past(SURE, False), *agreeing(6)])) == (
        "agreement 0.76 < 0.85 over the last 13 comparable decisions"
    )
    assert held_back(standing(agreeing(6)), Rules(min_decisions=8)) == (
        "6 of 8 comparable decisions so far"
    )


def test_a_lower_n_does_not_get_round_the_agreement_bar() -> None:
    assert held_back(standing(agreeing(3)), Rules(min_decisions=3)) == (
        "agreement 0.80 < 0.85 over the last 3 comparable decisions"
    )


def test_after_an_override_its_own_disagreement_keeps_it_asking_for_a_window() -> None:
    """Five new agreements satisfy the override rule, but the override is a disagreement in
    the window, so (b) holds it back until the window has moved past it."""
    history = [*agreeing(30), Past(SURE, False, override=True), *agreeing(5)]
    now = standing(history)
    assert now.since_override == 5
    reason = held_back(now)
    assert reason is not None
    assert reason.startswith("agreement")
    assert held_back(standing([*history, *agreeing(15)])) is None


@pytest.mark.parametrize("kind", ["protected-path", "budget"])
def test_protected_kinds_are_never_answered_alone(kind: str) -> None:
    now = standing(agreeing(40))
    for auto in (False, True):
        decided = verdict(
            now, stated=SURE, kind=kind, policy="when_unsure", guarded=True, auto=auto
        )
        assert not decided.alone
        assert decided.why == f"never alone on {kind} gates"


def test_a_project_may_let_it_answer_a_protected_kind() -> None:
    now = standing(agreeing(10))
    decided = verdict(now, stated=SURE, kind="budget", policy="when_unsure", guarded=False)
    assert decided.alone


@pytest.mark.parametrize("policy", ["always", "never", None])
def test_only_when_unsure_lets_it_answer(policy: str | None) -> None:
    decided = verdict(standing(agreeing(10)), stated=SURE, kind="question", policy=policy)
    assert not decided.alone
    assert decided.why.startswith("the project's policy for question gates is")


def test_auto_waives_what_it_has_to_earn_but_not_the_policy() -> None:
    nothing = standing([])
    assert verdict(nothing, stated=0.2, kind="plan", policy="when_unsure", auto=True).alone
    assert not verdict(nothing, stated=0.2, kind="question", policy="always", auto=True).alone


def test_low_measured_confidence_on_this_gate_asks() -> None:
    now = standing([*agreeing(10), Past(0.65, False), Past(0.66, False)])
    decided = verdict(now, stated=0.65, kind="plan", policy="when_unsure")
    assert not decided.alone
    assert decided.why == "measured confidence 0.25 at 0.6–0.7 < 0.8"
    assert verdict(now, stated=SURE, kind="plan", policy="when_unsure").alone


def test_an_audited_gate_goes_to_the_decider() -> None:
    decided = verdict(
        standing(agreeing(10)), stated=SURE, kind="plan", policy="when_unsure", audited=True
    )
    assert not decided.alone
    assert "still go to the decider" in decided.why


def test_the_audit_sample_is_reproducible_and_about_a_tenth() -> None:
    picks = [audited("seed", f"gate:{n}") for n in range(4000)]
    assert picks == [audited("seed", f"gate:{n}") for n in range(4000)]
    assert 0.08 < sum(picks) / len(picks) < 0.12
    assert picks != [audited("other", f"gate:{n}") for n in range(4000)]
    assert not any(audited("seed", f"gate:{n}", share=0.0) for n in range(100))


def test_answers_compare_by_option_case_and_punctuation() -> None:
    options = ("yes", "no")
    assert agrees("yes", "Yes, go ahead.", options)
    assert agrees("yes", "  YES ", ())
    assert not agrees("yes", "no", options)
    assert not agrees("no", "not now", options), "'not' is not the option 'no'"
    assert agrees("use sqlite", "Use SQLite.", ())
    assert not agrees("use sqlite", "use postgres", ())
    assert option_of("Approve with changes", ("approve", "approve with changes")) == (
        "approve with changes"
    )
    assert option_of("maybe", options) is None
