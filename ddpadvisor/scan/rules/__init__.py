"""From the recovered structure to fact values: the rules, and the ONE place that orders them.

Each rule is a function ``rule(rc: RuleContext) -> None`` in its own module,
``rules/<area>/<rule>.py`` (area: the ``kb/causes/<area>.yaml`` whose causes its facts mostly
serve), decorated with ``@rule`` (:mod:`.registry`): a one-line summary, the facts it may set
and, for each, the values an excerpt of a script cannot show. :data:`ORDER` lists the rules in
the order they run; :data:`RULES` is built from it. ``run_rules`` refuses (in strict mode) a
fact a rule did not declare; ``tests/test_scan_rules.py`` checks that every rule module is
listed exactly once, that each fact is set by exactly one rule, and that every declared fact is
a KB fact the static scan may supply (``sources`` includes ``script``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from ddpadvisor.scan.interp import WalkResult
from ddpadvisor.scan.rules.base import Finding, RuleContext, UndeclaredFact
from ddpadvisor.scan.rules.registry import REGISTERED, ExcerptGap, Rule

__all__ = [
    "EXCERPT_CANNOT_SHOW",
    "EXCERPT_SHOWN_WITH",
    "ORDER",
    "RULES",
    "Finding",
    "Rule",
    "RuleContext",
    "UndeclaredFact",
    "run_rules",
]

# The rules, ``<area>.<rule>``, in the order they run. A fact is set by exactly one rule.
ORDER: tuple[str, ...] = (
    "runtime.framework_note",
    "data.data_sharding",
    "data.sampler_seed",
    "data.set_epoch",
    "accumulation.accumulation",
    "accumulation.no_sync",
    "accumulation.forward_route",
    "accumulation.extra_backward",
    "accumulation.loss_scaling",
    "accumulation.loss_division",
    "precision.precision",
    "precision.clipping",
    "runtime.compile",
    "replicas.lora_and_wrap_order",
    "replicas.rank_conditional",
    "runtime.sharding_framework",
    "replicas.batchnorm",
    "replicas.broadcast_buffers",
    "optimisation.lr_scaling",
    "optimisation.schedule",
    "optimisation.optimizer",
    "measurement.batch_size",
    "accumulation.loss_shape",
    "measurement.logging",
    "data.augmentation",
    "data.seeding",
    "runtime.loop_kind",
    "accumulation.comm_hook",
    "deepspeed.weights_after_init",
    "deepspeed.step_per_window",
)


def _load(order: tuple[str, ...]) -> tuple[Rule, ...]:
    """The rules of ``order``, their modules imported (which registers them)."""
    out: list[Rule] = []
    for entry in order:
        importlib.import_module(f"{__name__}.{entry}")
        area, _, name = entry.partition(".")
        found = REGISTERED.get(name)
        if found is None or found.area != area:
            raise ImportError(f"rules.ORDER lists {entry}, which registers no rule {name}")
        out.append(found)
    return tuple(out)


RULES: tuple[Rule, ...] = _load(ORDER)

# What an excerpt of a script (the code in a forum post) can show, per fact, from the rules'
# decorators: the values listed are the ones a rule concludes from code being absent ("no
# no_sync()", "no autocast"), which an excerpt cannot support, so ``scan_excerpt`` drops them;
# None: the fact is read from whole scripts only. Every fact of RULES is listed.
EXCERPT_CANNOT_SHOW: dict[str, ExcerptGap] = {
    fact: gap for r in RULES for fact, gap in r.excerpt_cannot_show.items()
}

# A value listed above that an excerpt does show when it also shows this fact to be True.
EXCERPT_SHOWN_WITH: dict[str, str] = {
    fact: other for r in RULES for fact, other in r.shown_with.items()
}


def run_rules(
    walk: WalkResult, *, strict: bool = False, given: Mapping[str, object] | None = None
) -> RuleContext:
    """Run every rule of :data:`RULES` over one walk; the context holds findings and warnings.
    ``given``: fact values other evidence supplies (see ``RuleContext.given``)."""
    rc = RuleContext(walk, strict=strict, given=given)
    if rc.a.main_backward is None and rc.a.framework is None:
        rc.warn(
            f"{rc.label}: no backward() call and no HF Trainer found; "
            "only facts about the setup were read"
        )
    for rule in RULES:
        rc.declared, rc.running = (rule.facts if rc.strict else None), rule.name
        try:
            rule.run(rc)
        except Exception as exc:  # one confused rule must not lose the others' findings
            if rc.strict:
                raise
            rc.warn(f"{rc.label}: scanner rule {rule.name} gave up ({type(exc).__name__})")
        finally:
            rc.declared, rc.running = None, ""
    if walk.truncated:
        rc.warn(f"{rc.label}: very large script; the scan stopped early and may miss facts")
    return rc
