"""The scanner's one rule table: what it declares is what the KB expects and what the rules do.

- every fact a rule declares is a KB fact that the static scan may supply (``script`` in its
  ``sources``), and every such KB fact is declared by exactly one rule;
- every rule lives in the module of a KB cause area (``kb/causes/<area>.yaml``);
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
from ddpadvisor.scan.rules import RULES, Rule, UndeclaredFact, run_rules
from ddpadvisor.scan.rules.base import RuleContext
from tests.conftest import REPO
from tests.scan_support import FIXTURES

KB = load_kb(default_dirs())
AREAS = {p.stem for p in (REPO / "kb" / "causes").glob("*.yaml")}
TRACE_ONLY_AREAS = {"deepspeed"}
SCAN = REPO / "ddpadvisor" / "scan"


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
    script_facts = {f.id for f in KB.facts.values() if "script" in f.sources}
    assert sorted(script_facts - set(owners)) == []
    assert [f for f, n in owners.items() if n > 1] == []


def test_rules_live_in_area_modules() -> None:
    for rule in RULES:
        assert rule.area in AREAS, f"rule {rule.name} is in {rule.run.__module__}"
    here = Path(rules_pkg.__file__).parent
    modules = {p.stem for p in here.glob("*.py")} | {p.parent.name for p in here.glob("*/__init__.py")}
    # every area has its rule module, except those whose causes only a run can show (the
    # DeepSpeed engine's accumulation window, weights loaded after initialize: the trace
    # measures them; the scanner reads no DeepSpeed calls yet)
    assert modules - {"__init__", "base", "registry"} == AREAS - TRACE_ONLY_AREAS


def test_undeclared_fact_is_refused() -> None:
    from ddpadvisor.scan.interp import Walker
    from ddpadvisor.scan.source import load

    def sneaky(rc: RuleContext) -> None:
        rc.emit("uses_no_sync", True, "", "a fact this rule does not declare")

    walk = Walker(load(FIXTURES / "accumulation" / "healthy_full.py")).run()
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
