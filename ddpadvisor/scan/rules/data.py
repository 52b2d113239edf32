"""What each rank reads: sampler, set_epoch, seeds and augmentation (kb/causes/data.yaml)."""

from __future__ import annotations

import ast

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.analysis import text
from ddpadvisor.scan.context import Event
from ddpadvisor.scan.library import hf_trainer, lightning
from ddpadvisor.scan.rules.base import (
    RuleContext,
    cli_switched,
    const,
    kw_node,
)
from ddpadvisor.scan.rules.registry import ANY_EXCERPT, not_in_excerpt, rule
from ddpadvisor.scan.values import Obj


def _mentions_rank(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        name = (
            sub.id
            if isinstance(sub, ast.Name)
            else sub.attr
            if isinstance(sub, ast.Attribute)
            else None
        )
        if name and (
            name
            in (
                "rank",
                "local_rank",
                "get_rank",
                "world_size",
                "num_replicas",
                "process_index",
                "get_world_size",
            )
        ):
            return True
    return False


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
    if rc.hf:
        tr = rc.trainer()
        info = rc._class_of(tr)
        own = hf_trainer.train_loader(info) if info is not None else None
        if own is not None:
            rc.emit(fact, own.value, own.where, own.why)
        elif info is None or info.find_method("get_train_dataloader") is None:
            rc.emit(
                fact,
                True,
                tr.where if tr else "",
                "HF Trainer shards its DataLoader per process (accelerator.prepare)",
            )
        else:
            rc.warn(
                f"{tr.where if tr else rc.label}: get_train_dataloader is overridden; "
                "whether it shards the data is not decided"
            )
        return
    if rc.pl:
        _lightning_sharding(rc)
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
    if dataset is not None and dataset.extra.get("sharded"):
        rc.emit(fact, True, dataset.where, "dataset split by rank before loading")
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
    how = "DataLoader(shuffle=True)" if shuffle is True else "DataLoader"
    rc.emit(
        fact,
        False,
        loader.where,
        f"{how} without a DistributedSampler: every rank reads the same batches ({loader.where})",
    )


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


def _seed_calls(rc: RuleContext) -> list[Event]:
    return [
        e
        for e in rc.a.calls()
        if apis.last(e.name)
        in ("manual_seed", "seed", "set_seed", "seed_everything", "manual_seed_all")
        and not (e.recv is not None and e.recv.kind is not None and e.recv.kind not in ("symbol",))
    ]


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


def _lightning_sharding(rc: RuleContext) -> None:
    fact = "uses_distributed_sampler"
    val, where = rc.pl_arg("use_distributed_sampler", lightning.DEFAULTS["use_distributed_sampler"])
    if val is None:
        return
    if const(val) is not False:
        rc.emit(
            fact, True, where, "Lightning replaces the training sampler with a DistributedSampler"
        )
        return
    tr = rc.pl_trainer()
    loader = rc.obj(tr.extra.get("train_loader")) if tr is not None else None
    if loader is None or loader.kind != V.LOADER:
        rc.warn(f"{where}: use_distributed_sampler=False and the training DataLoader is not read")
        return
    sampler = rc.obj(loader.kwargs.get("sampler")) or rc.obj(loader.kwargs.get("batch_sampler"))
    if sampler is not None and sampler.kind == V.DSAMPLER:
        rc.emit(fact, True, sampler.where, "the module's own DistributedSampler shards the data")
    elif "sampler" not in loader.kwargs and "batch_sampler" not in loader.kwargs:
        rc.emit(
            fact,
            False,
            loader.where,
            "use_distributed_sampler=False and a DataLoader without a sampler: every rank "
            "reads the whole dataset",
        )


@rule(
    "Whether the training sampler's epoch is set on every pass over the loader.",
    facts={
        "calls_set_epoch": not_in_excerpt(False),
    },
)
def set_epoch(rc: RuleContext) -> None:
    fact = "calls_set_epoch"
    if rc.pl:
        tr = rc.pl_trainer()
        rc.emit(
            fact,
            True,
            tr.where if tr else "",
            "Lightning's fit loop calls set_epoch on the training sampler every epoch",
        )
        return
    if rc.hf:
        tr = rc.trainer()
        info = rc._class_of(tr)
        if info is not None and "get_train_dataloader" in hf_trainer.loop_overrides(info):
            return  # the subclass's own loader: the Trainer's epoch handling may not reach it
        rc.emit(
            fact,
            True,
            tr.where if tr else "",
            "HF Trainer calls set_epoch on its sampler each epoch",
        )
        return
    loader = rc.training_loader()
    if loader is not None and loader.extra.get("accelerate"):
        rc.emit(
            fact,
            True,
            loader.where,
            f"the DataLoader {loader.extra.get('sharded_by', 'accelerator.prepare()')} returns "
            "sets the sampler epoch itself",
        )
        return
    samplers = rc.a.objs(V.DSAMPLER) or _own_distributed_samplers(rc)
    if not samplers:
        return
    sampler = samplers[0]
    if loader is not None:
        for key in ("sampler", "batch_sampler"):
            s = rc.obj(loader.kwargs.get(key))
            if s is not None and s.kind == V.DSAMPLER:
                sampler = s
    shuffle = sampler.kwargs.get("shuffle")
    if shuffle is not None and shuffle.known and shuffle.const is False:
        rc.warn(f"{sampler.where}: DistributedSampler(shuffle=False): set_epoch has no effect")
        return
    # A call on another sampler the scan knows (the validation one) does not count; one on
    # a receiver it cannot trace (``loader.sampler``, a helper's argument) may be this one.
    others = {
        o.ref
        for o in rc.a.objs(V.DSAMPLER, V.SAMPLER)
        if o.ref != sampler.ref and o.ref not in _training_samplers(rc)
    }
    calls = [
        e
        for e in rc.a.calls("set_epoch")
        if not (e.recv is not None and e.recv.ref is not None and e.recv.ref in others)
    ]
    in_loop = [e for e in calls if e.loops()]
    if in_loop:
        rc.emit(fact, True, in_loop[0].where, f"set_epoch called every epoch ({in_loop[0].where})")
        return
    b = rc.a.main_backward
    if b is None:
        return
    if loader is None or loader.ref not in rc.a.training_loaders:
        _loop_not_read(rc, sampler, loader, b)
        return
    epoch_loop, found = rc.a.epoch_loop(loader.ref)
    if not found:
        _loop_not_read(rc, sampler, loader, b)
        return
    if epoch_loop is None:
        rc.warn(f"{sampler.where}: the data is read for one epoch only; set_epoch not needed")
        return
    hidden = rc._opaque_touches({sampler.ref, loader.ref}, epoch_loop)
    if hidden:
        rc.warn(
            f"{hidden[0].where}: the sampler is handed to {hidden[0].name}(); set_epoch not decided"
        )
        return
    if calls:
        rc.emit(
            fact,
            False,
            calls[0].where,
            f"set_epoch called once, outside the epoch loop at {epoch_loop.where}: same order every epoch",
        )
        return
    rc.emit(
        fact,
        False,
        epoch_loop.where,
        f"epoch loop never calls sampler.set_epoch(epoch): every epoch replays the same order "
        f"(sampler at {sampler.where})",
    )


def _own_distributed_samplers(rc: RuleContext) -> list[Obj]:
    """The project's own DistributedSampler (a Sampler subclass that splits the indices by
    rank and takes the epoch through its own ``set_epoch``, as torch's does), on the loaders
    the training loop reads: it needs set_epoch every epoch just the same."""
    out: list[Obj] = []
    for ref in _training_samplers(rc):
        so = rc.walk.objects.get(ref)
        info = rc._class_of(so)
        if so is None or info is None or so.kind not in (V.SAMPLER, V.INSTANCE):
            continue
        if info.find_method("set_epoch") is not None and _mentions_rank(info.node):
            out.append(so)
    return out


def _training_samplers(rc: RuleContext) -> set[int]:
    """The samplers of the DataLoaders the training loop reads."""
    out: set[int] = set()
    for ref in rc.a.training_loaders:
        loader = rc.walk.objects.get(ref)
        if loader is None:
            continue
        for key in ("sampler", "batch_sampler"):
            s = rc.obj(loader.kwargs.get(key))
            if s is not None:
                out.add(s.ref)
    return out


def _loop_not_read(rc: RuleContext, sampler: Obj, loader: Obj | None, b: Event) -> None:
    """The training loop's batches do not visibly come from the sampler's DataLoader: say
    why set_epoch is not decided (the loader handed to code the scan does not read, or a
    loop whose batches come from elsewhere), never guess."""
    refs: set[int | None] = {sampler.ref}
    refs.update(
        o.ref
        for o in rc.a.objs(V.LOADER)
        if any(rc.obj(o.kwargs.get(k)) is sampler for k in ("sampler", "batch_sampler"))
    )
    hidden = rc._opaque_touches(refs, None)
    if hidden:
        rc.warn(
            f"{hidden[0].where}: the DataLoader is handed to {hidden[0].name}(), which the scan "
            "does not read; which loop reads its batches, and so set_epoch, not decided"
        )
    elif b.loops():
        loop = b.loops()[-1]
        rc.warn(
            f"{loop.where}: the training loop's batches are not traced to the DataLoader with "
            f"the DistributedSampler ({sampler.where}); set_epoch not decided"
        )


@rule(
    "Whether the training data draws random augmentation.",
    facts={
        "uses_random_augmentation": not_in_excerpt(False),
    },
)
def augmentation(rc: RuleContext) -> None:
    a = rc.a
    for e in a.calls():
        if apis.is_random_transform(e.name) and (
            e.name.startswith(("torchvision", "transforms", "T.", "v2", "A.", "albumentations"))
            or "transforms" in e.name
        ):
            rc.emit(
                "uses_random_augmentation",
                True,
                e.where,
                f"random augmentation {apis.last(e.name)} ({e.where})",
            )
            return
        if apis.last(e.name) == "DataCollatorForLanguageModeling":
            mlm = e.kwargs.get("mlm")
            if mlm is None or (mlm.known and mlm.const is True):
                rc.emit(
                    "uses_random_augmentation", True, e.where, "random token masking (mlm=True)"
                )
                return
    for info in rc.walk.classes:
        if info.object_kind() != V.DATASET and not any(
            "Dataset" in b for b in info.external_bases()
        ):
            continue
        for mname in ("__getitem__", "__iter__", "__getitems__"):
            fn = info.methods.get(mname)
            if fn is None:
                continue
            for sub in ast.walk(fn):
                if isinstance(sub, ast.Call):
                    name = text(sub.func)
                    head = name.split(".")[0]
                    if apis.last(name) in apis.RANDOM_CALLS and head in (
                        "torch",
                        "np",
                        "numpy",
                        "random",
                        "rng",
                        "rc",
                    ):
                        where = f"{info.scope.module.label}:{sub.lineno}"
                        rc.emit(
                            "uses_random_augmentation",
                            True,
                            where,
                            f"random draws in {info.name}.{mname} ({where})",
                        )
                        return
    loader = rc.training_loader()
    if loader is None or a.main_backward is None:
        return
    ds = rc.obj(loader.kwargs.get("dataset"))
    ds_info = rc._class_of(ds)
    if ds is not None and (apis.last(ds.canon) == "TensorDataset" or ds_info is not None):
        rc.emit("uses_random_augmentation", False, ds.where, "dataset draws no random augmentation")


@rule(
    "Whether every rank seeds its random generators alike.",
    facts={
        "rank_seeds_identical": ANY_EXCERPT,
    },
)
def seeding(rc: RuleContext) -> None:
    seeds = _seed_calls(rc)
    if not seeds:
        return
    ranked = [e for e in seeds if any(V.RANK in v.taint for v in [*e.args, *e.kwargs.values()])]
    if ranked:
        rc.emit(
            "rank_seeds_identical",
            False,
            ranked[0].where,
            f"seed offset by rank ({ranked[0].where})",
        )
        return
    if all(cli_switched(e) for e in seeds):
        e = seeds[0]
        rc.warn(f"{e.where}: seeding runs only when a command-line option asks for it")
        return
    if all(
        any(v.known or V.ARGDEFAULT in v.taint for v in [*e.args, *e.kwargs.values()])
        for e in seeds
    ):
        e = seeds[0]
        rc.emit("rank_seeds_identical", True, e.where, f"same seed on every rank ({e.where})")
