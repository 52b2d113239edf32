"""The scanner's one rule table: what it declares is what the KB expects and what the rules do.

- every fact a rule declares is a KB fact that the static scan may supply (``script`` in its
  ``sources``), and every such KB fact is declared by exactly one rule;
- every rule lives in its own module ``rules/<area>/<rule>.py``, area a KB cause area
  (``kb/causes/<area>.yaml``), and ``rules.ORDER`` lists each rule module exactly once;
- each rule's decorator carries a summary and, for every fact it sets, what an excerpt
  cannot show;
- a rule that sets a fact it did not declare is refused (strict scans of all fixtures run
  with the check on, see test_scan_fixtures; here a rule is made to misbehave on purpose);
- the modules inside ``ddpadvisor/scan`` import each other without circles.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from ddpadvisor.kb.load import default_dirs, load_kb
from ddpadvisor.scan import rules as rules_pkg
from ddpadvisor.scan.rules import ORDER, RULES, Rule, UndeclaredFact, run_rules
from ddpadvisor.scan.rules.base import RuleContext
from ddpadvisor.scan.rules.registry import REGISTERED, not_in_excerpt
from ddpadvisor.scan.rules.registry import rule as rule_decorator
from tests.conftest import REPO
from tests.scan_support import fixture_path

KB = load_kb(default_dirs())
AREAS = {p.stem for p in (REPO / "kb" / "causes").glob("*.yaml")}
TRACE_ONLY_AREAS: set[str] = set()
SCAN = REPO / "ddpadvisor" / "scan"
RULES_DIR = Path(rules_pkg.__file__).parent


def test_declared_facts_are_script_facts_of_the_kb() -> None:
    for rule in RULES:
        for fact in rule.facts:
            assert fact in KB.facts, f"rule {rule.name} declares {fact}, not a KB fact"
            assert "script" in KB.facts[fact].sources, (
                f"rule {rule.name} declares {fact}, whose KB sources {KB.facts[fact].sources} "
                "do not include script"
            )


def test_every_script_fact_has_exactly_one_rule() -> None:
    owners = Counter(f for rule in RULES for f in rule.facts)
    # a fact derived from others (derived_from) is the engine's, set by no rule
    script_facts = {f.id for f in KB.facts.values() if "script" in f.sources and not f.derived_from}
    assert sorted(script_facts - set(owners)) == []
    assert [f for f, n in owners.items() if n > 1] == []


def test_rules_live_in_area_modules() -> None:
    for r in RULES:
        assert r.area in AREAS, f"rule {r.name} is in {r.run.__module__}"
        assert r.run.__module__ == f"ddpadvisor.scan.rules.{r.area}.{r.name}"
    # rules/ holds the shared plumbing and one package per area, no rule modules of its own
    assert {p.stem for p in RULES_DIR.glob("*.py")} == {"__init__", "base", "registry"}
    areas = {p.parent.name for p in RULES_DIR.glob("*/__init__.py")}
    # every area has its rule package, except those whose causes only a run can show (none
    # today: deepspeed's weights loaded after initialize are read from the code; its
    # accumulation window and clipping on partitioned gradients only the trace measures)
    assert areas == AREAS - TRACE_ONLY_AREAS


def test_order_lists_every_rule_module_exactly_once() -> None:
    modules = sorted(
        f"{p.parent.name}.{p.stem}" for p in RULES_DIR.glob("*/*.py") if not p.name.startswith("_")
    )
    assert [e for e, n in Counter(ORDER).items() if n > 1] == []
    assert sorted(ORDER) == modules
    # every rule a decorator registered is one RULES runs, in ORDER's order
    assert sorted(REGISTERED) == sorted(r.name for r in RULES)
    assert [f"{r.area}.{r.name}" for r in RULES] == list(ORDER)


def test_each_fact_is_set_by_exactly_one_rule() -> None:
    owners = Counter(f for r in RULES for f in r.facts)
    assert [f for f, n in owners.items() if n > 1] == []


def test_decorators_carry_the_metadata() -> None:
    facts = {f for r in RULES for f in r.facts}
    for r in RULES:
        assert r.summary and "\n" not in r.summary, f"rule {r.name}: one-line summary wanted"
        assert set(r.excerpt_cannot_show) == r.facts, r.name
        for fact, other in r.shown_with.items():
            assert fact in r.facts and other in facts, (r.name, fact, other)


def test_decorator_refuses_a_module_that_is_not_named_after_its_rule() -> None:
    def stray(rc: RuleContext) -> None:
        return None

    stray.__module__ = "ddpadvisor.scan.rules.data.set_epoch"
    with pytest.raises(ValueError, match="named after it"):
        rule_decorator("a second rule in set_epoch's module", facts={})(stray)
    assert "stray" not in REGISTERED


def test_decorator_refuses_a_second_rule_of_the_same_name() -> None:
    def set_epoch(rc: RuleContext) -> None:
        return None

    set_epoch.__module__ = "tests.elsewhere.set_epoch"
    with pytest.raises(ValueError, match="two rules are named set_epoch"):
        rule_decorator("a copy", facts={"calls_set_epoch": not_in_excerpt(False)})(set_epoch)
    assert REGISTERED["set_epoch"].run.__module__ == "ddpadvisor.scan.rules.data.set_epoch"


def test_undeclared_fact_is_refused() -> None:
    from ddpadvisor.scan.interp import Walker
    from ddpadvisor.scan.source import load

    def sneaky(rc: RuleContext) -> None:
        rc.emit("uses_no_sync", True, "", "a fact this rule does not declare")

    walk = Walker(load(fixture_path("healthy_full.py"))).run()
    table = (Rule(sneaky, frozenset({"calls_set_epoch"})),)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rules_pkg, "RULES", table)
        with pytest.raises(UndeclaredFact, match="uses_no_sync"):
            run_rules(walk, strict=True)
        # Not strict (the installed tool): the check is off and the finding is kept.
        rc = run_rules(walk, strict=False)
    assert [f.fact for f in rc.findings] == ["uses_no_sync"]


def _imports(path: Path, known: set[str]) -> set[str]:
    """Modules of ddpadvisor.scan this file imports at run time (not under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    pkg = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            # ``from pkg import mod`` needs mod; ``from mod import name`` needs mod.
            subs = [f"{node.module}.{a.name}" for a in node.names]
            names = [s for s in subs if s in known] or [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        # The packages above a module are loaded before it: importing them is no arrow.
        out.update(n for n in names if n in known and n != pkg and not pkg.startswith(n + "."))
    return out


def test_no_import_circles_inside_scan() -> None:
    files = {
        ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): p
        for p in SCAN.rglob("*.py")
    }
    graph = {mod: _imports(p, set(files)) for mod, p in files.items()}
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(mod: str) -> None:
        state[mod] = 1
        path.append(mod)
        for nxt in sorted(graph[mod]):
            if state.get(nxt) == 1:
                cycle = [*path[path.index(nxt) :], nxt]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        path.pop()
        state[mod] = 2

    for mod in sorted(graph):
        if mod not in state:
            visit(mod)


@pytest.mark.parametrize(
    ("canon", "first"),
    [
        ("torch.nn.parallel.DistributedDataParallel", "ddp"),
        ("DDP", "ddp"),  # an alias the import did not resolve
        ("torch.utils.data.distributed.DistributedSampler", "distributed_sampler"),
        ("torch.utils.data.RandomSampler", "sampler"),
        ("torch.optim.AdamW", "optimizer"),
        ("torch.nn.Linear", "nn_module"),
        ("torch.nn.functional.cross_entropy", "functional_loss"),
    ],
)
def test_symbol_table_entry_that_decides(canon: str, first: str) -> None:
    from ddpadvisor.scan import apis
    from ddpadvisor.scan.library.table import lookup

    entries = lookup(canon, apis.last(canon))
    assert entries, f"no entry handles {canon}"
    assert entries[0].label == first


def test_batch_sampler_over_a_distributed_sampler_stays_distributed(tmp_path: Path) -> None:
    """The BatchSampler entry passes a DistributedSampler through; over any other sampler it
    declines and the generic sampler entry decides."""
    from ddpadvisor.scan import scan_file

    script = tmp_path / "train.py"
    script.write_text(
        "import torch\n"
        "import torch.distributed as dist\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, RandomSampler\n"
        "dist.init_process_group('gloo')\n"
        "ds = list(range(100))\n"
        "model = DDP(torch.nn.Linear(1, 1))\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "bs = BatchSampler(SAMPLER, batch_size=4, drop_last=True)\n"
        "for x in DataLoader(ds, batch_sampler=bs):\n"
        "    loss = model(x).mean()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    opt.zero_grad()\n"
    )
    text = script.read_text()
    script.write_text(text.replace("SAMPLER", "DistributedSampler(ds)"))
    assert scan_file(script).value("uses_distributed_sampler") is True
    script.write_text(text.replace("SAMPLER", "RandomSampler(ds)"))
    assert scan_file(script).value("uses_distributed_sampler") is not True
