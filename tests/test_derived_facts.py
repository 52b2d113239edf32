"""Facts derived from others (``derived_from``): a conjunction the engine settles itself."""

from __future__ import annotations

from ddpadvisor.engine.diagnose import Engine
from ddpadvisor.kb.check import check_interview
from ddpadvisor.kb.schema import Condition, Fact
from ddpadvisor.observation import Observation

DERIVED = "fp16_autocast_without_scaler"


def _obs(source: str = "answer", **values: object) -> list[Observation]:
    return [Observation(fact=f, value=v, source=source) for f, v in values.items()]  # type: ignore[arg-type]


def test_both_parts_known_derive_true(engine: Engine) -> None:
    winners = engine.with_implied(
        {o.fact: o for o in _obs(precision="fp16_amp", uses_grad_scaler=False)}
    )
    got = winners[DERIVED]
    assert got.value is True and got.source == "answer"
    assert "precision = fp16_amp" in (got.detail or "")


def test_one_part_known_not_to_hold_derives_false(engine: Engine) -> None:
    winners = engine.with_implied({o.fact: o for o in _obs(precision="bf16_amp")})
    assert winners[DERIVED].value is False


def test_a_part_unknown_derives_nothing(engine: Engine) -> None:
    winners = engine.with_implied({o.fact: o for o in _obs(uses_grad_scaler=False)})
    assert DERIVED not in winners


def test_the_weakest_source_speaks_for_the_derived_fact(engine: Engine) -> None:
    obs = [*_obs("trace", precision="fp16_amp"), *_obs("script", uses_grad_scaler=False)]
    winners = engine.with_implied({o.fact: o for o in obs})
    assert winners[DERIVED].source == "script"


def test_an_observed_value_is_not_overwritten(engine: Engine) -> None:
    obs = [
        *_obs(precision="fp16_amp", uses_grad_scaler=False),
        Observation(fact=DERIVED, value=False, source="trace"),
    ]
    winners = engine.with_implied({o.fact: o for o in obs})
    assert winners[DERIVED].value is False and winners[DERIVED].source == "trace"


def test_the_conjunction_lifts_its_cause_where_the_parts_alone_cannot(engine: Engine) -> None:
    """fp16 autocast and no scaler are each common in healthy jobs (setup facts, which never
    make a cause lead); together they are the slip itself."""
    fp16 = engine.posterior(_obs(precision="fp16_amp", uses_grad_scaler=False))
    bf16 = engine.posterior(_obs(precision="bf16_amp", uses_grad_scaler=False))
    lead = fp16.causes[fp16.ranking()[0]]
    assert lead == "fp16-without-grad-scaler"
    assert fp16.prob(lead) >= 0.30
    assert bf16.prob("fp16-without-grad-scaler") < 0.05


def test_check_rejects_a_derived_fact_that_is_not_bool_or_is_asked(engine: Engine) -> None:
    fact = Fact(
        id="mixed",
        type="int",
        question="q?",
        sources=["asked"],
        derived_from=[Condition(fact="precision", is_="fp16_amp")],
    )
    problems: list[str] = []
    check_interview(engine.kb, fact, problems.append)
    assert any("needs a bool fact" in p for p in problems)
    assert any("never asked" in p for p in problems)
