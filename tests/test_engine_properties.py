"""Property tests of the ranking engine on generated knowledge bases."""

from __future__ import annotations

import itertools
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from ddpadvisor.engine.diagnose import Engine
from ddpadvisor.engine.infer import Posterior, expected_gain, posterior, rank_of
from ddpadvisor.engine.questions import joint_gain
from ddpadvisor.kb.synthetic import synthetic_kb
from ddpadvisor.kb.values import classes
from ddpadvisor.observation import Observation
from ddpadvisor.report.present import questions

ENGINES = {seed: Engine(synthetic_kb(12, 60, 15, seed=seed)) for seed in range(4)}


def value_for(engine: Engine, fact_id: str, pick: int) -> bool | str | int:
    fact = engine.kb.facts[fact_id]
    if fact.type == "bool":
        return pick % 2 == 0
    if fact.type == "enum":
        return ["a", "b", "c"][pick % 3]
    return [1, 4, 16][pick % 3]


observations = st.tuples(
    st.sampled_from(sorted(ENGINES)),
    st.dictionaries(st.integers(0, 14), st.integers(0, 5), max_size=8),
)


def build(seed: int, chosen: dict[int, int]) -> tuple[Engine, list[Observation]]:
    engine = ENGINES[seed]
    obs = [
        Observation(fact=f"f{j}", value=value_for(engine, f"f{j}", v), source="answer")
        for j, v in chosen.items()
    ]
    return engine, obs


@settings(max_examples=80, deadline=None)
@given(observations)
def test_posteriors_sum_to_one(case: tuple[int, dict[int, int]]) -> None:
    engine, obs = build(*case)
    post = engine.posterior(obs)
    assert math.isclose(sum(post.probs), 1.0, rel_tol=1e-9)
    assert all(0.0 <= p <= 1.0 for p in post.probs)


@settings(max_examples=60, deadline=None)
@given(observations, st.randoms(use_true_random=False))
def test_order_of_observations_does_not_matter(case, rnd) -> None:  # type: ignore[no-untyped-def]
    engine, obs = build(*case)
    shuffled = list(obs)
    rnd.shuffle(shuffled)
    a = engine.posterior(obs).probs
    b = engine.posterior(shuffled).probs
    assert all(math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-15) for x, y in zip(a, b))


@settings(max_examples=60, deadline=None)
@given(observations, st.integers(0, 14))
def test_unanswered_fact_leaves_ranking_unchanged(case, extra: int) -> None:  # type: ignore[no-untyped-def]
    from ddpadvisor.evidence.answers import parse_set

    engine, obs = build(*case)
    obs = [o for o in obs if o.fact != f"f{extra}"]
    unknown = parse_set(engine.kb, [f"f{extra}=unknown"])
    assert unknown == []
    before = engine.posterior(obs)
    after = engine.posterior(obs + unknown)
    assert before.ranking() == after.ranking()
    assert before.probs == after.probs


@settings(max_examples=80, deadline=None)
@given(observations, st.integers(0, 11), st.integers(0, 11))
def test_explained_finding_never_lowers_its_cause_against_an_unlinked_one(  # type: ignore[no-untyped-def]
    case, a: int, b: int
) -> None:
    engine, obs = build(*case)
    cause_a = engine.kb.causes[f"cause-{a}"]
    link = cause_a.evidence[0]
    linked_b = {lk.fact for lk in engine.kb.causes[f"cause-{b}"].evidence}
    if a == b or link.fact in linked_b:
        return
    obs = [o for o in obs if o.fact != link.fact]
    fact = engine.kb.facts[link.fact]
    value = link.is_ if link.is_ is not None else 16  # inside the predicate (ge 8 for ints)
    finding = Observation(fact=link.fact, value=value, source="answer")
    before = engine.posterior(obs)
    after = engine.posterior([*obs, finding])
    ia, ib = before.causes.index(cause_a.id), before.causes.index(f"cause-{b}")
    ratio_before = before.log_weights[ia] - before.log_weights[ib]
    ratio_after = after.log_weights[ia] - after.log_weights[ib]
    assert ratio_after >= ratio_before - 1e-12, (fact.id, classes(fact))


@settings(max_examples=60, deadline=None)
@given(observations)
def test_question_gain_nonnegative_and_zero_once_observed(case) -> None:  # type: ignore[no-untyped-def]
    engine, obs = build(*case)
    post = engine.posterior(obs)
    observed = {o.fact for o in obs}
    for fid in engine.kb.facts:
        assert expected_gain(engine.model, post, fid) >= 0.0
    asked = questions(engine, post, observed, limit=None)
    assert not {q.fact for q in asked} & observed
    assert all(q.expected_gain >= 0 for q in asked)


def test_gain_matches_brute_force_entropy() -> None:
    """The closed-form gain equals the textbook expectation over outcomes."""
    engine = ENGINES[1]
    post = engine.posterior([])
    for fid in list(engine.kb.facts)[:6]:
        table = engine.model.facts[fid]
        h0 = post.entropy()
        expect = 0.0
        for k, label in enumerate(table.classes):
            pk = sum(
                post.probs[i]
                * (table.likelihood[i][k] if i in table.likelihood else table.healthy[k])
                for i in range(len(post.probs))
            )
            after = posterior(engine.model, {fid: label})
            expect += pk * after.entropy()
        assert math.isclose(expected_gain(engine.model, post, fid), h0 - expect, abs_tol=1e-9)


def test_joint_gain_matches_brute_force_with_shared_rows() -> None:
    """Causes that share likelihood rows are summed as groups; the joint gain of several facts
    still equals the textbook expectation over their joint outcomes."""
    engine = Engine(synthetic_kb(300, 900, 6, seed=3))
    model = engine.model
    shared = [len(model.row_groups(f).rows) < len(model.facts[f].likelihood) for f in model.facts]
    assert all(shared), "the generated KB should have causes with identical rows"
    first = sorted(model.facts)[0]
    seen = {first: classes(engine.kb.facts[first])[0]}
    post = posterior(model, seen)
    for facts in (["f1"], ["f1", "f2"], ["f2", "f3", "f4"]):
        tables = [model.facts[f] for f in facts]
        expect = 0.0
        for combo in itertools.product(*(range(len(t.classes)) for t in tables)):
            pk = sum(
                p * math.prod(t.likelihood.get(i, t.healthy)[k] for t, k in zip(tables, combo))
                for i, p in enumerate(post.probs)
            )
            labels = {f: t.classes[k] for f, t, k in zip(facts, tables, combo)}
            expect += pk * posterior(model, {**seen, **labels}).entropy()
        got = joint_gain(model, post, facts)
        assert got > 0
        assert math.isclose(got, post.entropy() - expect, rel_tol=1e-9, abs_tol=1e-12)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from([-3.0, -1.5, -1.5, 0.0, 0.25, 2.0]), min_size=1, max_size=30))
def test_rank_of_counts_like_a_sort(logw: list[float]) -> None:
    """A rule test's rank of a cause, counted or bisected, is its place in the ranking order
    (weight descending, then name), ties included."""
    causes = [f"c{i:02d}" for i in range(len(logw))][::-1]
    order = sorted(range(len(logw)), key=lambda i: (-logw[i], causes[i]))
    ascending = sorted(logw)
    for ci in range(len(logw)):
        assert rank_of(causes, logw, ci) == order.index(ci)
        assert rank_of(causes, logw, ci, ascending) == order.index(ci)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.1, 0.1, 0.25, 0.5]), min_size=1, max_size=30))
def test_ranking_is_probability_then_name(probs: list[float]) -> None:
    causes = [f"c{(7 * i) % 31:02d}" for i in range(len(probs))]
    post = Posterior(causes, probs, [0.0] * len(probs), {})
    assert post.ranking() == sorted(range(len(probs)), key=lambda i: (-probs[i], causes[i]))


def test_tables_do_not_depend_on_the_order_links_are_written_in() -> None:
    # "precision in [fp16_amp, pure_fp16], certain" then "precision is fp16_amp, strong" must
    # compile the same whichever of the two a rule writes first
    import copy

    from ddpadvisor.engine.model import load_model
    from ddpadvisor.service import load_engine

    kb = load_engine().kb
    flipped = copy.deepcopy(kb)
    for cause in flipped.causes.values():
        cause.evidence.reverse()
    ours, theirs = load_model(kb), load_model(flipped)
    nested = 0
    for fact_id, table in ours.facts.items():
        for ci, row in table.likelihood.items():
            other = theirs.facts[fact_id].likelihood[ci]
            assert all(math.isclose(a, b, abs_tol=1e-12) for a, b in zip(row, other)), (
                fact_id,
                ours.causes[ci],
            )
        nested += sum(1 for paths in table.paths.values() if len(paths) > 1)
    assert nested > 0  # the bundled KB has facts linked twice to one cause


def test_many_links_to_one_fact_are_not_enumerated_and_stay_order_free() -> None:
    from ddpadvisor.engine.model import MAX_JOINT_LINKS, _forced

    healthy = [1 / 8] * 8
    sets = list(itertools.combinations(range(8), 3))[:40]  # 2^40 combinations would never end
    links = {frozenset(c): 0.05 + 0.02 * i for i, c in enumerate(sets)}
    assert len(links) > MAX_JOINT_LINKS
    dist = _forced(healthy, links)
    assert math.isclose(sum(dist), 1.0)
    assert dist == _forced(healthy, dict(reversed(list(links.items()))))
