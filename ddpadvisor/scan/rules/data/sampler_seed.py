from __future__ import annotations

from ddpadvisor.scan import values as V
from ddpadvisor.scan.analysis import text
from ddpadvisor.scan.rules.base import RuleContext, kw_node
from ddpadvisor.scan.rules.registry import ANY_EXCERPT, rule


@rule(
    "Whether the DistributedSampler's seed differs between ranks.",
    facts={
        "sampler_seed_rank_dependent": ANY_EXCERPT,  # off the sampler's constructor
    },
)
def sampler_seed(rc: RuleContext) -> None:
    fact = "sampler_seed_rank_dependent"
    for s in rc.a.objs(V.DSAMPLER):
        seed = s.kwargs.get("seed")
        if seed is None:
            rc.emit(
                fact, False, s.where, "DistributedSampler uses the default seed 0 on every rank"
            )
        elif V.RANK in seed.taint:
            rc.emit(
                fact,
                True,
                s.where,
                f"DistributedSampler seed depends on the rank ({text(s.node and kw_node(s.node, 'seed'))}): shards overlap",
            )
        elif V.UNBOUND in seed.taint:
            rc.warn(f"{s.where}: DistributedSampler seed comes from a parameter; not decided")
        else:
            rc.emit(fact, False, s.where, "DistributedSampler seed is the same on every rank")
    rc._sort_fault(fact, True)
