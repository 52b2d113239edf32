"""Compile the causal graph into per-fact likelihood tables.

Each fact is a categorical variable over its classes. With no fault it follows the fact's
healthy distribution h (the leak). A link "cause -> predicate S with strength q" means: with
probability q the cause forces the fact into S (spread like h within S), otherwise it leaves
the fact alone. On a bool fact this is exactly the noisy-OR of QMR-DT with leak h(S).
A mechanism path multiplies strengths (cause->mechanism q1, mechanism->finding q2 gives q1*q2).
Paths to one predicate combine by noisy-OR; different predicates force independently, and
where several fire the value lies in all their sets, or in one of them when they exclude each
other (``_forced``). An explicit ``p`` fixes P(S | cause) outright and is applied last.

Only causes linked to a fact get a table for it; every other cause predicts h, exactly like the
catch-all, so it drops out of that fact's likelihood ratio. That keeps inference
O(causes + links).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from ddpadvisor.kb import levels
from ddpadvisor.kb.model import CATCH_ALL, KnowledgeBase
from ddpadvisor.kb.values import classes, healthy_distribution

if TYPE_CHECKING:  # a warm start reads the compiled model; only compiling needs the graph
    import networkx as nx

    from ddpadvisor.kb.schema import Fact

__all__ = [
    "CATCH_ALL",
    "CompiledModel",
    "FactTable",
    "Path",
    "RowGroups",
    "compile_model",
    "load_model",
]


@dataclass(frozen=True)
class Path:
    """How a cause reaches a fact: directly or through a mechanism node."""

    finding: str
    mechanism: str | None
    weight: float
    explicit_p: bool

    def nodes(self, cause: str) -> list[str]:
        out = [f"cause:{cause}"]
        if self.mechanism:
            out.append(f"mechanism:{self.mechanism}")
        out.append(self.finding)
        return out


@dataclass
class FactTable:
    id: str
    classes: list[str]
    index: dict[str, int]
    healthy: list[float]
    # cause index -> P(class | cause) aligned with ``classes``
    likelihood: dict[int, list[float]] = field(default_factory=dict)
    paths: dict[int, list[Path]] = field(default_factory=dict)


@dataclass(frozen=True)
class RowGroups:
    """One fact's linked causes grouped by identical likelihood row."""

    rows: list[list[float]]  # distinct rows, in order of first appearance
    of: dict[int, int]  # cause index -> its row's index
    members: list[list[int]]  # row index -> cause indices, ascending


@dataclass
class CompiledModel:
    causes: list[str]
    priors: list[float]
    facts: dict[str, FactTable]
    # cause index -> setup facts (``context: true``) the cause needs a value of: it cannot
    # lead while any of them is unknown.
    gates: dict[int, list[str]] = field(default_factory=dict)
    # Facts only a probe, trace or scan establishes: a measurement pointing at a cause lets it
    # lead even while a setup fact is unknown (the measurement presupposes nothing).
    measured: frozenset[str] = frozenset()
    # Facts that only describe the setup (``context: true`` without a ``no_fault`` picture of a
    # healthy job): fp16, clipping, a GradScaler are no sign of trouble. A cause raised by
    # nothing else cannot outrank the catch-all (no cause leads on a fact still unknown).
    setup: frozenset[str] = frozenset()
    # Causes that change only a number shown about training (``changes: display``), and the
    # facts that report what someone saw (not read from code, not the setup): a display-only
    # cause no such fact backs explains a symptom nobody reported, and stays below the rest.
    display: frozenset[int] = frozenset()
    symptoms: frozenset[str] = frozenset()
    # Facts about how the job is set up or written that the scan reads and a person may say,
    # apart from the ``setup`` above: a class of one that healthy jobs often show is a
    # precondition of its causes, not evidence of a slip (``infer.COMMON_IN_HEALTHY``).
    configuration: frozenset[str] = frozenset()
    # Causes with modes (``Cause.modes``): ``causes`` above holds one entry per mode (named
    # ``cause#mode``), ``public`` the causes a diagnosis names, and ``parent`` maps each entry
    # of ``causes`` to its index in ``public``. Both empty when no cause has modes (then the
    # two lists are the same).
    parent: list[int] = field(default_factory=list)
    public: list[str] = field(default_factory=list)

    @property
    def catch_all(self) -> int:
        return len(self.causes) - 1

    @property
    def public_causes(self) -> list[str]:
        """The causes a diagnosis names (the KB's, then the catch-all), modes merged."""
        return self.public or self.causes

    @cached_property
    def public_priors(self) -> list[float]:
        """Each named cause's prior: the sum of its modes'."""
        if not self.parent:
            return self.priors
        out = [0.0] * len(self.public)
        for ci, pi in enumerate(self.parent):
            out[pi] += self.priors[ci]
        return out

    @cached_property
    def members(self) -> list[list[int]]:
        """Named cause index -> its entries in ``causes`` (one per mode, or itself)."""
        if not self.parent:
            return [[i] for i in range(len(self.causes))]
        out: list[list[int]] = [[] for _ in self.public]
        for ci, pi in enumerate(self.parent):
            out[pi].append(ci)
        return out

    @cached_property
    def log_priors(self) -> list[float]:
        return [math.log(p) for p in self.priors]

    @cached_property
    def gate_groups(self) -> list[tuple[list[str], list[int]]]:
        """``gates`` grouped by their list of setup facts: (facts, causes needing exactly
        those), so a posterior checks each distinct list once, not once per cause."""
        by: dict[tuple[str, ...], list[int]] = {}
        for ci, facts in self.gates.items():
            by.setdefault(tuple(facts), []).append(ci)
        return [(list(facts), members) for facts, members in by.items()]

    def row_groups(self, fact_id: str) -> RowGroups:
        """The fact's distinct likelihood rows and which linked causes share each one (by value,
        computed once): causes with the same row are exchangeable in an expected gain."""
        memo: dict[str, RowGroups] = self.__dict__.setdefault("_row_groups", {})
        got = memo.get(fact_id)
        if got is None:
            rows: list[list[float]] = []
            of: dict[int, int] = {}
            members: list[list[int]] = []
            seen: dict[tuple[float, ...], int] = {}
            for ci, d in self.facts[fact_id].likelihood.items():
                r = seen.setdefault(tuple(d), len(rows))
                if r == len(rows):
                    rows.append(d)
                    members.append([])
                of[ci] = r
                members[r].append(ci)
            got = memo[fact_id] = RowGroups(rows, of, members)
        return got

    def log_ratios(self, fact_id: str, k: int) -> list[tuple[float, list[int]]]:
        """ln P(class k | cause) / P(class k | no fault) for the linked causes, once per
        distinct likelihood row: (log ratio, the causes with that row). Computed once per class:
        rule tests and next-step gains ask for the same ones often."""
        memo: dict[tuple[str, int], list[tuple[float, list[int]]]] = self.__dict__.setdefault(
            "_log_ratios", {}
        )
        got = memo.get((fact_id, k))
        if got is None:
            h = self.facts[fact_id].healthy[k]
            groups = self.row_groups(fact_id)
            got = [(math.log(d[k] / h), m) for d, m in zip(groups.rows, groups.members)]
            memo[(fact_id, k)] = got
        return got


def _restrict(dist: list[float], sel: set[int]) -> list[float]:
    mass = sum(dist[i] for i in sel)
    if mass <= 0:
        return [1.0 / len(sel) if i in sel else 0.0 for i in range(len(dist))]
    return [dist[i] / mass if i in sel else 0.0 for i in range(len(dist))]


# A user rule may link one cause to one fact through many predicates; above this many the
# combinations are not enumerated (see ``_forced``).
MAX_JOINT_LINKS = 10


def _forced(healthy: list[float], links: dict[frozenset[int], float]) -> list[float]:
    """P(class | cause) when each predicate S independently forces the fact into S with its
    chance q. Where several force it, the value lies in all of them ("fp16 of either kind" and
    "fp16 AMP": AMP); where they cannot all hold (">1.1" and "<0.9"), it follows one of them in
    proportion to its q. Nothing forced: the healthy spread. The result does not depend on the
    order the links were written in."""
    items = sorted(links.items(), key=lambda kv: sorted(kv[0]))
    if len(items) > MAX_JOINT_LINKS:
        # 2^k combinations grow too fast: wider predicates first, each narrower one refining
        # them, which is still independent of the written order
        dist = list(healthy)
        for sel, q in sorted(items, key=lambda kv: -len(kv[0])):
            inside = _restrict(dist, set(sel))
            dist = [(1 - q) * d + q * r for d, r in zip(dist, inside)]
        return dist
    out = [0.0] * len(healthy)
    for fired in itertools.product((False, True), repeat=len(items)):
        weight = math.prod(q if on else 1 - q for on, (_, q) in zip(fired, items))
        chosen = [(sel, q) for on, (sel, q) in zip(fired, items) if on]
        if weight <= 0:
            continue
        if not chosen:
            part = healthy
        else:
            common = set.intersection(*(set(sel) for sel, _ in chosen))
            if common:
                part = _restrict(healthy, common)
            else:
                total = sum(q for _, q in chosen)
                part = [0.0] * len(healthy)
                for sel, q in chosen:
                    inside = _restrict(healthy, set(sel))
                    part = [a + q / total * b for a, b in zip(part, inside)]
        out = [a + weight * b for a, b in zip(out, part)]
    return out


# Of the catch-all's jobs that show a symptom, the share whose fault the KB does not know (the
# rest have none). Set at even odds, not fitted.
UNCATALOGUED_SHARE = 0.5


def no_fault_distribution(fact: Fact, labels: list[str]) -> list[float]:
    """P(class | no fault at all) from the fact's ``no_fault`` (classes it leaves out share
    the rest evenly), floored at 1e-3 and normalised."""
    given = {k: v for k, v in (fact.no_fault or {}).items() if k in labels}
    rest = [c for c in labels if c not in given]
    remaining = max(0.0, 1.0 - sum(given.values()))
    dist = [given.get(c, remaining / len(rest) if rest else 0.0) for c in labels]
    dist = [max(1e-3, d) for d in dist]
    total = sum(dist)
    return [d / total for d in dist]


def mode_name(cause: str, mode: str) -> str:
    """The compiled (internal) name of one mode of a cause; never shown."""
    return f"{cause}#{mode}"


def compile_model(kb: KnowledgeBase, graph: nx.DiGraph) -> CompiledModel:
    # A cause with modes compiles to one internal cause per mode (its prior split by the
    # modes' shares); the posterior sums them back (``infer.posterior``).
    cause_ids: list[str] = []
    nodes: list[tuple[str, str | None]] = []  # (cause node, mode node) per internal cause
    priors: list[float] = []
    parent: list[int] = []
    for pi, cid in enumerate(kb.causes):
        prior = levels.prior(kb.causes[cid].prior)
        node = f"cause:{cid}"
        modes = [
            m
            for m in (graph.successors(node) if node in graph else ())
            if graph.edges[node, m].get("kind") == "mode"
        ]
        total = sum(float(graph.nodes[m]["share"]) for m in modes)
        for m in modes or [None]:
            if m is None:
                cause_ids.append(cid)
                priors.append(prior)
            else:
                cause_ids.append(mode_name(cid, m.rsplit("/", 1)[1]))
                priors.append(prior * float(graph.nodes[m]["share"]) / total)
            nodes.append((node, m))
            parent.append(pi)
    causes = [*cause_ids, CATCH_ALL]
    priors.append(levels.CATCH_ALL_PRIOR)
    parent.append(len(kb.causes))
    moded = len(cause_ids) != len(kb.causes)
    tables: dict[str, FactTable] = {}
    for fact in kb.facts.values():
        labels = classes(fact)
        h = healthy_distribution(fact)
        tables[fact.id] = FactTable(
            id=fact.id,
            classes=labels,
            index={c: i for i, c in enumerate(labels)},
            healthy=[h[c] for c in labels],
        )

    gates: dict[int, list[str]] = {}
    for ci, (node, mnode) in enumerate(nodes):
        if node not in graph:
            continue
        # Gather every path to every finding: the cause's own, then its mode's.
        by_fact: dict[str, list[tuple[Path, set[int]]]] = {}
        _gather_paths(graph, tables, by_fact, node)
        if mnode is not None:
            _gather_paths(graph, tables, by_fact, mnode)
        for fact_id, paths in by_fact.items():
            table = tables[fact_id]
            if kb.facts[fact_id].context and fact_id not in gates.get(ci, []):
                for path, sel in paths:
                    mass = sum(table.healthy[k] for k in sel)
                    if path.mechanism is None and path.weight >= 0.9 and mass <= 0.6:
                        gates.setdefault(ci, []).append(fact_id)
                        break
            dist = list(table.healthy)
            # Noisy-OR over paths that share a predicate, then the predicates together
            # (``_forced``), p last.
            merged: dict[frozenset[int], float] = {}
            explicit: list[tuple[set[int], float]] = []
            for path, sel in paths:
                if path.explicit_p:
                    explicit.append((sel, path.weight))
                else:
                    key = frozenset(sel)
                    merged[key] = 1 - (1 - merged.get(key, 0.0)) * (1 - path.weight)
            if merged:
                dist = _forced(dist, merged)
            for sel, p in explicit:
                inside = _restrict(dist, sel)
                outside = _restrict(dist, set(range(len(dist))) - sel)
                dist = [p * a + (1 - p) * b for a, b in zip(inside, outside)]
            floor = 1e-4
            dist = [max(floor, d) for d in dist]
            total = sum(dist)
            table.likelihood[ci] = [d / total for d in dist]
            table.paths[ci] = [p for p, _ in paths]
    # The catch-all is a job with no fault, or with a fault the KB does not know. Where a fact
    # says how a job with no fault looks (``no_fault``) it predicts that; for a symptom (what
    # the user sees, no slip in the code: the fact is not read from a script) it is half that
    # and half a typical catalogued cause, since an unknown fault shows symptoms as known faults
    # do. Elsewhere it predicts the leak, like every unlinked cause.
    other = len(causes) - 1
    for fact in kb.facts.values():
        if not fact.no_fault:
            continue
        table = tables[fact.id]
        dist = no_fault_distribution(fact, table.classes)
        if "script" not in fact.sources:
            typical = [0.0] * len(dist)
            for ci, weight in enumerate(priors[:-1]):
                row = table.likelihood.get(ci, table.healthy)
                typical = [a + weight * b for a, b in zip(typical, row)]
            norm = sum(typical)
            dist = [
                UNCATALOGUED_SHARE * t / norm + (1 - UNCATALOGUED_SHARE) * d
                for t, d in zip(typical, dist)
            ]
        table.likelihood[other] = dist
        table.paths[other] = []
    measured = frozenset(f.id for f in kb.facts.values() if "asked" not in f.sources)
    setup = frozenset(f.id for f in kb.facts.values() if f.context and not f.no_fault)
    cid_of = list(kb.causes)
    display = frozenset(
        i for i, pi in enumerate(parent[:-1]) if kb.causes[cid_of[pi]].changes == "display"
    )
    symptoms = frozenset(
        f.id for f in kb.facts.values() if "script" not in f.sources and f.id not in setup
    )
    configuration = frozenset(
        f.id
        for f in kb.facts.values()
        if "script" in f.sources and f.id not in setup and f.id not in measured
    )
    return CompiledModel(
        causes=causes,
        priors=priors,
        facts=tables,
        gates=gates,
        measured=measured,
        setup=setup,
        display=display,
        symptoms=symptoms,
        configuration=configuration,
        parent=parent if moded else [],
        public=[*kb.causes, CATCH_ALL] if moded else [],
    )


def _gather_paths(
    graph: nx.DiGraph,
    tables: dict[str, FactTable],
    by_fact: dict[str, list[tuple[Path, set[int]]]],
    node: str,
) -> None:
    """The paths from a cause (or one of its modes) to its findings: direct evidence, and
    evidence through each mechanism it acts via (strengths multiplied)."""
    for succ in graph.successors(node):
        edge = graph.edges[node, succ]
        if edge.get("kind") == "evidence":
            _add_path(graph, tables, by_fact, succ, None, edge)
        elif edge.get("kind") == "via":
            q1 = edge["q"]
            for fnode in graph.successors(succ):
                e2 = graph.edges[succ, fnode]
                if e2.get("kind") != "evidence":
                    continue
                scaled = {"q": q1 * e2.get("q", 0.0)}
                _add_path(graph, tables, by_fact, fnode, succ.split(":", 1)[1], scaled)


def _add_path(
    graph: nx.DiGraph,
    tables: dict[str, FactTable],
    by_fact: dict[str, list[tuple[Path, set[int]]]],
    finding: str,
    mechanism: str | None,
    edge: dict,
) -> None:
    data = graph.nodes[finding]
    table = tables.get(data["fact"])
    if table is None:
        return
    sel = {table.index[c] for c in data["classes"] if c in table.index}
    if "p" in edge:
        path = Path(finding, mechanism, float(edge["p"]), True)
    else:
        path = Path(finding, mechanism, float(edge["q"]), False)
    by_fact.setdefault(data["fact"], []).append((path, sel))


def load_model(kb: KnowledgeBase) -> CompiledModel:
    from ddpadvisor.kb.graph import build_graph

    return compile_model(kb, build_graph(kb))
