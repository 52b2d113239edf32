"""Run the KB's rule tests (Semgrep-like): facts in, ranking expectations out."""

from __future__ import annotations

from dataclasses import dataclass

from ddpadvisor.engine.diagnose import Engine
from ddpadvisor.kb.model import Origin
from ddpadvisor.kb.schema import RuleTest
from ddpadvisor.kb.values import parse_value
from ddpadvisor.observation import Observation


@dataclass
class Outcome:
    test: RuleTest
    origin: Origin
    failures: list[str]

    @property
    def passed(self) -> bool:
        return not self.failures


def run_test(engine: Engine, test: RuleTest, origin: Origin) -> Outcome:
    kb = engine.kb
    obs = []
    fails = []
    if test.text:
        from ddpadvisor.evidence.intake import extract, to_observations

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
    post = engine.posterior(obs)
    order = [post.causes[i] for i in post.ranking()]
    pos = {c: n for n, c in enumerate(order)}

    def name(c: str) -> str:
        return kb.resolve_cause(c) or c

    def show_top() -> str:
        return ", ".join(f"{c} {post.prob(c):.2f}" for c in order[:3])

    if test.expect_top and order[0] != name(test.expect_top):
        fails.append(f"expected {test.expect_top} first, got: {show_top()}")
    for c in test.expect_in_top:
        if pos[name(c)] >= test.k:
            fails.append(
                f"expected {c} in the top {test.k}, it is #{pos[name(c)] + 1}; top: {show_top()}"
            )
    for c in test.expect_not_top:
        if order[0] == name(c):
            fails.append(f"expected {c} not first; top: {show_top()}")
    for a, b in test.expect_below:
        if pos[name(a)] <= pos[name(b)]:
            fails.append(f"expected {a} (#{pos[name(a)] + 1}) below {b} (#{pos[name(b)] + 1})")
    return Outcome(test, origin, fails)


def run_all(engine: Engine) -> list[Outcome]:
    return [run_test(engine, t, o) for t, o in zip(engine.kb.tests, engine.kb.test_origins)]
