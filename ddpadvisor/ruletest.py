"""Run the KB's rule tests (Semgrep-like): facts or a description in, ranking expectations out.

It sits beside the composition root: a `text:` test goes through the intake (evidence), the
rest through the engine."""

from __future__ import annotations

from dataclasses import dataclass

from ddpadvisor.engine.diagnose import Engine, resolve
from ddpadvisor.engine.infer import log_weights, posterior, public_log_weights, rank_of
from ddpadvisor.i18n import Lang, untranslated
from ddpadvisor.kb.model import Origin
from ddpadvisor.kb.schema import RuleTest
from ddpadvisor.kb.values import parse_value
from ddpadvisor.observation import Observation
from ddpadvisor.report.present import diagnose


@dataclass
class Outcome:
    test: RuleTest
    origin: Origin
    failures: list[str]

    @property
    def passed(self) -> bool:
        return not self.failures


def run_test(engine: Engine, test: RuleTest, origin: Origin) -> Outcome:
    """Check one test's expectations from log weights alone: O(causes) per test, no sort.

    A 10,000-cause rule folder has as many tests; a full ranking and explanation per test
    would make ``kb test`` quadratic in practice.
    """
    kb = engine.kb
    model = engine.model
    obs: list[Observation] = []
    fails: list[str] = []
    extra = None
    if test.text:
        from ddpadvisor.evidence.intake import described, extract, to_observations

        # the text is read as `ask` reads it: facts, and the causes it reads like
        extra = engine.extra_terms(None, described(kb, [test.text]))
        found = extract(kb, test.text)
        got = {f.fact: f.value for f in found}
        for fid, raw in test.expect_facts.items():
            want = parse_value(kb.facts[fid], raw)
            if got.get(fid) != want:
                seen = got.get(fid, "nothing")
                fails.append(f"intake: expected {fid} = {raw} from the text, got {seen}")
        obs.extend(to_observations(found, str(origin)))
    for fid, raw in test.facts.items():
        value = parse_value(kb.facts[fid], raw)
        if value is not None:
            obs.append(Observation(fact=fid, value=value, source="answer", where=str(origin)))
    # The same observed classes as a diagnosis (implied facts included), without explaining.
    observed = engine.observed_classes(engine.with_implied(resolve(obs).winners))
    logw = public_log_weights(model, log_weights(model, observed, extra))
    index = engine.cause_index

    def name(c: str) -> str:
        return kb.resolve_cause(c) or c

    # Sorting once pays off only over a few lookups; one or two count the larger weights.
    lookups = bool(test.expect_top) + len(test.expect_in_top) + len(test.expect_not_top)
    lookups += 2 * len(test.expect_below)
    ascending = sorted(logw) if lookups > 2 else None

    def pos(c: str) -> int:
        return rank_of(model.public_causes, logw, index[name(c)], ascending)

    def show_top() -> str:
        post = posterior(model, observed, extra)
        order = [post.causes[i] for i in post.ranking()[:3]]
        return ", ".join(f"{c} {post.prob(c):.2f}" for c in order)

    if test.expect_top and pos(test.expect_top) != 0:
        fails.append(f"expected {test.expect_top} first, got: {show_top()}")
    for c in test.expect_in_top:
        if (at := pos(c)) >= test.k:
            fails.append(f"expected {c} in the top {test.k}, it is #{at + 1}; top: {show_top()}")
    for c in test.expect_not_top:
        if pos(c) == 0:
            fails.append(f"expected {c} not first; top: {show_top()}")
    for a, b in test.expect_below:
        if (pa := pos(a)) <= (pb := pos(b)):
            fails.append(f"expected {a} (#{pa + 1}) below {b} (#{pb + 1})")
    return Outcome(test, origin, fails)


def run_all(engine: Engine) -> list[Outcome]:
    return [run_test(engine, t, o) for t, o in zip(engine.kb.tests, engine.kb.test_origins)]


def untranslated_in(engine: Engine, lang: Lang) -> list[str]:
    """Build every rule test's diagnosis in ``lang`` and name, once each, the entries it shows
    or names (its top causes and the causes it expects, their fixes, the next questions, the
    judged claims) that would fall back to English."""
    kb = engine.kb
    seen: set[tuple[str, str]] = set()
    out = []
    for test, origin in zip(kb.tests, kb.test_origins):
        obs = []
        for fid, raw in test.facts.items():
            value = parse_value(kb.facts[fid], raw)
            if value is not None:
                obs.append(Observation(fact=fid, value=value, source="answer", where=str(origin)))
        d = diagnose(engine, obs, top=3, lang=lang)
        named = [test.expect_top or "", *test.expect_in_top, *test.expect_not_top]
        named += [c for pair in test.expect_below for c in pair]
        causes = [c.id for c in d.causes if not c.catch_all]
        causes += [r for r in (kb.resolve_cause(c) for c in named) if r and r not in causes]
        shown: list[tuple[str, str]] = []
        for cid in causes:
            shown.append(("causes", cid))
            shown.extend(("fixes", f) for f in kb.causes[cid].fixes if f in kb.fixes)
        shown.extend(("facts", q.fact) for q in d.next_questions)
        shown.extend(("claims", cl.id) for cl in d.claims)
        for kind, id_ in shown:
            if (kind, id_) in seen:
                continue
            seen.add((kind, id_))
            entry = getattr(kb, kind)[id_]
            fields = untranslated(entry, lang)
            if fields:
                out.append(
                    f"WARN {kb.origin(kind, id_)} {kind[:-1]} {id_!r} shown by test "
                    f"{test.id!r} has no {lang} text for {', '.join(fields)}"
                )
    return out
