"""The KB as a networkx causal graph: causes -> mechanisms -> findings (fact predicates).

Node ids are prefixed by kind (``cause:``, ``mechanism:``, ``finding:``, ``fact:``, ``fix:``,
``claim:``). Evidence edges carry the link strength ``q`` or explicit probability ``p``.
"""

from __future__ import annotations

import networkx as nx

from ddpadvisor.kb import levels
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.kb.schema import Link
from ddpadvisor.kb.values import ValueProblem, predicate_classes


def finding_id(link: Link) -> str:
    if link.is_ is not None:
        pred = f"is {str(link.is_).lower() if isinstance(link.is_, bool) else link.is_}"
    elif link.in_ is not None:
        pred = "in " + ",".join(link.in_)
    else:
        parts = []
        if link.ge is not None:
            parts.append(f">= {link.ge:g}")
        if link.lt is not None:
            parts.append(f"< {link.lt:g}")
        pred = " and ".join(parts)
    return f"finding:{link.fact} {pred}"


def mode_node(cause: str, mode: str) -> str:
    """The graph node of one mode of a cause (its evidence hangs from it)."""
    return f"mode:{cause}/{mode}"


def build_graph(kb: KnowledgeBase) -> nx.DiGraph:
    g = nx.DiGraph()
    for fact in kb.facts.values():
        g.add_node(f"fact:{fact.id}", kind="fact", label=fact.question, type=fact.type)

    def add_links(owner: str, links: list[Link]) -> None:
        for link in links:
            fact = kb.facts.get(link.fact)
            if fact is None:
                continue
            try:
                sel = sorted(predicate_classes(fact, link))
            except ValueProblem:
                continue
            fid = finding_id(link)
            g.add_node(fid, kind="finding", fact=link.fact, classes=sel, label=fid[8:])
            g.add_edge(fid, f"fact:{link.fact}", kind="observes")
            attrs: dict[str, object] = {"kind": "evidence", "why": link.why or ""}
            if link.p is not None:
                attrs["p"] = link.p
            else:
                attrs["q"] = levels.strength(link.strength or 0.0)
            g.add_edge(owner, fid, **attrs)

    for mech in kb.mechanisms.values():
        node = f"mechanism:{mech.id}"
        g.add_node(node, kind="mechanism", label=mech.title)
        add_links(node, mech.evidence)
    for cause in kb.causes.values():
        node = f"cause:{cause.id}"
        g.add_node(
            node, kind="cause", label=cause.title, area=cause.area, prior=levels.prior(cause.prior)
        )
        for via in cause.via:
            g.add_edge(
                node, f"mechanism:{via.mechanism}", kind="via", q=levels.strength(via.strength)
            )
        add_links(node, cause.evidence)
        for mode in cause.modes:
            mnode = mode_node(cause.id, mode.id)
            g.add_node(mnode, kind="mode", label=mode.title, share=mode.share)
            g.add_edge(node, mnode, kind="mode")
            for via in mode.via:
                g.add_edge(
                    mnode, f"mechanism:{via.mechanism}", kind="via", q=levels.strength(via.strength)
                )
            add_links(mnode, mode.evidence)
        for fix_id in cause.fixes:
            g.add_node(
                f"fix:{fix_id}",
                kind="fix",
                label=kb.fixes[fix_id].title if fix_id in kb.fixes else fix_id,
            )
            g.add_edge(node, f"fix:{fix_id}", kind="fixed-by")
    for claim in kb.claims.values():
        node = f"claim:{claim.id}"
        g.add_node(node, kind="claim", label=claim.text, verdict=claim.verdict)
        for c in claim.causes:
            target = kb.resolve_cause(c)
            if target:
                g.add_edge(node, f"cause:{target}", kind="bears-on")
        for f in claim.facts:
            g.add_edge(node, f"fact:{f}", kind="bears-on")
    return g


def to_dot(g: nx.DiGraph) -> str:
    """A Graphviz DOT rendering without needing pydot."""
    shapes = {
        "cause": "box",
        "mode": "box",
        "mechanism": "ellipse",
        "finding": "note",
        "fact": "plaintext",
        "fix": "component",
        "claim": "hexagon",
    }

    def q(text: object) -> str:
        return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["digraph ddpadvisor {", "  rankdir=LR;"]
    for node, data in g.nodes(data=True):
        kind = data.get("kind", "")
        label = node if kind in ("cause", "mode", "mechanism", "fix") else data.get("label", node)
        lines.append(f"  {q(node)} [shape={shapes.get(kind, 'box')}, label={q(label)}];")
    for a, b, data in g.edges(data=True):
        w = data.get("q", data.get("p"))
        attr = f" [label={q(f'{w:g}')}]" if w is not None else ""
        lines.append(f"  {q(a)} -> {q(b)}{attr};")
    lines.append("}")
    return "\n".join(lines) + "\n"
