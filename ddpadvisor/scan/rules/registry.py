"""What a rule declares about itself, on its ``@rule`` decorator, and the registry it fills.

A rule is a function ``rule(rc: RuleContext) -> None`` in ``rules/<area>/<rule>.py`` (area:
the ``kb/causes/<area>.yaml`` whose causes its facts mostly serve). Its decorator says, in one
place, what the rule may set and how far an excerpt of a script (the code in a forum post)
supports it::

    @rule(
        "Whether the training sampler's epoch is set on every pass over the loader.",
        facts={"calls_set_epoch": not_in_excerpt(False)},
    )
    def set_epoch(rc: RuleContext) -> None: ...

``facts`` maps each fact the rule may set to the values an excerpt cannot show: the values a
rule concludes from code being absent ("no set_epoch() call"), which a piece of a script cannot
support, so ``scan_excerpt`` drops them (:data:`ANY_EXCERPT`: an excerpt shows every value;
:data:`WHOLE_SCRIPT`: the fact is read from whole scripts only). ``shown_with``: for a fact whose
listed values an excerpt does show once it also shows another fact to be True.

Decorating registers the rule under its name; ``rules/__init__.py`` imports the rule modules in
the order its ``ORDER`` lists them, which is the order they run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ddpadvisor.scan.rules.base import RuleContext

RuleFn = Callable[[RuleContext], None]
# The values of a fact an excerpt cannot show; None: the fact is read from whole scripts only.
ExcerptGap = frozenset[object] | None

ANY_EXCERPT: ExcerptGap = frozenset()
WHOLE_SCRIPT: ExcerptGap = None


def not_in_excerpt(*values: object) -> frozenset[object]:
    """The values of a fact that an excerpt cannot show (those read from code being absent)."""
    return frozenset(values)


@dataclass(frozen=True, eq=False)
class Rule:
    run: RuleFn
    facts: frozenset[str]
    # per fact, the values an excerpt cannot show (see the module's docstring); every fact of
    # ``facts`` has an entry when the rule comes from the decorator
    excerpt_cannot_show: Mapping[str, ExcerptGap] = field(default_factory=dict)
    summary: str = ""
    shown_with: Mapping[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.run.__name__

    @property
    def area(self) -> str:
        """The KB cause file this rule belongs to: the package its module is in
        (``rules/<area>/<rule>.py``)."""
        return self.run.__module__.rsplit(".", 2)[-2]


# Every rule a decorator registered, by name.
REGISTERED: dict[str, Rule] = {}


def rule(
    summary: str,
    *,
    facts: Mapping[str, ExcerptGap] | None = None,
    shown_with: Mapping[str, str] | None = None,
) -> Callable[[RuleFn], RuleFn]:
    """Register the decorated function as a rule (see the module's docstring); the function
    itself is returned unchanged."""
    gaps = dict(facts or {})
    shown = dict(shown_with or {})
    if not set(shown) <= set(gaps):
        raise ValueError(
            f"shown_with names facts the rule does not set: {sorted(set(shown) - set(gaps))}"
        )

    def register(run: RuleFn) -> RuleFn:
        made = Rule(run, frozenset(gaps), gaps, summary, shown)
        if run.__module__.rsplit(".", 1)[-1] != run.__name__:
            raise ValueError(
                f"{run.__module__}: holds one rule, named after it, not {run.__name__}"
            )
        if run.__name__ in REGISTERED:
            raise ValueError(f"two rules are named {run.__name__}")
        REGISTERED[run.__name__] = made
        return run

    return register
