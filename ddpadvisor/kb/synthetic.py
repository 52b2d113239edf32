"""Generated knowledge bases for property tests and scaling benchmarks."""

from __future__ import annotations

import random

from ddpadvisor.kb.model import KnowledgeBase, Origin
from ddpadvisor.kb.schema import Cause, Fact, Fix, Link, Verify

_STRENGTHS = ("certain", "strong", "moderate", "weak", "slight")
_PRIORS = ("common", "uncommon", "rare")


def synthetic_kb(n_causes: int, n_links: int, n_facts: int, seed: int = 0) -> KnowledgeBase:
    """A random but valid KB: bool, enum and int facts; each cause links to distinct facts."""
    rng = random.Random(seed)
    kb = KnowledgeBase(dirs=["<synthetic>"])
    kinds = ("bool", "enum", "int")
    for j in range(n_facts):
        kind = kinds[j % 3]
        fid = f"f{j}"
        if kind == "bool":
            fact = Fact(
                id=fid,
                type="bool",
                question=f"Q{j}?",
                sources=["asked"],
                healthy={"true": rng.uniform(0.05, 0.95)},
            )
        elif kind == "enum":
            fact = Fact(
                id=fid, type="enum", values=["a", "b", "c"], question=f"Q{j}?", sources=["asked"]
            )
        else:
            fact = Fact(id=fid, type="int", bins=[2, 8], question=f"Q{j}?", sources=["asked"])
        kb.facts[fid] = fact
    kb.fixes["fix"] = Fix(
        id="fix", title="Fix", steps=["do it"], verify=Verify(command="true", expect="exit 0")
    )
    per_cause = max(1, n_links // max(1, n_causes))
    for i in range(n_causes):
        links = []
        for fid in rng.sample(sorted(kb.facts), min(per_cause, n_facts)):
            fact = kb.facts[fid]
            weight = {"strength": rng.choice(_STRENGTHS)}
            if fact.type == "bool":
                links.append(Link(fact=fid, is_=rng.random() < 0.5, **weight))
            elif fact.type == "enum":
                links.append(Link(fact=fid, is_=rng.choice(["a", "b", "c"]), **weight))
            else:
                links.append(Link(fact=fid, ge=8, **weight))
        cid = f"cause-{i}"
        kb.causes[cid] = Cause(
            id=cid,
            title=f"Cause {i}",
            area="synthetic",
            prior=rng.choice(_PRIORS),
            mechanism="synthetic",
            evidence=links,
            fixes=["fix"],
        )
        kb.origins[("causes", cid)] = Origin("<synthetic>", None)
    return kb
