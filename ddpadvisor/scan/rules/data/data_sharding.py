from __future__ import annotations

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.analysis import batch_refs
from ddpadvisor.scan.context import Event
from ddpadvisor.scan.library.views import SCRIPT
from ddpadvisor.scan.rules.base import KNOWN_HEADS, RuleContext, cli_switched, const
from ddpadvisor.scan.rules.data._shared import _mentions_rank, _seed_calls
from ddpadvisor.scan.rules.registry import not_in_excerpt, rule
from ddpadvisor.scan.values import Obj


@rule(
    "Whether each rank reads its own shard of the training data.",
    facts={
        # True is read off the sampler; False only where the excerpt shows the loader's loop too
        # (a loader built here may be handed to accelerate or Lightning further down)
        "uses_distributed_sampler": not_in_excerpt(False),
    },
    shown_with={"uses_distributed_sampler": "hand_written_loop"},
)
def data_sharding(rc: RuleContext) -> None:
    fact = "uses_distributed_sampler"
    fw = rc.framework
    said = fw.shards_loader() if fw is not None else SCRIPT
    if said is not SCRIPT:
        rc.say(fact, said)
        return
    loader = rc.training_loader()
    if loader is None:
        if rc.walk.rank_slices:
            rc.emit(
                fact,
                True,
                rc.walk.rank_slices[0],
                "data sliced by rank (data[rank::world_size])",
            )
        elif rc.a.distributed and not rc.a.objs(V.LOADER) and rc.a.objs(V.DSAMPLER):
            s = rc.a.objs(V.DSAMPLER)[0]
            rc.emit(fact, True, s.where, "DistributedSampler in use")
        elif rc.a.distributed:
            _hand_batches(rc)
        return
    if loader.extra.get("accelerate"):
        rc.emit(
            fact,
            True,
            loader.where,
            f"{loader.extra.get('sharded_by', 'accelerator.prepare()')} shards this DataLoader "
            "across ranks",
        )
        return
    sampler = loader.kwargs.get("sampler")
    batch_sampler = loader.kwargs.get("batch_sampler")
    for smp in (sampler, batch_sampler):
        if smp is not None and smp.kind == V.DSAMPLER:
            so = rc.obj(smp)
            rc.emit(
                fact,
                True,
                so.where if so else loader.where,
                "DataLoader uses a DistributedSampler",
            )
            return
    dataset = rc.obj(loader.kwargs.get("dataset"))
    source = _sharded_source(rc, dataset)
    if source is not None:
        how = (
            "dataset split by rank before loading"
            if source is dataset
            else f"dataset built on data split by rank at {source.where}"
        )
        rc.emit(fact, True, source.where, how)
        return
    if rc.walk.rank_slices:
        rc.emit(fact, True, rc.walk.rank_slices[0], "data sliced by rank (data[rank::world_size])")
        return
    info = rc._class_of(dataset)
    if info is not None and any(apis.last(b) == "IterableDataset" for b in info.external_bases()):
        if _mentions_rank(info.node):
            rc.emit(
                fact,
                True,
                dataset.where if dataset else loader.where,
                f"{info.name} splits its stream by rank",
            )
        elif rc.a.distributed:
            rc.emit(
                fact,
                False,
                loader.where,
                f"IterableDataset {info.name} does not split by rank: every rank streams the same data",
            )
        return
    if sampler is not None and sampler.const is not None:
        so = rc.obj(sampler)
        sinfo = rc._class_of(so)
        if sinfo is not None and _mentions_rank(sinfo.node):
            rc.emit(
                fact,
                True,
                so.where if so else loader.where,
                f"sampler {sinfo.name} splits indices by rank",
            )
            return
        if sampler.kind in (V.SAMPLER, None) and not (sampler.known and sampler.const is None):
            if (sampler.kind is None and V.UNBOUND in sampler.taint) or (
                sinfo is None and sampler.kind is None
            ):
                rc.warn(
                    f"{loader.where}: DataLoader sampler comes from elsewhere; sharding not decided"
                )
                return
            if (
                sinfo is None
                and sampler.kind == V.SAMPLER
                and so is not None
                and "local:" not in so.canon
            ):
                pass  # a stock non-distributed sampler: falls through to False
            elif sinfo is not None:
                return
    if batch_sampler is not None and not (batch_sampler.known and batch_sampler.const is None):
        return
    if not rc.a.distributed:
        return
    shuffle = const(loader.kwargs.get("shuffle"))
    if shuffle is not True and not _map_style(rc, dataset):
        # An IterableDataset from code the scan cannot see may split itself by rank
        # (shuffle=True would be an error for one, so that case is decided).
        rc.warn(
            f"{loader.where}: dataset built elsewhere; whether it splits by rank is not decided"
        )
        return
    split = _model_parallel(rc)
    if split is not None:
        rc.warn(
            f"{split.where}: {apis.last(split.name)}() sets up model parallelism; the ranks of "
            "one tensor or pipeline group read the same batches, so an unsharded DataLoader "
            f"({loader.where}) may be right; sharding across data-parallel groups not decided"
        )
        return
    fed = _fed_each_step(rc, loader, dataset)
    if fed:
        sharded = [o for o in fed if _shards(o)]
        if len(sharded) == len(fed):
            rc.emit(
                fact,
                True,
                loader.where,
                f"this DataLoader is rebuilt each step from what the rank computed on batches "
                f"of the DataLoader at {sharded[0].where}, which is sharded across ranks",
            )
        else:
            rc.warn(
                f"{loader.where}: DataLoader rebuilt each step from batches of the DataLoader at "
                f"{fed[0].where}; whether that one is sharded is not decided"
            )
        return
    if loader.ref not in rc.a.training_loaders:
        # The training loop was not seen reading this loader: a framework it is handed to
        # (a Trainer built from a config, ``fit(model, loader)``) may put its own
        # distributed sampler in (Lightning's Trainer does).
        handed = _handed_on(rc, loader)
        if handed:
            rc.warn(
                f"{loader.where}: DataLoader handed to {handed[0].name or 'a call'}() at "
                f"{handed[0].where}, code the scan does not read, which may shard it; "
                "sharding not decided"
            )
            return
    how = "DataLoader(shuffle=True)" if shuffle is True else "DataLoader"
    rc.emit(
        fact,
        False,
        loader.where,
        f"{how} without a DistributedSampler: every rank reads the same batches ({loader.where})",
    )


def _shards(loader: Obj) -> bool:
    if loader.extra.get("accelerate"):
        return True
    return any(
        v is not None and v.kind == V.DSAMPLER
        for v in (loader.kwargs.get("sampler"), loader.kwargs.get("batch_sampler"))
    )


def _fed_each_step(rc: RuleContext, loader: Obj, dataset: Obj | None) -> list[Obj]:
    """A DataLoader built inside the training loop over a dataset built there too (PPO's
    rollouts, a replay buffer) holds what this rank computed in the step: its sharding is that
    of the DataLoaders the enclosing loop reads. Those loaders, innermost loop first; empty
    when the loader is not such a per-step buffer."""
    b = rc.a.main_backward
    made = rc.a.by_seq.get(loader.seq)
    data = rc.a.by_seq.get(dataset.seq) if dataset is not None else None
    if b is None or made is None or data is None:
        return []
    for loop in reversed(b.loops()):
        if loop not in made.ctx or loop not in data.ctx:
            continue
        refs = set(rc.a.loop_loaders(loop))
        for e in rc.a.events:  # batches taken in the loop (``next(endless_loader)``)
            if e.result is not None and loop in e.ctx:
                refs |= batch_refs(e.result)
        refs.discard(loader.ref)
        objs = [o for o in (rc.walk.objects.get(r) for r in sorted(refs)) if o is not None]
        if objs:
            return objs
    return []


def _handed_on(rc: RuleContext, loader: Obj) -> list[Event]:
    """Calls into code the scan does not read that take the loader: a library's function, or a
    method of an object the scan cannot name (``trainer.fit(model, loader)`` on a trainer built
    from a config)."""
    out = []
    for e in rc.a.calls():
        if e.name.startswith("local:"):
            continue
        if e.name.startswith(".") and e.recv is not None and e.recv.kind is not None:
            continue  # a method of an object the scan knows (a list's append, a model's call)
        if not e.name.startswith(".") and e.name.split(".")[0] in KNOWN_HEADS:
            continue
        if any(v.ref == loader.ref for v in [*e.args, *e.kwargs.values()]):
            out.append(e)
    return out


# Calls that split the model over ranks (Megatron / fairscale model-parallel groups, PyTorch
# tensor parallelism, DeepSpeed pipelines): ranks of one model-parallel group must see the same
# data, only data-parallel groups read different shards.
_MODEL_PARALLEL = {
    "initialize_model_parallel",
    "parallelize_module",
    "PipelineModule",
    "ColwiseParallel",
    "RowwiseParallel",
    "SequenceParallel",
}


def _model_parallel(rc: RuleContext) -> Event | None:
    for e in rc.a.calls():
        if apis.last(e.name) in _MODEL_PARALLEL:
            return e
        if apis.last(e.name) == "init_device_mesh" and len(e.args) > 1:
            shape = e.args[1]
            if shape.items and len(shape.items) > 1:  # a 2-D mesh: data x model parallel
                return e
    return None


_RANDOM_DRAWS = {"randint", "randperm", "choice", "permutation", "integers", "sample"}


def _hand_batches(rc: RuleContext) -> None:
    """Batches cut by hand (nanoGPT's ``get_batch``): per rank when the read position derives
    from the rank, or when random positions come from a seed offset by the rank."""
    fact = "uses_distributed_sampler"
    b = rc.a.main_backward
    if b is None:
        return
    taint = rc.a.loss_of(b).taint
    if V.FWD in taint and V.RANK in taint:
        rc.emit(
            fact,
            True,
            b.where,
            "each rank reads its own part: the batch offset derives from the rank",
        )
        return
    if V.DATA not in taint:
        return
    loops = b.loops()
    draws = [
        e
        for e in rc.a.calls()
        if apis.last(e.name) in _RANDOM_DRAWS and loops and any(loop in e.ctx for loop in loops)
    ]
    if not draws:
        return
    per_rank = _seeds_per_rank(rc)
    if per_rank is True:
        rc.emit(fact, True, draws[0].where, "random batches drawn from a seed offset by the rank")
    elif per_rank is False:
        rc.emit(
            fact,
            False,
            draws[0].where,
            f"random batches ({draws[0].where}) from the same seed on every rank: "
            "every rank draws the same batches",
        )


def _seeds_per_rank(rc: RuleContext) -> bool | None:
    """True: some seed is offset by the rank; False: every seed is the same constant on every
    rank; None: not decided (no seed, or one a command line decides)."""
    seeds = _seed_calls(rc)
    if not seeds:
        return None
    if any(any(V.RANK in v.taint for v in [*e.args, *e.kwargs.values()]) for e in seeds):
        return True
    if all(cli_switched(e) for e in seeds):
        return None
    if all(
        any(v.known or V.ARGDEFAULT in v.taint for v in [*e.args, *e.kwargs.values()])
        for e in seeds
    ):
        return False
    return None


def _sharded_source(rc: RuleContext, dataset: Obj | None, depth: int = 0) -> Obj | None:
    """The dataset split by rank (``shard(index=rank)``, ``split_dataset_by_node``) that the
    loader's dataset is, or that it was built on: a project dataset class constructed around a
    rank-split dataset (a packing or tokenising wrapper) reads that rank's part only."""
    if dataset is None or depth > 4:
        return None
    if dataset.kind != V.DATASET and not dataset.canon.startswith("local:"):
        return None
    if dataset.extra.get("sharded"):
        return dataset
    for arg in [*dataset.args, *dataset.kwargs.values()]:
        found = _sharded_source(rc, rc.obj(arg), depth + 1)
        if found is not None:
            return found
    return None


def _map_style(rc: RuleContext, dataset: Obj | None) -> bool:
    """A dataset indexed by the DataLoader's sampler (not a self-iterating stream)."""
    if dataset is None:
        return False
    info = rc._class_of(dataset)
    if info is not None:
        return not any(apis.last(b) == "IterableDataset" for b in info.external_bases())
    name = apis.last(dataset.canon)
    return name in (
        "TensorDataset",
        "ImageFolder",
        "DatasetFolder",
        "Subset",
        "ConcatDataset",
        "load_dataset",
        "load_from_disk",
    ) or dataset.canon.startswith("torchvision.datasets")
