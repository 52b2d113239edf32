"""Causes with modes: a mixture of ways to go wrong, summed back into one named cause."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from ddpadvisor.engine.cache import load_cached
from ddpadvisor.engine.diagnose import Engine
from ddpadvisor.kb.model import KnowledgeBase, Origin
from ddpadvisor.kb.schema import Cause, CauseMode, Fact, Fix, Link, Verify
from ddpadvisor.observation import Observation
from ddpadvisor.report.present import diagnose


def _kb(modes: bool) -> KnowledgeBase:
    """Two slips a healthy job rarely shows (``a``, ``b``) and one cause that shows either,
    written with modes or, for comparison, as one noisy-OR cause linked to both."""
    kb = KnowledgeBase(dirs=["<test>"])
    for fid in ("a", "b", "c"):
        kb.facts[fid] = Fact(
            id=fid, type="bool", question=f"{fid}?", sources=["asked"], healthy={"true": 0.05}
        )
    kb.fixes["fix"] = Fix(
        id="fix", title="Fix", steps=["do it"], verify=Verify(command="true", expect="exit 0")
    )
    common = [Link(fact="c", is_=True, strength="weak")]
    one = Link(fact="a", is_=True, strength="strong")
    two = Link(fact="b", is_=True, strength="strong")
    base: dict[str, Any] = dict(
        id="slip", title="Slip", area="test", prior="uncommon", mechanism="m", fixes=["fix"]
    )
    if modes:
        cause = Cause(
            **base,
            evidence=common,
            modes=[
                CauseMode(id="one", title="the first way", share=0.5, evidence=[one]),
                CauseMode(id="two", title="the second way", share=0.5, evidence=[two]),
            ],
        )
    else:
        cause = Cause(**base, evidence=[*common, one, two])
    kb.causes["slip"] = cause
    kb.causes["rival"] = Cause(
        id="rival",
        title="Rival",
        area="test",
        prior="uncommon",
        mechanism="m",
        evidence=[Link(fact="c", is_=True, strength="moderate")],
        fixes=["fix"],
    )
    for cid in kb.causes:
        kb.origins[("causes", cid)] = Origin("<test>", None)
    return kb


def _obs(**values: bool) -> list[Observation]:
    return [Observation(fact=f, value=v, source="answer") for f, v in values.items()]


def test_one_mode_fitting_is_not_held_against_the_cause() -> None:
    """``a`` true and ``b`` false: the first mode fits, and the second mode's missing finding
    does not count against the cause, as it does when one noisy-OR cause holds both links."""
    moded, flat = Engine(_kb(True)), Engine(_kb(False))
    seen = _obs(a=True, b=False)
    p_moded = moded.posterior(seen).prob("slip")
    p_flat = flat.posterior(seen).prob("slip")
    assert p_moded > p_flat
    # the mixture: half the prior times the first mode's likelihood ratio (b is unlinked in it)
    lr_a = (0.9 + 0.1 * 0.05) / 0.05
    post = moded.posterior(seen)
    w_slip = math.exp(post.log_weights[post.index("slip")])
    w_other = math.exp(post.log_weights[post.index("other")])
    prior = moded.model.public_priors
    want = (prior[0] / 2 * lr_a + prior[0] / 2 * (0.1 * 0.95 / 0.95)) / prior[-1]
    assert w_slip / w_other == pytest.approx(want, rel=1e-6)


def test_named_cause_shows_its_leading_modes_evidence() -> None:
    engine = Engine(_kb(True))
    d = diagnose(engine, _obs(b=True))
    slip = next(c for c in d.causes if c.id == "slip")
    assert slip.mode is not None and slip.mode.id == "two"
    assert slip.mode.title == "the second way"
    assert {e.fact for e in slip.evidence} == {"b"}
    assert [c.id for c in d.causes].count("slip") == 1  # one entry, not one per mode
    assert math.isclose(sum(c.score for c in d.causes), 1.0, rel_tol=1e-9)


def test_without_modes_nothing_changes() -> None:
    engine = Engine(_kb(False))
    assert engine.model.parent == [] and engine.model.public_causes == engine.model.causes
    post = engine.posterior(_obs(a=True))
    assert post.inner is None and post.compiled() is post


def test_verified_fix_and_description_reach_every_mode() -> None:
    engine = Engine(_kb(True))
    terms = engine.verify_terms({"fix": "failed"})
    assert sorted(engine.model.causes[ci] for ci in terms) == ["rival", "slip#one", "slip#two"]


def test_questions_weigh_the_modes() -> None:
    """Next-step gains are computed over the compiled entries (the likelihood tables index
    them, one per mode), so each mode's finding is worth asking."""
    engine = Engine(_kb(True))
    inference = engine.infer(_obs(c=True))
    assert inference.posterior.inner is not None
    asked = {f for s in inference.steps for f in s.facts}
    assert {"a", "b"} <= asked


def test_a_cause_needs_two_distinct_modes() -> None:
    mode = CauseMode(
        id="one", title="t", share=0.5, evidence=[Link(fact="a", is_=True, strength="weak")]
    )
    base = dict(id="x", title="X", area="t", prior="rare", mechanism="m", fixes=["fix"])
    with pytest.raises(ValidationError, match="at least two"):
        Cause(**base, modes=[mode])
    with pytest.raises(ValidationError, match="share an id"):
        Cause(**base, modes=[mode, mode])
    with pytest.raises(ValidationError, match="evidence or a via link"):
        CauseMode(id="bare", title="t", share=0.5)


MODED = """
causes:
  - id: two-ways
    title: A slip of two kinds
    area: test
    prior: rare
    mechanism: m
    evidence:
      - {fact: uses_no_sync, is: true, strength: weak}
    modes:
      - id: one
        title: the first
        share: 0.7
        evidence: [{fact: zero_grad_every_micro_step, is: true, strength: strong}]
      - id: two
        title: the second
        share: 0.3
        via: [{mechanism: replicas-diverged, strength: strong}]
        evidence: [{fact: optimizer_steps_without_sync, ge: 1, strength: strong}]
    fixes: [zero-grad-once-per-step]
tests:
  - id: two-ways-first
    facts: {zero_grad_every_micro_step: true, uses_no_sync: true}
    expect_in_top: [two-ways]
"""


def test_modes_survive_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user folder's cause with modes: a cold and a warm load compile the same."""
    from ddpadvisor.kb.files import default_dirs

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "mine.yaml").write_text(MODED)
    dirs = default_dirs([rules])
    kb, cold = load_cached(dirs)
    assert not kb.problems, kb.problems[:1]
    _, warm = load_cached(dirs)
    assert cold is not None and warm is not None
    assert "two-ways#one" in warm.causes and "two-ways#two" in warm.causes
    assert warm.parent == cold.parent and warm.public_causes == cold.public_causes
    assert warm.causes == cold.causes and warm.priors == cold.priors
    pi = warm.public_causes.index("two-ways")
    one, two = (warm.priors[warm.causes.index(f"two-ways#{m}")] for m in ("one", "two"))
    assert one / two == pytest.approx(0.7 / 0.3)
    assert warm.public_priors[pi] == pytest.approx(one + two)
    # the second mode reaches the mechanism's findings, the first does not
    ci_one, ci_two = (warm.causes.index(f"two-ways#{m}") for m in ("one", "two"))
    diverged = warm.facts["param_checksums_match"]
    assert ci_two in diverged.likelihood and ci_one not in diverged.likelihood
    assert any(p.mechanism == "replicas-diverged" for p in diverged.paths[ci_two])


def test_bad_modes_in_a_user_folder_are_named_with_file_and_line(tmp_path: Path) -> None:
    from ddpadvisor.kb.files import default_dirs
    from ddpadvisor.kb.load import load_kb

    one = MODED.replace(
        """      - id: two
        title: the second
        share: 0.3
        via: [{mechanism: replicas-diverged, strength: strong}]
        evidence: [{fact: optimizer_steps_without_sync, ge: 1, strength: strong}]
""",
        "",
    )
    (tmp_path / "one.yaml").write_text(one)
    kb = load_kb(default_dirs([tmp_path]))
    msgs = [f"{p.origin.file}:{p.origin.line}: {p.message}" for p in kb.problems]
    assert any(
        m.endswith("field 'modes': a cause with modes has at least two") and "one.yaml:" in m
        for m in msgs
    ), msgs
    (tmp_path / "one.yaml").write_text(MODED.replace("zero_grad_every_micro_step", "no_such"))
    kb = load_kb(default_dirs([tmp_path]))
    msgs = [f"{p.origin.file}:{p.origin.line}: {p.message}" for p in kb.problems]
    assert any("one.yaml:3: cause 'two-ways/one': unknown fact id 'no_such'" in m for m in msgs), (
        msgs
    )


def test_reports_name_the_leading_mode() -> None:
    from ddpadvisor.report.text import render_markdown, render_text
    from ddpadvisor.tui.widgets.why import explain

    engine = Engine(_kb(True))
    d = diagnose(engine, _obs(b=True))
    assert d.causes[0].id == "slip"
    assert "in this way: the second way" in render_text(d)
    assert "(in this way: the second way)" in render_markdown(d)
    assert "in this way: the second way" in explain(d.causes[0]).plain
    zh = diagnose(engine, _obs(b=True), lang="zh")
    assert "具体是：the second way" in render_text(zh)
