"""The package's import graph: no circle among modules, and no arrow that runs back up.

Imports under ``if TYPE_CHECKING:`` are left out: they never run. Function-level (lazy)
imports count, since they run when the function does.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parent.parent / "ddpadvisor"

# The trace agent is imported by the job's Python, often without ddpadvisor installed: the
# reader may import its trace format, the agent imports nothing of ddpadvisor.
AGENT = "ddpadvisor.tracing.agent"

# Bottom to top; a module may import only from its own layer's package or from lower layers.
LAYERS: list[set[str]] = [
    {"errors", "bundled", "cliutil", "i18n", "yamlio", "terminal", "outputs", "__init__", "agent"},
    {"kb"},
    {"observation"},
    {"engine", "scan"},
    {"report"},  # the presenter: an inference (engine) becomes a Diagnosis in a language
    {"evidence"},
    {"runs", "probing"},
    {"service", "ruletest"},
    {"tracing", "kb_command"},
    {"tui"},
    {"cli", "__main__"},
]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[tuple[str, ...]]:
    """Each import as the names it may resolve to, most specific first."""
    out: list[tuple[str, ...]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.extend((a.name,) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from pkg import sub` imports the submodule sub; `from mod import name` imports mod.
            out.extend((f"{node.module}.{a.name}", node.module) for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


def module_graph() -> nx.DiGraph:
    modules: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if "agent" in parts:  # the trace agent runs inside the user's job on its own (below)
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    graph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        for candidates in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            target = next((c for c in candidates if c in modules), candidates[-1])
            if target.startswith(AGENT):
                graph.add_edge(name, AGENT)
                continue
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name and target != "ddpadvisor":
                graph.add_edge(name, target)
    return graph


def _top(module: str) -> str:
    if module.startswith(AGENT):
        return "agent"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _layer(module: str) -> int:
    top = _top(module)
    for i, members in enumerate(LAYERS):
        if top in members:
            return i
    raise AssertionError(f"{module}: its package {top!r} is in no layer of this test")


def test_no_import_circle() -> None:
    cycles = list(nx.simple_cycles(module_graph()))
    assert not cycles, f"import circles: {cycles[:5]}"


def test_no_arrow_runs_back_up() -> None:
    graph = module_graph()
    upward = [f"{a} -> {b}" for a, b in graph.edges if _top(a) != _top(b) and _layer(b) > _layer(a)]
    assert not upward, "imports that run back up: " + "; ".join(sorted(upward))


def test_the_checker_sees_a_circle(tmp_path: Path) -> None:
    """The import walker finds lazy imports and skips TYPE_CHECKING ones."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ddpadvisor.tui import app\n"
        "def f():\n    from ddpadvisor.engine import infer\n"
    )
    found = [name for names in _imports(ast.parse(source)) for name in names]
    assert "ddpadvisor.engine.infer" in found
    assert not any(name.startswith("ddpadvisor.tui") for name in found)


def test_the_agent_imports_nothing_of_ddpadvisor() -> None:
    agent = PACKAGE / "tracing" / "agent"
    for path in agent.rglob("*.py"):
        for names in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            assert not names[-1].startswith("ddpadvisor."), f"{path}: imports {names[-1]}"


# Entry points reach evidence through the registry (``evidence.sources``, whose ``gather``
# reads every source): never a source's own module or reader around it. The text helpers the
# interactive screens call on what the user types (intake's extraction, answers' --set parser)
# are not sources.
ENTRY_POINTS = ("ddpadvisor.cli", "ddpadvisor.__main__", "ddpadvisor.tui")
ENTRY_MAY_IMPORT = {
    "ddpadvisor.evidence.sources",
    "ddpadvisor.evidence.gather",
    "ddpadvisor.evidence.intake",
    "ddpadvisor.evidence.answers",
}


def _around_the_registry(edges: list[tuple[str, str]]) -> list[str]:
    return sorted(
        f"{a} -> {b}"
        for a, b in edges
        if a.startswith(ENTRY_POINTS)
        and b.startswith("ddpadvisor.evidence")
        and b not in ENTRY_MAY_IMPORT
    )


def test_entry_points_read_evidence_through_the_registry() -> None:
    around = _around_the_registry(list(module_graph().edges))
    assert not around, "entry points importing evidence around the registry: " + "; ".join(around)


def test_the_registry_rule_sees_an_import_around_it() -> None:
    """A lazy import of a source's module (or its reader) from the TUI is caught."""
    source = "def f():\n    from ddpadvisor.evidence.sources.trace import series\n"
    target = _imports(ast.parse(source))[0][-1]
    assert _around_the_registry([("ddpadvisor.tui.runners", target)]) == [
        "ddpadvisor.tui.runners -> ddpadvisor.evidence.sources.trace"
    ]
    reader = ("ddpadvisor.tui.app", "ddpadvisor.evidence.trace.load")
    assert _around_the_registry([reader, ("ddpadvisor.tui.app", "ddpadvisor.evidence.sources")])


def _all_imports(tree: ast.AST) -> list[str]:
    """Every module an import names, those under ``if TYPE_CHECKING:`` included (a type
    checker follows them, so they close a circle as well)."""
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
            out.extend(f"{node.module}.{a.name}" for a in node.names)
    return out


def test_tui_screens_and_widgets_never_import_the_app() -> None:
    """Screens get a controller in their constructor and post messages or dismiss with a
    result; the app imports them, never the other way round (not even for type hints)."""
    offenders = []
    for folder in ("screens", "widgets"):
        for path in (PACKAGE / "tui" / folder).rglob("*.py"):
            names = _all_imports(ast.parse(path.read_text(encoding="utf-8")))
            if any(n == "ddpadvisor.tui.app" or n.startswith("ddpadvisor.tui.app.") for n in names):
                offenders.append(str(path.relative_to(PACKAGE.parent)))
    assert not offenders, "import the TUI app: " + ", ".join(sorted(offenders))


def test_the_app_check_sees_a_type_checking_import() -> None:
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ddpadvisor.tui.app import A\n"
    assert "ddpadvisor.tui.app" in _all_imports(ast.parse(source))


def test_the_engine_returns_numbers_and_speaks_no_language() -> None:
    """Inference returns ids, probabilities and steps; the presenter (report/) writes the text,
    so no engine module imports the language tables or the output models (the KB it reads
    carries its own translations; that is data, not presentation)."""
    graph = module_graph()
    engine = [m for m in graph if _top(m) == "engine"]
    assert "ddpadvisor.engine.diagnose" in engine
    spoken = [
        f"{m} -> {t}" for m in engine for t in graph.successors(m) if _top(t) in ("i18n", "report")
    ]
    assert graph.has_edge("ddpadvisor.report.present", "ddpadvisor.engine.diagnose")
    assert not spoken, "the engine reaches presentation: " + "; ".join(sorted(spoken))
