"""From the recovered structure to fact values, each with the line that shows it.

One method per group of facts. A rule emits a :class:`Finding` only when the code decides
the fact; when it cannot, it emits nothing (the fact stays unknown) and may add a warning
that says why. Findings for a fact are ordered so that the decisive one comes last.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable
from dataclasses import dataclass

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.analysis import Analysis, eval_at, recv_text, text
from ddpadvisor.scan.context import CondCtx, Event, FuncCtx, LoopCtx, common_prefix
from ddpadvisor.scan.source import dotted
from ddpadvisor.scan.values import Obj, Val
from ddpadvisor.scan.walker import ClassInfo, FuncRef, WalkResult

Value = bool | int | float | str

# A value known only as a command-line default (``parser.add_argument("--accum", default=4)``)
# is not reported as a fact: scanned facts outrank the user's own answers and --set, so a
# run launched with other flags could never be corrected. Flip to report defaults anyway.
CLI_DEFAULTS_ARE_FACTS = False


@dataclass(frozen=True)
class Finding:
    fact: str
    value: Value
    where: str
    detail: str


def _const(val: Val | None) -> object | None:
    return val.const if val is not None and val.known else None


def _num(val: Val | None) -> float | None:
    c = _const(val)
    if isinstance(c, bool) or not isinstance(c, (int, float)):
        return None
    return float(c)


def _is_rank_cond(c: object) -> bool:
    return isinstance(c, CondCtx) and V.RANK in c.taint


def _lines_at(taint: frozenset[str], prefix: str) -> list[str]:
    out = [t.split("@", 1)[1] for t in taint if t.startswith(prefix + "@")]

    def key(w: str) -> tuple[str, int]:
        f, _, line = w.rpartition(":")
        return f, int(line) if line.isdigit() else 0

    return sorted(out, key=key)


class Rules:
    def __init__(self, walk: WalkResult, strict: bool = False) -> None:
        self.walk = walk
        self.a = Analysis(walk)
        self.findings: list[Finding] = []
        self.warnings: list[str] = []
        self.strict = strict or bool(os.environ.get("DDPADVISOR_DEBUG"))
        self.label = walk.sources.main.label
        self._by_class: dict[int, list[tuple[ast.Call, str]]] | None = None

    # ------------------------------------------------------------------ plumbing
    def emit(self, fact: str, value: Value, where: str, detail: str) -> None:
        if not where and self.hf:
            tr = self.trainer()
            where = tr.where if tr is not None else ""
        self.findings.append(Finding(fact, value, where or self.label, detail))

    def cli_default(self, fact: str, value: Value, where: str) -> None:
        """A value that is only a command-line default stays unknown: a scanned fact beats
        the user's own answer, so a guess here could not be corrected."""
        shown = str(value).lower() if isinstance(value, bool) else value
        if CLI_DEFAULTS_ARE_FACTS:
            self.emit(fact, value, where, f"{fact}={shown} (command-line default)")
            return
        self.warn(
            f"{where}: {fact} is {shown} only by command-line default; "
            f"if the run used that, pass --set {fact}={shown}"
        )

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def run(self) -> None:
        rules: list[Callable[[], None]] = [
            self.framework_note,
            self.data_sharding,
            self.sampler_seed,
            self.set_epoch,
            self.accumulation,
            self.no_sync,
            self.forward_route,
            self.extra_backward,
            self.loss_scaling,
            self.precision,
            self.clipping,
            self.compile,
            self.lora_and_wrap_order,
            self.rank_conditional,
            self.sharding_framework,
            self.batchnorm,
            self.broadcast_buffers,
            self.lr_scaling,
            self.schedule,
            self.optimizer,
            self.batch_size,
            self.loss_shape,
            self.logging,
            self.augmentation,
            self.seeding,
            self.loop_kind,
            self.comm_hook,
        ]
        if self.a.main_backward is None and self.a.framework is None:
            self.warn(
                f"{self.label}: no backward() call and no HF Trainer found; "
                "only facts about the setup were read"
            )
        for rule in rules:
            try:
                rule()
            except Exception as exc:  # one confused rule must not lose the others' findings
                if self.strict:
                    raise
                self.warn(
                    f"{self.label}: scanner rule {rule.__name__} gave up ({type(exc).__name__})"
                )
        if self.walk.truncated:
            self.warn(f"{self.label}: very large script; the scan stopped early and may miss facts")

    # ------------------------------------------------------------------ helpers
    def obj(self, val: Val | None) -> Obj | None:
        if val is None or val.ref is None:
            return None
        return self.walk.objects.get(val.ref)

    @property
    def hf(self) -> bool:
        return self.a.framework == "hf_trainer"

    @property
    def acc(self) -> bool:
        return self.a.framework == "accelerate"

    def trainer(self) -> Obj | None:
        found = self.a.objs(V.TRAINER)
        return found[0] if found else None

    def training_args(self) -> Obj | None:
        tr = self.trainer()
        if tr is not None:
            args = self.obj(tr.kwargs.get("args"))
            if args is not None and args.kind in (V.TRAINING_ARGS, V.INSTANCE):
                return args
        found = self.a.objs(V.TRAINING_ARGS)
        return found[0] if found else None

    def hf_arg(self, name: str) -> tuple[Val | None, str]:
        """A TrainingArguments field: (value or None when set on the command line, where)."""
        args = self.training_args()
        if args is None:
            return None, ""
        if name in args.kwargs:
            val = args.kwargs[name]
            if V.ARGDEFAULT in val.taint or V.UNBOUND in val.taint:
                return None, args.where  # the script passes its own command-line value
            return val, args.where
        if args.extra.get("from_cli"):
            return None, args.where  # set on the command line: library defaults are guesses
        return Val(const=None, taint=frozenset({"default"})), args.where

    def training_loader(self) -> Obj | None:
        b = self.a.main_backward
        if b is not None:
            for loop in reversed(b.loops()):
                it = loop.iter
                if it.kind == "enumerate" and it.items:
                    it = it.items[0]
                if it.kind == V.LOADER and it.ref is not None:
                    return self.walk.objects.get(it.ref)
            for e in self.a.events:
                if (
                    e.result is not None
                    and e.result.kind == "batch"
                    and e.result.ref
                    and any(loop in e.ctx for loop in b.loops())
                ):
                    return self.walk.objects.get(e.result.ref)
        loaders = [o for o in self.a.objs(V.LOADER) if not self._is_eval_loader(o)]
        return loaders[0] if len(loaders) == 1 else None

    @staticmethod
    def _is_eval_loader(o: Obj) -> bool:
        call = o.node
        parent_text = text(call, 200).lower()
        return (
            any(w in parent_text for w in ("val_", "valid", "eval", "test_"))
            and "train" not in parent_text
        )

    def _class_of(self, o: Obj | None) -> ClassInfo | None:
        if o is None:
            return None
        info = o.extra.get("class")
        return info if isinstance(info, ClassInfo) else None

    @staticmethod
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

    # ------------------------------------------------------------------ framework
    def framework_note(self) -> None:
        if self.hf:
            tr = self.trainer()
            self.warn(
                f"{tr.where if tr else self.label}: HF Trainer script: data sharding, set_epoch, "
                "accumulation and gradient sync are handled by the framework"
            )
        elif self.acc:
            acc = self.a.objs(V.ACCELERATOR)[0]
            self.warn(
                f"{acc.where}: accelerate script: accelerator.prepare() shards the data and "
                "accelerator.accumulate() handles gradient sync"
            )

    # ------------------------------------------------------------------ data
    def data_sharding(self) -> None:
        fact = "uses_distributed_sampler"
        if self.hf:
            tr = self.trainer()
            self.emit(
                fact,
                True,
                tr.where if tr else "",
                "HF Trainer shards the data with a DistributedSampler",
            )
            return
        loader = self.training_loader()
        if loader is None:
            if self.walk.rank_slices:
                self.emit(
                    fact,
                    True,
                    self.walk.rank_slices[0],
                    "data sliced by rank (data[rank::world_size])",
                )
            elif self.a.distributed and not self.a.objs(V.LOADER) and self.a.objs(V.DSAMPLER):
                s = self.a.objs(V.DSAMPLER)[0]
                self.emit(fact, True, s.where, "DistributedSampler in use")
            return
        if loader.extra.get("accelerate"):
            self.emit(
                fact,
                True,
                loader.where,
                "accelerator.prepare() shards this DataLoader across ranks",
            )
            return
        sampler = loader.kwargs.get("sampler")
        batch_sampler = loader.kwargs.get("batch_sampler")
        for smp in (sampler, batch_sampler):
            if smp is not None and smp.kind == V.DSAMPLER:
                so = self.obj(smp)
                self.emit(
                    fact,
                    True,
                    so.where if so else loader.where,
                    "DataLoader uses a DistributedSampler",
                )
                return
        dataset = self.obj(loader.kwargs.get("dataset"))
        if dataset is not None and dataset.extra.get("sharded"):
            self.emit(fact, True, dataset.where, "dataset split by rank before loading")
            return
        if self.walk.rank_slices:
            self.emit(
                fact, True, self.walk.rank_slices[0], "data sliced by rank (data[rank::world_size])"
            )
            return
        info = self._class_of(dataset)
        if info is not None and any(
            apis.last(b) == "IterableDataset" for b in info.external_bases()
        ):
            if self._mentions_rank(info.node):
                self.emit(
                    fact,
                    True,
                    dataset.where if dataset else loader.where,
                    f"{info.name} splits its stream by rank",
                )
            elif self.a.distributed:
                self.emit(
                    fact,
                    False,
                    loader.where,
                    f"IterableDataset {info.name} does not split by rank: every rank streams the same data",
                )
            return
        if sampler is not None and sampler.const is not None:
            so = self.obj(sampler)
            sinfo = self._class_of(so)
            if sinfo is not None and self._mentions_rank(sinfo.node):
                self.emit(
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
                    self.warn(
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
        if not self.a.distributed:
            return
        shuffle = _const(loader.kwargs.get("shuffle"))
        if shuffle is not True and not self._map_style(dataset):
            # An IterableDataset from code the scan cannot see may split itself by rank
            # (shuffle=True would be an error for one, so that case is decided).
            self.warn(
                f"{loader.where}: dataset built elsewhere; whether it splits by rank is not decided"
            )
            return
        how = "DataLoader(shuffle=True)" if shuffle is True else "DataLoader"
        self.emit(
            fact,
            False,
            loader.where,
            f"{how} without a DistributedSampler: every rank reads the same batches ({loader.where})",
        )

    def _map_style(self, dataset: Obj | None) -> bool:
        """A dataset indexed by the DataLoader's sampler (not a self-iterating stream)."""
        if dataset is None:
            return False
        info = self._class_of(dataset)
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

    def _opaque_touches(self, refs: set[int | None], loop: LoopCtx | None) -> list[Event]:
        """Calls into code the scan cannot read that receive one of these objects."""
        out = []
        for e in self.a.calls():
            if loop is not None and loop not in e.ctx:
                continue
            head = e.name.split(".")[0]
            if not e.name or e.name.startswith(("local:", ".")) or head in _KNOWN_HEADS:
                continue
            if any(v.ref in refs for v in [*e.args, *e.kwargs.values()] if v.ref is not None):
                out.append(e)
        return out

    def sampler_seed(self) -> None:
        fact = "sampler_seed_rank_dependent"
        for s in self.a.objs(V.DSAMPLER):
            seed = s.kwargs.get("seed")
            if seed is None:
                self.emit(
                    fact, False, s.where, "DistributedSampler uses the default seed 0 on every rank"
                )
            elif V.RANK in seed.taint:
                self.emit(
                    fact,
                    True,
                    s.where,
                    f"DistributedSampler seed depends on the rank ({text(s.node and _kw_node(s.node, 'seed'))}): shards overlap",
                )
            elif V.UNBOUND in seed.taint:
                self.warn(f"{s.where}: DistributedSampler seed comes from a parameter; not decided")
            else:
                self.emit(fact, False, s.where, "DistributedSampler seed is the same on every rank")
        self._sort_fault(fact, True)

    def set_epoch(self) -> None:
        fact = "calls_set_epoch"
        if self.hf:
            tr = self.trainer()
            self.emit(
                fact,
                True,
                tr.where if tr else "",
                "HF Trainer calls set_epoch on its sampler each epoch",
            )
            return
        loader = self.training_loader()
        if loader is not None and loader.extra.get("accelerate"):
            self.emit(
                fact,
                True,
                loader.where,
                "accelerate's prepared DataLoader sets the sampler epoch itself",
            )
            return
        samplers = self.a.objs(V.DSAMPLER)
        if not samplers:
            return
        sampler = samplers[0]
        if loader is not None:
            for key in ("sampler", "batch_sampler"):
                s = self.obj(loader.kwargs.get(key))
                if s is not None and s.kind == V.DSAMPLER:
                    sampler = s
        shuffle = sampler.kwargs.get("shuffle")
        if shuffle is not None and shuffle.known and shuffle.const is False:
            self.warn(
                f"{sampler.where}: DistributedSampler(shuffle=False): set_epoch has no effect"
            )
            return
        calls = [e for e in self.a.calls("set_epoch")]
        in_loop = [e for e in calls if e.loops()]
        if in_loop:
            self.emit(
                fact, True, in_loop[0].where, f"set_epoch called every epoch ({in_loop[0].where})"
            )
            return
        b = self.a.main_backward
        epoch_loop = self._epoch_loop()
        if epoch_loop is None:
            if b is not None and len(b.loops()) <= 1:
                self.warn(
                    f"{sampler.where}: the data is read for one epoch only; set_epoch not needed"
                )
            return
        hidden = self._opaque_touches({sampler.ref, loader.ref if loader else None}, epoch_loop)
        if hidden:
            self.warn(
                f"{hidden[0].where}: the sampler is handed to {hidden[0].name}(); set_epoch not decided"
            )
            return
        if calls:
            self.emit(
                fact,
                False,
                calls[0].where,
                f"set_epoch called once, outside the epoch loop at {epoch_loop.where}: same order every epoch",
            )
            return
        self.emit(
            fact,
            False,
            epoch_loop.where,
            f"epoch loop never calls sampler.set_epoch(epoch): every epoch replays the same order "
            f"(sampler at {sampler.where})",
        )

    def _epoch_loop(self) -> LoopCtx | None:
        """A loop that encloses the loop over the training DataLoader."""
        b = self.a.main_backward
        if b is None:
            return None
        loops = b.loops()
        for i, loop in enumerate(loops):
            it = (
                loop.iter.items[0]
                if loop.iter.kind == "enumerate" and loop.iter.items
                else loop.iter
            )
            if it.kind == V.LOADER or loop.over_loader:
                return loops[i - 1] if i > 0 else None
        return None

    # ------------------------------------------------------------------ accumulation
    def accumulation(self) -> None:
        a = self.a
        acc = a.accum
        if self.ds is not None:
            self.warn(f"{self.ds.where}: DeepSpeed config decides gradient accumulation")
            return
        if self.hf:
            val, where = self.hf_arg("gradient_accumulation_steps")
            k = _num(val)
            if val is not None and (val.known or "default" in val.taint):
                k_int = int(k) if k is not None else 1
                self.emit(
                    "grad_accum_steps",
                    k_int,
                    where,
                    f"TrainingArguments(gradient_accumulation_steps={k_int})",
                )
                if k_int >= 2:
                    self.emit(
                        "loss_divided_by_accum",
                        True,
                        where,
                        "HF Trainer scales the loss for accumulation",
                    )
            self.emit(
                "zero_grad_every_micro_step",
                False,
                where,
                "HF Trainer zeroes gradients once per optimizer step",
            )
            return
        if acc.style == "framework":
            if acc.k is not None:
                self.emit(
                    "grad_accum_steps",
                    acc.k,
                    acc.k_where,
                    f"accelerate accumulates {acc.k} micro-batches",
                )
            self.emit(
                "loss_divided_by_accum",
                True,
                acc.k_where,
                "accelerator.backward() divides the loss by the accumulation steps",
            )
            self.emit(
                "zero_grad_every_micro_step",
                False,
                acc.k_where,
                "accelerate skips zero_grad() on non-final micro-steps",
            )
            return
        if acc.style == "unknown":
            if acc.backward is not None and a.opt_steps:
                self.warn(
                    f"{acc.backward.where}: accumulation structure not recognised ({acc.reason})"
                )
            return
        b = acc.backward
        assert b is not None
        if acc.style == "none":
            self.emit(
                "grad_accum_steps",
                1,
                acc.step.where if acc.step else b.where,
                "optimizer.step() after every backward (no accumulation)",
            )
        elif acc.k is not None and acc.k_default:
            self.cli_default("grad_accum_steps", acc.k, acc.k_where)
        elif acc.k is not None:
            how = "inner micro-batch loop" if acc.style == "inner" else "step counter modulo"
            self.emit(
                "grad_accum_steps",
                acc.k,
                acc.k_where,
                f"{acc.k} micro-batches per optimizer step ({how})",
            )
        else:
            self.warn(f"{acc.k_where}: gradient accumulation found but its count is not a constant")
        self._loss_divided(acc)
        self._zero_grad(acc)

    def _loss_divided(self, acc: object) -> None:
        a = self.a
        accum = a.accum
        if not accum.accumulates and accum.k is not None:
            return
        if accum.style == "none":
            return
        b = accum.backward
        assert b is not None
        loss = a.loss_of(b)
        if V.FWD not in loss.taint:
            self.warn(
                f"{b.where}: cannot trace the loss back to the model; loss scaling not decided"
            )
            return
        k_names = {text(accum.k_node)} if accum.k_node is not None else set()
        loop = accum.micro_loop
        iter_text = ""
        if loop is not None and isinstance(loop.node, (ast.For, ast.AsyncFor)):
            iter_text = text(loop.node.iter)
        divs = [op for op in loss.ops if op.op == "div"]
        for op in divs:
            t = text(op.expr, 200)
            low = t.lower()
            if (
                (accum.k is not None and op.val.known and _num(op.val) == accum.k)
                or t in k_names
                or any(
                    w in low for w in ("accum", "grad_acc", "gradient_acc", "accumulation", "micro")
                )
                or (iter_text and t == f"len({iter_text})")
            ):
                self.emit(
                    "loss_divided_by_accum", True, b.where, f"loss divided by {t} before backward"
                )
                return
        if V.NORM_GLOBAL in loss.taint:
            self.emit(
                "loss_divided_by_accum",
                True,
                b.where,
                "loss normalised by the token count of the whole window",
            )
            return
        if divs:
            self.warn(
                f"{b.where}: loss divided by {text(divs[0].expr)}; not sure it is the accumulation count"
            )
            return
        k = f"the {accum.k} accumulation steps" if accum.k else "the accumulation count"
        self.emit(
            "loss_divided_by_accum",
            False,
            b.where,
            f"{text(b.node)} on a loss not divided by {k} ({b.where})",
        )

    def _zero_grad(self, acc: object) -> None:
        a = self.a
        accum = a.accum
        win = a.window
        if win is None:
            return
        zs = [z for z in a.zero_grads if a.in_window(z, win)]
        if not zs:
            if not a.zero_grads:
                self.warn(f"{self.label}: no zero_grad() found: gradients may grow without bound")
            elif accum.style == "inner":
                z = a.zero_grads[0]
                self.emit(
                    "zero_grad_every_micro_step",
                    False,
                    z.where,
                    "zero_grad() once per optimizer step, outside the micro-batch loop",
                )
            return
        per_window: list[tuple[Event, int]] = []
        for z in zs:
            runs = [a.runs_at(z, i, win) for i in win.indices]
            if any(r is None for r in runs):
                self.warn(f"{z.where}: cannot tell how often zero_grad() runs")
                return
            per_window.append((z, sum(1 for r in runs if r)))
        windows = max(1, len(win.boundaries))
        every = [z for z, n in per_window if n == len(win.indices) and len(win.indices) > windows]
        if every:
            for z in every:
                self.emit(
                    "zero_grad_every_micro_step",
                    True,
                    z.where,
                    f"zero_grad() inside the accumulation loop ({z.where}): only the last micro-batch survives",
                )
            return
        z = per_window[0][0]
        self.emit(
            "zero_grad_every_micro_step", False, z.where, "zero_grad() once per optimizer step"
        )

    # ------------------------------------------------------------------ no_sync
    def no_sync(self) -> None:
        a = self.a
        if self.hf:
            self.emit(
                "final_micro_step_synced", True, "", "HF Trainer synchronises the last micro-step"
            )
            return
        acc = a.accum
        if acc.style == "framework":
            self.emit(
                "uses_no_sync",
                True,
                acc.k_where,
                "accelerator.accumulate() skips sync on non-final micro-steps",
            )
            self.emit(
                "final_micro_step_synced",
                True,
                acc.k_where,
                "accelerator.accumulate() syncs the final micro-step",
            )
            return
        uses = [e for e in a.calls("no_sync")] + a.flag_events
        uses.sort(key=lambda e: e.seq)
        if uses:
            u = uses[0]
            how = "require_backward_grad_sync" if u.kind == "assign" else "no_sync()"
            self.emit("uses_no_sync", True, u.where, f"{how} used ({u.where})")
        elif (
            a.ddps
            and a.main_backward is not None
            and not any(o.extra.get("deepspeed") for o in a.ddps)
        ):
            self.emit(
                "uses_no_sync", False, a.ddps[0].where, "no no_sync(): every backward all-reduces"
            )
            if a.train_forwards:
                self.emit(
                    "final_micro_step_synced",
                    True,
                    a.train_forwards[0].where,
                    "every micro-step synchronises (no no_sync)",
                )
            return
        else:
            return
        step = acc.step
        if step is not None and any(
            w.kind == V.CTX_NO_SYNC and w.cond is None for w in step.withs()
        ):
            self.emit(
                "final_micro_step_synced",
                False,
                step.where,
                f"optimizer.step() inside no_sync() ({step.where})",
            )
            return
        if acc.tail is not None:
            self._tail_sync(acc.tail)
            return
        win = a.window
        if win is None:
            self.warn(f"{u.where}: no_sync() found but the accumulation window is not understood")
            return
        fwds = (
            [
                f
                for f in a.train_forwards
                if f.result is not None
                and any(t in ("route:ddp", "route:fsdp") for t in f.result.taint)
            ]
            if a.train_forwards
            else []
        )
        fwds = [f for f in fwds if a.in_window(f, win)]
        if not fwds:
            return
        bad: str | None = None
        for i in sorted(win.boundaries):
            ran = False
            for f in fwds:
                runs = a.runs_at(f, i, win)
                if runs is None:
                    self.warn(f"{f.where}: cannot tell which micro-step this forward runs in")
                    return
                if not runs:
                    continue
                ran = True
                synced, where = a.synced_at(f, i, win)
                if synced is None:
                    self.warn(f"{f.where}: cannot evaluate the no_sync condition")
                    return
                if not synced:
                    bad = where or f.where
            if not ran:
                return
        if bad is not None:
            self.emit(
                "final_micro_step_synced",
                False,
                bad,
                f"the micro-step before optimizer.step() runs its forward without gradient sync ({bad})",
            )
        else:
            self.emit(
                "final_micro_step_synced",
                True,
                fwds[0].where,
                "the last micro-step's forward and backward run outside no_sync",
            )

    def _tail_sync(self, tail: Event) -> None:
        """The last micro-step is written after the micro-batch loop: is its forward synced?"""
        a = self.a
        fwd_seqs = [
            int(t.split(":", 1)[1]) for t in a.loss_of(tail).taint if t.startswith("fwdseq:")
        ]
        fwd = a.by_seq.get(fwd_seqs[-1]) if fwd_seqs else None
        if fwd is None:
            return
        blocking = [w for w in fwd.withs() if w.kind == V.CTX_NO_SYNC]
        if any(w.cond is None for w in blocking):
            w = blocking[0]
            self.emit(
                "final_micro_step_synced",
                False,
                f"{w.file}:{w.line}",
                f"the last micro-step also runs under no_sync ({w.file}:{w.line})",
            )
        elif blocking:
            self.warn(f"{fwd.where}: conditional no_sync around the last micro-step; not decided")
        else:
            self.emit(
                "final_micro_step_synced",
                True,
                fwd.where,
                "the last micro-step runs after the no_sync block",
            )

    # ------------------------------------------------------------------ routes
    def forward_route(self) -> None:
        a = self.a
        fact = "forward_bypasses_ddp"
        if self.hf:
            return
        if not a.ddps or a.main_backward is None:
            return
        wrapped = {o.wraps: o for o in a.ddps if o.wraps is not None}
        decided = False
        for b in a.backwards:
            loss = a.loss_of(b)
            if V.FWD not in loss.taint:
                continue
            routes = {t.split(":", 1)[1] for t in loss.taint if t.startswith("route:")}
            fseqs = [int(t.split(":", 1)[1]) for t in loss.taint if t.startswith("fwdseq:")]
            models = {t.split(":", 1)[1] for t in loss.taint if t.startswith("model:")}
            if routes & {V.DDP, V.FSDP}:
                decided = True
                continue
            bypass_at: str | None = None
            for s in fseqs:
                f = a.by_seq.get(s)
                if f is None or f.result is None:
                    continue
                r = {t.split(":", 1)[1] for t in f.result.taint if t.startswith("route:")}
                ref_txt = {t.split(":", 1)[1] for t in f.result.taint if t.startswith("model:")}
                ref = next((int(x) for x in ref_txt if x.isdigit()), None)
                if V.DDP_MODULE in r or (
                    V.MODEL in r and ref in wrapped and f.seq > wrapped[ref].seq
                ):
                    bypass_at = _call_site(f)
            if bypass_at is not None:
                self.emit(
                    fact,
                    True,
                    bypass_at,
                    f"training forward goes around the DDP wrapper ({bypass_at}): gradients are never all-reduced",
                )
                return
            del models
        if decided:
            self.emit(
                fact,
                False,
                a.main_backward.where,
                "training forward goes through the DDP-wrapped model",
            )

    def extra_backward(self) -> None:
        a = self.a
        fact = "extra_backward_through_ddp"
        b = a.main_backward
        if self.hf or b is None or not a.ddps:
            return
        loop = a.step_loop
        if loop is None:
            return
        same = [
            x
            for x in a.backwards
            if loop in x.ctx
            and V.FWD in a.loss_of(x).taint
            and not any(w.kind == V.CTX_NO_SYNC and w.cond is None for w in x.withs())
        ]
        ddp_routed = [x for x in same if "route:ddp" in a.loss_of(x).taint]
        if not ddp_routed:
            return
        first = ddp_routed[0]
        for x in ddp_routed[1:]:
            if _exclusive(first, x):
                continue
            self.emit(
                fact,
                True,
                x.where,
                f"a second backward through the DDP model in the same step ({x.where}), outside no_sync",
            )
            return
        self.emit(fact, False, first.where, "one backward through the DDP model per micro-step")

    def loss_scaling(self) -> None:
        a = self.a
        b = a.main_backward
        if self.hf:
            self.emit("loss_multiplied_by_world_size", False, "", "HF Trainer computes the loss")
            return
        if b is None:
            return
        loss = a.loss_of(b)
        if V.FWD not in loss.taint:
            return
        if V.MUL_WORLD in loss.taint and V.NORM_GLOBAL not in loss.taint:
            where = (_lines_at(loss.taint, "mulworld") or [b.where])[-1]
            self.emit(
                "loss_multiplied_by_world_size",
                True,
                where,
                f"loss multiplied by the world size before backward ({where}); DDP already averages",
            )
            return
        self.emit(
            "loss_multiplied_by_world_size", False, b.where, "loss not rescaled by the world size"
        )

    # ------------------------------------------------------------------ precision
    @property
    def ds(self) -> Obj | None:
        """The DeepSpeed engine, whose JSON config decides precision, accumulation, clipping."""
        return next((o for o in self.a.ddps if o.extra.get("deepspeed")), None)

    def precision(self) -> None:
        a = self.a
        if self.ds is not None:
            self.warn(f"{self.ds.where}: DeepSpeed config decides precision and loss scaling")
            return
        uses_lora = bool(self._lora_evidence())
        casts: list[tuple[str, str]] = []
        for o in a.objs(V.MODEL):
            for dtype, ev in o.extra.get("casts", []):
                casts.append((dtype, ev.where))
            load = o.extra.get("load_dtype")
            if load and load[0] in ("fp16", "bf16"):
                casts.append((load[0], load[1].where))
        for e in a.calls():
            if apis.last(e.name) == "set_default_dtype" and e.args:
                dtype = apis.dtype_of(e.args[0].canon)
                if dtype is not None:
                    casts.insert(0, (dtype, e.where))  # applies to every model built after it
        low = [(d, w) for d, w in casts if d in ("fp16", "bf16")]
        if low and casts[-1][0] in ("fp16", "bf16") and not uses_lora:
            d, where = low[-1]
            self.emit(
                "precision",
                f"pure_{d}",
                where,
                f"model weights cast to {d} ({where}); optimizer steps on them",
            )
            self._scaler(f"pure_{d}")
            return
        if self.hf:
            fp16, where = self.hf_arg("fp16")
            bf16, _ = self.hf_arg("bf16")
            if (
                fp16 is not None
                and bf16 is not None
                and (fp16.known or "default" in fp16.taint)
                and (bf16.known or "default" in bf16.taint)
            ):
                if _const(fp16) is True:
                    self.emit("precision", "fp16_amp", where, "TrainingArguments(fp16=True)")
                    self._scaler("fp16_amp", framework=where)
                elif _const(bf16) is True:
                    self.emit("precision", "bf16_amp", where, "TrainingArguments(bf16=True)")
                    self._scaler("bf16_amp", framework=where)
                else:
                    self.emit("precision", "fp32", where, "TrainingArguments without fp16/bf16")
                    self._scaler("fp32", framework=where)
            return
        if self.acc:
            accel = a.objs(V.ACCELERATOR)[0]
            mp = accel.kwargs.get("mixed_precision")
            if mp is not None and mp.known:
                value = {"fp16": "fp16_amp", "bf16": "bf16_amp", "no": "fp32"}.get(str(mp.const))
                if value:
                    self.emit(
                        "precision",
                        value,
                        accel.where,
                        f"Accelerator(mixed_precision={mp.const!r})",
                    )
                    self._scaler(value, framework=accel.where)
                    return
            elif mp is None:
                self.warn(
                    f"{accel.where}: mixed precision comes from the accelerate config; not decided"
                )
            return  # the accelerate config (or an unreadable flag) decides
        fwds = a.train_forwards
        if not fwds:
            return
        autocasts = [w for f in fwds for w in f.withs() if w.kind == V.CTX_AUTOCAST]
        if autocasts:
            w = autocasts[0]
            dtype, state = w.val.const if isinstance(w.val.const, tuple) else ("unknown", "maybe")
            where = f"{w.file}:{w.line}"
            if state == "off":
                value = "fp32"
            elif state == "maybe" or dtype in ("unknown", None):
                self.warn(f"{where}: autocast dtype or enabled flag decided at run time")
                self._scaler(None)
                return
            else:
                value = {"fp16": "fp16_amp", "bf16": "bf16_amp", "fp32": "fp32"}[dtype]
            self.emit(
                "precision",
                value,
                where,
                f"forward under autocast ({dtype})" if value != "fp32" else "autocast disabled",
            )
            self._scaler(value)
            return
        decorated = self._autocast_decorator()
        if decorated is not None:
            dtype, where = decorated
            if dtype in ("fp16", "bf16"):
                value = f"{dtype}_amp"
                self.emit(
                    "precision", value, where, f"model forward decorated with autocast ({dtype})"
                )
                self._scaler(value)
            else:
                self.warn(f"{where}: forward decorated with autocast of unknown dtype")
            return
        self.emit(
            "precision",
            "fp32",
            fwds[0].where,
            "no autocast and no half-precision cast around the forward",
        )
        self._scaler("fp32")

    def _autocast_decorator(self) -> tuple[str | None, str] | None:
        """``@torch.autocast(...)`` on the forward of a model class built in the script."""
        for o in self.a.objs(V.MODEL):
            info = self._class_of(o)
            found = info.find_method("forward") if info is not None else None
            if found is None:
                continue
            owner, fn = found
            for deco in fn.decorator_list:
                call = deco if isinstance(deco, ast.Call) else None
                name = dotted(call.func if call is not None else deco)
                if apis.last(name) != "autocast":
                    continue
                dtype: str | None = "fp16" if "cuda" in name else "bf16" if "cpu" in name else None
                if call is not None:
                    for kw in call.keywords:
                        if kw.arg == "dtype":
                            dtype = apis.dtype_of(dotted(kw.value))
                        if (
                            kw.arg == "device_type"
                            and isinstance(kw.value, ast.Constant)
                            and dtype is None
                        ):
                            dtype = {"cuda": "fp16", "cpu": "bf16"}.get(str(kw.value.value))
                    if call.args and isinstance(call.args[0], ast.Constant) and dtype is None:
                        dtype = {"cuda": "fp16", "cpu": "bf16"}.get(str(call.args[0].value))
                return dtype, f"{owner.scope.module.label}:{deco.lineno}"
        return None

    def _scaler(self, precision: str | None, framework: str | None = None) -> None:
        if framework is not None:
            self.emit(
                "uses_grad_scaler",
                precision == "fp16_amp",
                framework,
                "the framework uses a GradScaler for fp16 only",
            )
            return
        scalers = self.a.objs(V.SCALER)
        if scalers:
            s = scalers[0]
            enabled = s.kwargs.get("enabled")
            if enabled is not None and enabled.known and V.ARGDEFAULT in enabled.taint:
                self.cli_default("uses_grad_scaler", bool(enabled.const), s.where)
            elif enabled is None or (enabled.known and enabled.const is True):
                self.emit("uses_grad_scaler", True, s.where, "GradScaler created")
            elif enabled.known and enabled.const is False:
                self.emit("uses_grad_scaler", False, s.where, "GradScaler(enabled=False)")
            else:
                self.warn(
                    f"{s.where}: GradScaler enabled at run time ({text(_kw_node(s.node, 'enabled'))})"
                )
            return
        if self.a.main_backward is not None and self.a.opt_steps:
            step = self.a.main_step or self.a.opt_steps[0]
            self.emit(
                "uses_grad_scaler",
                False,
                step.where,
                "no GradScaler: optimizer steps on unscaled gradients",
            )

    # ------------------------------------------------------------------ clipping
    def _clip_events(self) -> list[Event]:
        return [
            e
            for e in self.a.calls()
            if apis.last(e.name)
            in ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm", "clip_grads_with_norm_")
            or e.method in ("clip_grad_norm_", "clip_grad_value_")
        ]

    def clipping(self) -> None:
        a = self.a
        if self.hf:
            val, where = self.hf_arg("max_grad_norm")
            if val is None:
                return
            n = _num(val)
            if "default" in val.taint or "cli" in val.taint:
                self.emit(
                    "uses_grad_clipping",
                    True,
                    where,
                    "HF Trainer clips at max_grad_norm=1.0 by default",
                )
            elif n is not None:
                self.emit(
                    "uses_grad_clipping", n > 0, where, f"TrainingArguments(max_grad_norm={n:g})"
                )
            self.emit("unscale_before_clip", True, where, "HF Trainer unscales before clipping")
            self.emit(
                "clip_inside_no_sync", False, where, "HF Trainer clips after the synchronised step"
            )
            return
        clips = self._clip_events()
        step = a.main_step
        if not clips and self.ds is not None:
            return  # gradient_clipping lives in the DeepSpeed config
        if not clips:
            opt = self._main_optimizer()
            refs = {r for o in a.ddps for r in (o.ref, o.wraps)} | {opt.ref if opt else None}
            hidden = self._opaque_touches(refs, a.step_loop)
            if hidden:
                self.warn(
                    f"{hidden[0].where}: {hidden[0].name}() gets the model or optimizer; clipping not decided"
                )
                return
            if a.main_backward is not None and step is not None:
                self.emit(
                    "uses_grad_clipping",
                    False,
                    step.where,
                    f"no gradient clipping before {text(step.node)}",
                )
            return
        clip = clips[0]
        for c in clip.conds():
            if c.const is not None:  # a command-line switch: only its default is known
                self.cli_default("uses_grad_clipping", bool(c.const) == c.branch, clip.where)
                return
            if c.const is None and not _is_rank_cond(c) and not self._structural(c):
                self.warn(f"{clip.where}: clipping runs only when {text(c.test)}; not decided")
                return
        self.emit("uses_grad_clipping", True, clip.where, f"gradients clipped ({clip.where})")
        self._unscale(clip)
        self._clip_local(clip)

    def _structural(self, c: CondCtx) -> bool:
        """A condition of the accumulation window (micro-step index), not a config switch."""
        if self._is_accum_cond(c):
            return True
        win = self.a.window
        if win is None or win.var is None:
            return False
        from ddpadvisor.scan.evaluate import free_names

        return win.var in free_names(c.test)

    def _is_accum_cond(self, c: CondCtx) -> bool:
        b = self.a.accum.boundary
        return b is not None and c.node is b.node

    def _unscale(self, clip: Event) -> None:
        a = self.a
        if clip.recv is not None and clip.recv.kind == V.ACCELERATOR:
            self.emit(
                "unscale_before_clip",
                True,
                clip.where,
                "accelerator.clip_grad_norm_() unscales first",
            )
            return
        scalers = a.objs(V.SCALER)
        if not scalers:
            return
        enabled = scalers[0].kwargs.get("enabled")
        if (
            enabled is not None
            and enabled.known
            and enabled.const is False
            and V.ARGDEFAULT not in enabled.taint
        ):
            return
        unscales = [e for e in a.calls("unscale_") if e.seq < clip.seq]
        if unscales:
            self.emit(
                "unscale_before_clip", True, unscales[-1].where, "scaler.unscale_() before clipping"
            )
        else:
            self.emit(
                "unscale_before_clip",
                False,
                clip.where,
                f"clip_grad_norm_ on scaled gradients: no scaler.unscale_() before it ({clip.where})",
            )

    def _clip_local(self, clip: Event) -> None:
        a = self.a
        fact = "clip_inside_no_sync"
        sharded = a.fsdps or any(
            o.extra.get("deepspeed") or o.extra.get("zero") for o in a.objects.values()
        )
        if sharded and clip.name.startswith("torch.nn.utils"):
            self.emit(
                fact,
                True,
                clip.where,
                "torch.nn.utils.clip_grad_norm_ on sharded gradients measures a shard's norm",
            )
            return
        if any(w.kind == V.CTX_NO_SYNC and w.cond is None for w in clip.withs()):
            self.emit(
                fact,
                True,
                clip.where,
                f"clip_grad_norm_ inside no_sync() ({clip.where}): ranks clip local gradients",
            )
            return
        win = a.window
        uses_no_sync = bool(a.calls("no_sync") or a.flag_events)
        if win is not None and uses_no_sync and a.in_window(clip, win):
            fwds = [f for f in a.train_forwards if a.in_window(f, win) and f.seq < clip.seq]
            for i in win.indices:
                if a.runs_at(clip, i, win) is not True:
                    continue
                for f in fwds:
                    if a.runs_at(f, i, win) and a.synced_at(f, i, win)[0] is False:
                        self.emit(
                            fact,
                            True,
                            clip.where,
                            f"clip_grad_norm_ runs on micro-steps that skip gradient sync ({clip.where})",
                        )
                        return
        self.emit(fact, False, clip.where, "clipping after the synchronising backward")

    # ------------------------------------------------------------------ compile
    def compile(self) -> None:
        fact = "uses_torch_compile"
        if self.hf:
            val, where = self.hf_arg("torch_compile")
            if val is not None and (val.known or "default" in val.taint):
                self.emit(fact, _const(val) is True, where, "TrainingArguments(torch_compile=…)")
            return
        compiles = [
            e
            for e in self.a.calls()
            if (apis.last(e.name) == "compile" and e.name.startswith("torch"))
            or (e.method == "compile" and e.recv is not None and e.recv.kind in (V.MODEL, V.DDP))
        ]
        if not compiles:
            if self.a.main_backward is not None:
                where = self.a.ddps[0].where if self.a.ddps else self.a.main_backward.where
                self.emit(fact, False, where, "torch.compile is not used")
            return
        c = compiles[0]
        for cond in c.conds():
            if cond.const is not None:  # a command-line switch: only its default is known
                self.cli_default(fact, bool(cond.const) == cond.branch, c.where)
                return
            if cond.const is None and not _is_rank_cond(cond):
                self.warn(f"{c.where}: torch.compile only when {text(cond.test)}; not decided")
                return
        order = ""
        target = c.args[0] if c.args else c.recv
        if target is not None and target.kind == V.DDP:
            order = "; compiles the DDP-wrapped model"
        elif self.a.ddps:
            first = self.a.ddps[0]
            order = (
                "; compiled before DDP wraps it"
                if c.seq < first.seq
                else "; compiled after the DDP wrap"
            )
        self.emit(fact, True, c.where, f"torch.compile used ({c.where}){order}")

    # ------------------------------------------------------------------ wrap order
    def _lora_evidence(self) -> list[str]:
        out = []
        for o in self.a.objects.values():
            if o.extra.get("peft"):
                ev = self.a.by_seq.get(o.extra["peft"])
                out.append(ev.where if ev else o.where)
        for e in self.a.calls():
            n = apis.last(e.name)
            if n in (
                "LoraConfig",
                "get_peft_model",
                "inject_adapter_in_model",
                "prepare_model_for_kbit_training",
            ) or e.name.startswith(("peft.", "loralib.")):
                out.append(e.where)
        built = {id(o.extra.get("class")) for o in self.a.objects.values()}
        for info in self.walk.classes:
            if "lora" in info.name.lower() and info.object_kind() == V.MODEL and id(info) in built:
                out.append(f"{info.scope.module.label}:{info.node.lineno}")
        return out

    def lora_and_wrap_order(self) -> None:
        a = self.a
        lora = self._lora_evidence()
        models = self._trained_models()
        if lora:
            self.emit("uses_lora", True, lora[0], f"LoRA / PEFT adapters ({lora[0]})")
        elif models:
            self.emit("uses_lora", False, models[0].where, "no LoRA / PEFT adapters")
        fact = "module_created_after_wrap"
        if self.hf:
            tr = self.trainer()
            peft_after = [
                o
                for o in a.objects.values()
                if o.extra.get("peft") and tr is not None and o.extra["peft"] > tr.seq
            ]
            if not peft_after:
                self.emit(
                    fact,
                    False,
                    tr.where if tr else "",
                    "the Trainer wraps the model after the adapters exist",
                )
            return
        if not a.ddps:
            return
        for ddp in a.ddps:
            refs = {ddp.ref, ddp.wraps}
            hit = self._created_after(ddp, refs)
            if hit is None and a.main_backward is None:
                return  # training happens in code the scan cannot see
            if hit is not None:
                where, what = hit
                self.emit(
                    fact,
                    True,
                    where,
                    f"{what} after the DDP wrap at {ddp.where}: DDP never syncs it",
                )
                return
        self.emit(
            fact,
            False,
            a.ddps[0].where,
            "no modules or trainable parameters added after the DDP wrap",
        )

    def _created_after(self, ddp: Obj, refs: set[int | None]) -> tuple[str, str] | None:
        a = self.a
        for o in a.objects.values():
            if o.ref in refs:
                for key, what in (
                    ("peft", "adapters injected (get_peft_model)"),
                    ("syncbn", "SyncBatchNorm conversion"),
                ):
                    seq = o.extra.get(key)
                    if seq is not None and seq > ddp.seq:
                        ev = a.by_seq.get(seq)
                        return (ev.where if ev else o.where), what
        for e in a.events:
            if e.seq <= ddp.seq:
                continue
            recv = e.recv
            if e.kind == "call":
                target = (
                    recv
                    if recv is not None and recv.kind in (V.MODEL, V.DDP, V.DDP_MODULE)
                    else (e.args[0] if e.args else None)
                )
                name = e.method or apis.last(e.name)
                if name in apis.INJECTORS and target is not None and target.ref in refs:
                    return e.where, f"{name}()"
                if (
                    name == "setattr"
                    and e.args
                    and e.args[0].ref in refs
                    and len(e.args) > 2
                    and e.args[2].kind in (V.MODEL, "new_param")
                ):
                    return e.where, "module attached with setattr"
                if (
                    name == "requires_grad_"
                    and recv is not None
                    and recv.kind in (V.PARAMS, V.MODEL, V.DDP_MODULE)
                    and recv.ref in refs
                ):
                    arg = e.args[0] if e.args else Val(const=True)
                    if arg.known and arg.const is True:
                        return e.where, "parameters unfrozen (requires_grad_)"
            elif e.kind == "assign" and recv is not None and recv.ref in refs:
                value = e.value
                if (
                    e.attr == "requires_grad"
                    and recv.kind == V.PARAMS
                    and value is not None
                    and value.known
                    and value.const is True
                ):
                    return e.where, "parameters unfrozen (requires_grad = True)"
                if recv.kind in (V.MODEL, V.DDP_MODULE, V.DDP) and value is not None:
                    vobj = self.obj(value)
                    if value.kind == "new_param" or (
                        value.kind == V.MODEL and vobj is not None and vobj.seq > ddp.seq
                    ):
                        return e.where, f"module assigned to {e.target}"
        return None

    def rank_conditional(self) -> None:
        a = self.a
        fact = "rank_conditional_state_change"
        if self.hf:
            self.emit(fact, False, "", "HF Trainer loads checkpoints on every rank")
            return
        if not a.ddps:
            return
        ddp_seq = min(o.seq for o in a.ddps)
        model_refs = {r for o in a.ddps for r in (o.ref, o.wraps)}
        broadcasts = [
            e
            for e in a.calls()
            if apis.last(e.name)
            in ("broadcast", "broadcast_object_list", "_sync_module_states", "sync_module_states")
        ]
        found = False
        for e in a.events:
            if not any(_is_rank_cond(c) for c in e.ctx):
                continue
            recv = e.recv
            name = e.method or apis.last(e.name)
            what = None
            if e.kind == "call" and name in apis.STATE_LOADERS and recv is not None:
                if recv.kind in (V.OPTIMIZER, V.SCALER, V.SCHEDULER):
                    what = f"{recv_text(e) or recv.kind} state loaded on some ranks only"
                elif (
                    recv.kind in (V.MODEL, V.DDP, V.DDP_MODULE)
                    and e.seq > ddp_seq
                    and recv.ref in model_refs
                ):
                    what = "weights loaded on some ranks only, after the DDP wrap"
                elif recv.kind == V.ACCELERATOR:
                    what = "accelerator state loaded on some ranks only"
            elif e.kind == "call" and name in ("set_peft_model_state_dict",) and e.seq > ddp_seq:
                what = "adapter weights loaded on some ranks only"
            elif (
                e.kind == "call"
                and e.seq > ddp_seq
                and name in apis.PARAM_INPLACE
                and recv is not None
                and recv.kind in (V.PARAMS, V.MODEL, V.DDP_MODULE)
                and recv.ref in model_refs
            ):
                what = f"parameters changed in place ({name}) on some ranks only"
            elif (
                e.kind == "call"
                and e.seq > ddp_seq
                and e.name.startswith("torch.nn.init.")
                and e.args
                and e.args[0].kind == V.PARAMS
                and e.args[0].ref in model_refs
            ):
                what = "parameters re-initialised on some ranks only"
            elif (
                e.kind == "assign"
                and e.seq > ddp_seq
                and e.attr == "data"
                and recv is not None
                and recv.kind == V.PARAMS
                and recv.ref in model_refs
            ):
                what = "parameter data replaced on some ranks only"
            if what is None:
                continue
            if any(bc.seq > e.seq for bc in broadcasts):
                self.warn(f"{e.where}: {what}, but a broadcast follows; assumed re-synchronised")
                continue
            self.emit(fact, True, e.where, f"{what} ({e.where}); DDP never re-broadcasts them")
            found = True
        if found or a.main_backward is None:
            return
        self.emit(
            fact,
            False,
            a.ddps[0].where,
            "no state loaded or changed on a subset of ranks after wrapping",
        )

    def _trained_models(self) -> list[Obj]:
        """The models being trained, when every one of them is built in visible code."""
        a = self.a
        if self.hf:
            tr = self.trainer()
            m = self.obj(tr.kwargs.get("model")) if tr else None
            models = [m] if m is not None else []
        else:
            models = [self.walk.objects[o.wraps] for o in a.ddps if o.wraps in self.walk.objects]
        if not models or any(m.canon == "unknown-model" for m in models):
            return []
        return models

    def loop_kind(self) -> None:
        a = self.a
        fact = "hand_written_loop"
        if self.hf:
            tr = self.trainer()
            self.emit(fact, False, tr.where if tr else "", "the HF Trainer runs the training loop")
            return
        if self.acc:
            acc = a.objs(V.ACCELERATOR)[0]
            self.emit(fact, False, acc.where, "the loop runs through accelerate")
            return
        if any(o.extra.get("deepspeed") for o in a.ddps):
            ds = next(o for o in a.ddps if o.extra.get("deepspeed"))
            self.emit(fact, False, ds.where, "the DeepSpeed engine runs backward and step")
            return
        fits = [
            e
            for e in a.calls("fit")
            if "lightning" in e.name.lower()
            or (e.recv is not None and e.recv.kind is None and "trainer" in recv_text(e).lower())
        ]
        if fits:
            self.emit(fact, False, fits[0].where, "a Lightning Trainer runs the loop")
            return
        b = a.main_backward
        if b is not None and (a.ddps or a.fsdps):
            self.emit(fact, True, b.where, f"hand-written loop: backward() at {b.where}")

    def comm_hook(self) -> None:
        a = self.a
        fact = "uses_comm_hook"
        hooks = [e for e in a.calls("register_comm_hook")]
        if hooks:
            self.emit(
                fact, True, hooks[0].where, f"DDP communication hook registered ({hooks[0].where})"
            )
            self._hook_averages(hooks[0])
        manual = [
            e
            for e in a.calls()
            if apis.last(e.name) in ("all_reduce", "all_reduce_coalesced", "reduce")
            and e.args
            and (e.args[0].kind == "grad" or ".grad" in text(e.kw_node("tensor", 0), 200))
        ]
        if manual:
            e = manual[0]
            self.emit(
                fact, True, e.where, f"gradients all-reduced by hand after backward ({e.where})"
            )
            loop = e.loops()[-1] if e.loops() else None
            body = loop.node if loop is not None else e.node
            self._averages_in(body, e.where, "the hand-written gradient all-reduce")
        if hooks or manual:
            self._sort_fault("comm_hook_averages", False)
            return
        if self.hf or self.acc:
            self.emit(fact, False, "", "the framework synchronises gradients")
        elif a.ddps and a.main_backward is not None:
            self.emit(fact, False, a.ddps[0].where, "DDP's own gradient averaging, no hook")

    def _hook_averages(self, reg: Event) -> None:
        hook = reg.kw("hook", 1)
        if hook is None:
            return
        if hook.kind == "symbol" and hook.canon:
            stock = apis.last(hook.canon)
            if stock in (
                "allreduce_hook",
                "fp16_compress_hook",
                "bf16_compress_hook",
                "powerSGD_hook",
                "batched_powerSGD_hook",
            ):
                self.emit(
                    "comm_hook_averages",
                    True,
                    reg.where,
                    f"stock {stock} divides by the world size",
                )
            return
        if isinstance(hook.const, FuncRef):
            fn = hook.const.node
            self._averages_in(
                fn, f"{hook.const.scope.module.label}:{fn.lineno}", f"hook {hook.const.name}()"
            )

    def _averages_in(self, node: ast.AST, where: str, what: str) -> None:
        """Does this code divide the all-reduced sum by the world / group size?"""
        reduces = False
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and apis.last(dotted(sub.func)) in (
                "all_reduce",
                "allreduce",
            ):
                reduces = True
            divisor: ast.AST | None = None
            if isinstance(sub, ast.BinOp) and isinstance(sub.op, (ast.Div, ast.FloorDiv)):
                divisor = sub.right
            elif isinstance(sub, ast.AugAssign) and isinstance(sub.op, (ast.Div, ast.FloorDiv)):
                divisor = sub.value
            elif (
                isinstance(sub, ast.Call)
                and isinstance(sub.func, ast.Attribute)
                and sub.func.attr in ("div_", "div", "true_divide_")
                and sub.args
            ):
                divisor = sub.args[0]
            if divisor is not None and _mentions_world(divisor):
                self.emit(
                    "comm_hook_averages", True, f"{where}", f"{what} divides by the world size"
                )
                return
        if reduces:
            self.emit(
                "comm_hook_averages",
                False,
                where,
                f"{what} all-reduces (sums) without dividing by the world size ({where})",
            )

    def sharding_framework(self) -> None:
        a = self.a
        fact = "uses_fsdp_or_zero"
        if self.hf:
            for key in ("fsdp", "deepspeed"):
                val, where = self.hf_arg(key)
                if val is not None and val.known and val.const not in (None, "", False):
                    self.emit(fact, True, where, f"TrainingArguments({key}=…)")
                    return
            val, where = self.hf_arg("fsdp")
            if val is not None and ("default" in val.taint or val.known):
                self.emit(fact, False, where, "TrainingArguments without fsdp/deepspeed")
            return
        ds = self.ds
        if ds is not None:
            stage = self._zero_stage(ds)
            if stage is None:
                self.warn(
                    f"{ds.where}: DeepSpeed ZeRO stage comes from its config file; not decided"
                )
            else:
                self.emit(fact, stage > 0, ds.where, f"DeepSpeed ZeRO stage {stage}")
            return
        hits = [o for o in a.objects.values() if o.kind == V.FSDP or o.extra.get("zero")]
        if hits:
            o = hits[0]
            self.emit(fact, True, o.where, f"sharded training ({apis.last(o.canon)})")
        elif a.ddps:
            self.emit(fact, False, a.ddps[0].where, "plain DistributedDataParallel")

    @staticmethod
    def _zero_stage(ds: Obj) -> int | None:
        config = ds.kwargs.get("config") or ds.kwargs.get("config_params")
        zero = config.get("zero_optimization") if config is not None else None
        stage = zero.get("stage") if zero is not None else None
        if stage is not None and stage.known and isinstance(stage.const, int):
            return stage.const
        if config is not None and config.mapping is not None and zero is None:
            return 0  # a literal config without zero_optimization
        return None

    # ------------------------------------------------------------------ batchnorm
    def batchnorm(self) -> None:
        a = self.a
        bn: list[str] = []
        for o in a.objs(V.MODEL):
            if o.extra.get("nn") in apis.BN_CLASSES:
                bn.append(o.where)
            arch = o.extra.get("arch")
            if isinstance(arch, str) and arch.lower().startswith(apis.BN_MODEL_PREFIXES):
                bn.append(o.where)
        syncbn = [o.extra["syncbn"] for o in a.objects.values() if o.extra.get("syncbn")]
        syncbn_ctor = [e for e in a.calls() if apis.last(e.name) == "SyncBatchNorm"]
        if bn:
            self.emit("has_batchnorm", True, bn[0], f"BatchNorm layers ({bn[0]})")
        elif self._model_known_without_bn():
            models = [o for o in a.objs(V.MODEL) if o.wrapped_by] or a.objs(V.MODEL)
            self.emit(
                "has_batchnorm",
                False,
                models[0].where if models else "",
                "no BatchNorm in the model",
            )
        if syncbn or syncbn_ctor:
            where = (
                a.by_seq[syncbn[0]].where
                if syncbn and syncbn[0] in a.by_seq
                else syncbn_ctor[0].where
                if syncbn_ctor
                else ""
            )
            self.emit("uses_syncbn", True, where, "converted to SyncBatchNorm")
        elif bn and (a.ddps or self.hf):
            where = a.ddps[0].where if a.ddps else bn[0]
            self.emit(
                "uses_syncbn",
                False,
                where,
                f"BatchNorm not converted to SyncBatchNorm before the DDP wrap ({where})",
            )

    def _model_known_without_bn(self) -> bool:
        a = self.a
        models = [self.walk.objects[o.wraps] for o in a.ddps if o.wraps in self.walk.objects]
        if not models:
            if self.hf:
                tr = self.trainer()
                m = self.obj(tr.kwargs.get("model")) if tr else None
                models = [m] if m is not None else []
            else:
                return False
        for m in models:
            if m.canon == "unknown-model":
                return False
            hf = m.extra.get("hf_class")
            arch = m.extra.get("arch")
            if hf is not None:
                if (
                    not any(h in hf for h in apis.HF_TEXT_MODEL_HINTS)
                    and hf.startswith("AutoModel")
                    and hf != "AutoModelForCausalLM"
                ):
                    return False
                continue
            if arch is not None:
                if not str(arch).lower().startswith(apis.NO_BN_MODEL_PREFIXES):
                    return False
                continue
            if m.canon.startswith("local:"):
                info = self._class_of(m)
                if info is None or not self._class_tree_known(info, set()):
                    return False
                continue
            if not m.canon.startswith("torch.nn."):
                return False
        return True

    def _class_calls(self, info: ClassInfo) -> list[tuple[ast.Call, str]]:
        if self._by_class is None:
            self._by_class = {}
            modules = [self.walk.sources.main, *self.walk.sources.modules.values()]
            for m in modules:
                for call, name, cls in m.index.calls:
                    if cls is not None:
                        self._by_class.setdefault(id(cls), []).append((call, name))
        return self._by_class.get(id(info.node), [])

    def _class_tree_known(self, info: ClassInfo, seen: set[int]) -> bool:
        """Every sub-module the class builds is from torch.nn or another local class."""
        if id(info) in seen:
            return True
        seen.add(id(info))
        glob = info.scope.globals
        for cls in info.mro():
            for _call, name in self._class_calls(cls):
                if not name:
                    continue
                head = name.split(".")[0]
                val = glob.get(head)
                canon = (
                    (val.canon or "") + name[len(head) :]
                    if val is not None and val.kind == "symbol"
                    else ""
                )
                if val is not None and val.kind == "class" and isinstance(val.const, ClassInfo):
                    if val.const.object_kind() == V.MODEL and not self._class_tree_known(
                        val.const, seen
                    ):
                        return False
                    continue
                last = apis.last(name)
                if not last[:1].isupper():
                    continue
                if canon.startswith("torch.nn.") or name.startswith("nn."):
                    continue
                if canon and not canon.startswith(
                    ("torch", "math", "dataclasses", "collections", "typing")
                ):
                    return False
        return True

    def broadcast_buffers(self) -> None:
        fact = "broadcast_buffers_disabled"
        if self.hf:
            val, where = self.hf_arg("ddp_broadcast_buffers")
            if val is not None and val.known and val.const is not None:
                self.emit(
                    fact,
                    val.const is False,
                    where,
                    f"TrainingArguments(ddp_broadcast_buffers={val.const})",
                )
            return
        for e in self.a.calls():
            if apis.last(e.name) == "DistributedDataParallelKwargs":
                bb = e.kwargs.get("broadcast_buffers")
                if bb is not None and bb.known:
                    self.emit(
                        fact,
                        bb.const is False,
                        e.where,
                        f"DistributedDataParallelKwargs(broadcast_buffers={bb.const})",
                    )
                    return
        for o in self.a.ddps:
            if o.extra.get("accelerate") or o.extra.get("deepspeed"):
                continue
            bb = o.kwargs.get("broadcast_buffers")
            if bb is None:
                self.emit(fact, False, o.where, "DDP keeps the default broadcast_buffers=True")
            elif bb.known:
                if bb.const is False:
                    self.emit(
                        fact,
                        True,
                        o.where,
                        f"DDP(broadcast_buffers=False) at {o.where}: buffers drift per rank",
                    )
                else:
                    self.emit(fact, False, o.where, "DDP(broadcast_buffers=True)")
            return

    # ------------------------------------------------------------------ optimisation
    def _main_optimizer(self) -> Obj | None:
        step = self.a.main_step
        if step is not None and step.recv is not None:
            target = step.recv
            if target.kind == V.SCALER and step.args:
                target = step.args[0]
            o = self.obj(target)
            if o is not None and o.kind == V.OPTIMIZER:
                return o
        opts = self.a.objs(V.OPTIMIZER)
        return opts[0] if len(opts) == 1 else None

    def lr_scaling(self) -> None:
        if self.hf:
            val, where = self.hf_arg("learning_rate")
            if val is not None:
                self._lr_value(val, where, "TrainingArguments(learning_rate=…)")
            return
        opt = self._main_optimizer()
        if opt is None:
            return
        lr = opt.kwargs.get("lr")
        groups = [
            e
            for e in self.a.events
            if e.kind == "assign"
            and e.attr == "lr"
            and e.recv is not None
            and e.recv.kind == "param_group"
        ]
        for g in groups:
            if g.value is not None and V.WORLD in g.value.taint:
                self._lr_value(g.value, g.where, "learning rate set per step")
                return
        if lr is None:
            return
        self._lr_value(lr, opt.where, "optimizer learning rate")

    def _lr_value(self, lr: Val, where: str, what: str) -> None:
        fact = "lr_scaling"
        if V.WORLD in lr.taint:
            at = (_lines_at(lr.taint, "scaled") or [where])[-1]
            kind = "sqrt" if "sqrt_world" in lr.taint else "linear"
            self.emit(
                fact,
                kind,
                at,
                f"learning rate scaled by {'sqrt(world size)' if kind == 'sqrt' else 'the world size'} ({at})",
            )
        elif V.UNBOUND in lr.taint:
            self.warn(f"{where}: learning rate comes from a parameter; scaling not decided")
        # A learning rate that does not depend on the world size says nothing about how it
        # was changed by hand for the multi-GPU run, so "none" is never read from code.

    def schedule(self) -> None:
        if self.hf:
            ws, where = self.hf_arg("warmup_steps")
            wr, _ = self.hf_arg("warmup_ratio")
            if ws is not None and _num(ws):
                self.emit(
                    "warmup_steps",
                    int(_num(ws) or 0),
                    where,
                    f"TrainingArguments(warmup_steps={int(_num(ws) or 0)})",
                )
            elif wr is not None and _num(wr):
                self.warn(
                    f"{where}: warmup given as a ratio of total steps; step count not decided"
                )
            elif (
                ws is not None
                and wr is not None
                and ("default" in ws.taint or ws.known)
                and ("default" in wr.taint or wr.known)
            ):
                self.emit("warmup_steps", 0, where, "TrainingArguments without warmup")
            self.emit(
                "scheduler_steps_per_optimizer_step",
                1.0,
                where,
                "HF Trainer steps the scheduler with the optimizer",
            )
            return
        self._warmup()
        self._sched_ratio()

    def _warmup(self) -> None:
        a = self.a
        scheds = a.objs(V.SCHEDULER)
        if not scheds and self.ds is not None:
            return  # a DeepSpeed config may define the scheduler
        for s in scheds:
            n = apis.last(s.canon)
            ev = a.by_seq.get(s.seq)
            if (n.startswith("get_") and "warmup" in n) or n == "get_scheduler":
                pos = 2 if n == "get_scheduler" else 1
                w = s.kwargs.get("num_warmup_steps") or (s.args[pos] if len(s.args) > pos else None)
                k = _num(w)
                if k is not None and w is not None and V.ARGDEFAULT in w.taint:
                    self.cli_default("warmup_steps", int(k), s.where)
                elif k is not None:
                    self.emit("warmup_steps", int(k), s.where, f"{n}(num_warmup_steps={int(k)})")
                elif w is None and n == "get_scheduler":
                    self.emit("warmup_steps", 0, s.where, "get_scheduler without warmup")
                else:
                    self.warn(f"{s.where}: warmup steps computed at run time")
                return
            if n == "LinearLR":
                start = _num(
                    s.kwargs.get("start_factor") or (s.args[1] if len(s.args) > 1 else None)
                )
                total = s.kwargs.get("total_iters") or (s.args[3] if len(s.args) > 3 else None)
                if start is None and "start_factor" not in s.kwargs and len(s.args) <= 1:
                    start = 1 / 3
                k = _num(total) if total is not None else 5.0
                if start is not None and start < 1 and k is not None:
                    self.emit(
                        "warmup_steps", int(k), s.where, f"LinearLR warmup over {int(k)} steps"
                    )
                    return
            if n == "CosineLRScheduler":
                k = _num(s.kwargs.get("warmup_t"))
                self.emit(
                    "warmup_steps", int(k or 0), s.where, f"timm scheduler warmup_t={int(k or 0)}"
                )
                return
            if n == "LambdaLR":
                fn = s.kwargs.get("lr_lambda") or (s.args[1] if len(s.args) > 1 else None)
                k = self._warmup_in_function(fn)
                if k is not None:
                    self.emit(
                        "warmup_steps",
                        k,
                        s.where,
                        f"LambdaLR warmup over {k} steps" if k else "LambdaLR without warmup",
                    )
                else:
                    self.warn(f"{s.where}: LambdaLR warmup not readable")
                return
            del ev
        groups = [
            e
            for e in a.events
            if e.kind == "assign"
            and e.attr == "lr"
            and e.recv is not None
            and e.recv.kind == "param_group"
        ]
        if groups:
            fn_calls = [
                e
                for e in a.calls()
                if e.result is not None
                and e.name.startswith("local:")
                and any(e.seq < g.seq for g in groups)
                and "lr" in e.name.lower()
            ]
            for c in fn_calls:
                ref = None
                for fr in self.walk.functions:
                    if f"local:{fr.name}" == c.name:
                        ref = fr
                k = self._warmup_in_function(Val(kind=V.FUNCTION, const=ref)) if ref else None
                if k is not None:
                    self.emit(
                        "warmup_steps", k, c.where, f"learning-rate function with {k} warmup steps"
                    )
                    return
            self.warn(f"{groups[0].where}: learning rate set by hand each step; warmup not decided")
            return
        sched_without_warmup = [
            s
            for s in scheds
            if apis.last(s.canon) in apis.TORCH_SCHEDULERS or "warmup" not in apis.last(s.canon)
        ]
        if scheds and sched_without_warmup:
            s = sched_without_warmup[0]
            self.emit("warmup_steps", 0, s.where, f"{apis.last(s.canon)} has no warmup")
        elif not scheds:
            opt = self._main_optimizer()
            if opt is not None and self._opaque_touches({opt.ref}, None):
                return  # code the scan cannot read gets the optimizer: it may set the lr
            if opt is not None and a.main_backward is not None:
                self.emit("warmup_steps", 0, opt.where, "constant learning rate: no warmup")

    def _warmup_in_function(self, fn: Val | None) -> int | None:
        if fn is None or not isinstance(fn.const, FuncRef):
            return None
        ref = fn.const
        node = ref.node
        params = [p.arg for p in node.args.args]
        if not params:
            return None
        step = params[0]
        scope = ref.scope
        for sub in ast.walk(node):
            bound: ast.expr | None = None
            if (
                isinstance(sub, ast.Compare)
                and len(sub.ops) == 1
                and isinstance(sub.ops[0], (ast.Lt, ast.LtE))
                and isinstance(sub.left, ast.Name)
                and sub.left.id == step
            ):
                bound = sub.comparators[0]
            if isinstance(sub, ast.Call) and text(sub.func) in ("min",) and len(sub.args) == 2:
                for arg in sub.args:
                    if (
                        isinstance(arg, ast.BinOp)
                        and isinstance(arg.op, ast.Div)
                        and step in {n.id for n in ast.walk(arg.left) if isinstance(n, ast.Name)}
                    ):
                        bound = arg.right
            if bound is None:
                continue
            value = self._resolve_in(bound, ref, scope)
            if value is not None:
                return int(value)
        return (
            0
            if not any(isinstance(s, (ast.Compare, ast.If, ast.IfExp)) for s in ast.walk(node))
            else None
        )

    def _resolve_in(self, node: ast.expr, ref: FuncRef, scope: object) -> float | None:
        frame = ref.closure
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        env: dict[str, object] = {}
        local = _function_constants(ref.node)
        for name in names:
            if name in local:
                env[name] = local[name]
                continue
            val: Val | None = None
            f = frame
            while f is not None and val is None:
                val = f.locals.get(name)
                f = f.parent
            if val is None:
                val = ref.scope.globals.get(name)
            if val is None or not val.known:
                if isinstance(node, ast.Attribute):
                    break
                return None
            env[name] = val.const
        from ddpadvisor.scan.evaluate import Undecidable, evaluate

        try:
            out = evaluate(node, env)
        except Undecidable:
            return None
        return float(out) if isinstance(out, (int, float)) and not isinstance(out, bool) else None

    def _sched_ratio(self) -> None:
        a = self.a
        steps = a.sched_steps
        if not steps:
            return
        acc = a.accum
        s = steps[0]
        if acc.step is not None:
            step_ctx = acc.step.ctx
            s = max(steps, key=lambda e: (len(common_prefix(e.ctx, step_ctx)), -e.seq))
        sched = self.obj(s.recv)
        name = apis.last(sched.canon) if sched else ""
        if acc.style == "framework":
            self.emit(
                "scheduler_steps_per_optimizer_step",
                1.0,
                s.where,
                "accelerate steps the scheduler only on real optimizer steps",
            )
            return
        win = a.window
        if win is None or acc.step is None:
            return
        if not a.in_window(s, win):
            step_loops = acc.step.loops()
            if step_loops and s.loops() and s.loops()[-1] is step_loops[-1]:
                self.emit(
                    "scheduler_steps_per_optimizer_step",
                    1.0,
                    s.where,
                    "scheduler stepped next to optimizer.step()",
                )
                self._total_steps(sched)
                return
            if name in apis.EPOCH_SCHEDULERS:
                return
            self.warn(f"{s.where}: scheduler stepped outside the training step loop (per epoch?)")
            return
        runs = [a.runs_at(s, i, win) for i in win.indices]
        step_runs = (
            [a.runs_at(acc.step, i, win) for i in win.indices]
            if a.in_window(acc.step, win)
            else None
        )
        if any(r is None for r in runs):
            return
        n_sched = sum(1 for r in runs if r)
        if acc.style == "inner":
            n_opt = 1
            n_sched_window = n_sched
        else:
            n_opt = sum(1 for r in (step_runs or []) if r) or len(win.boundaries)
            n_sched_window = n_sched
        if n_opt == 0:
            return
        ratio = n_sched_window / n_opt
        if acc.k is None and ratio > 1.05:
            self.warn(
                f"{s.where}: scheduler stepped on every micro-batch; accumulation count unknown"
            )
            return
        if ratio > 1.05 and acc.k_default:
            self.cli_default("scheduler_steps_per_optimizer_step", float(acc.k or ratio), s.where)
        elif ratio > 1.05:
            self.emit(
                "scheduler_steps_per_optimizer_step",
                float(acc.k or ratio),
                s.where,
                f"scheduler.step() on every micro-batch ({s.where}): warmup and decay run {acc.k}x too fast",
            )
        else:
            self.emit(
                "scheduler_steps_per_optimizer_step",
                round(ratio, 3),
                s.where,
                "scheduler stepped once per optimizer step",
            )
        self._total_steps(sched)

    def _total_steps(self, sched: Obj | None) -> None:
        if sched is None:
            return
        for key in ("num_training_steps", "total_steps", "T_max", "total_iters"):
            val = sched.kwargs.get(key)
            if val is not None and V.LEN_DATASET in val.taint and V.WORLD not in val.taint:
                self.warn(
                    f"{sched.where}: {key} computed from len(dataset): with DistributedSampler each rank "
                    "sees len(dataset)/world_size samples, so the schedule never finishes"
                )

    def optimizer(self) -> None:
        if self.hf:
            optim, where = self.hf_arg("optim")
            beta2, _ = self.hf_arg("adam_beta2")
            fam: str | None = None
            if optim is not None and optim.known and isinstance(optim.const, str):
                o = optim.const.lower()
                fam = "adam" if "adam" in o else "sgd" if "sgd" in o else "other"
            elif optim is not None and "default" in optim.taint:
                fam = "adam"
            if fam:
                self.emit(
                    "optimizer_family",
                    fam,
                    where,
                    f"HF Trainer optimizer ({optim.const if optim and optim.known else 'adamw'})",
                )
            if fam == "adam" and beta2 is not None:
                b2 = _num(beta2)
                if b2 is not None:
                    self.emit("adam_beta2", b2, where, f"adam_beta2={b2}")
                elif "default" in beta2.taint:
                    self.emit(
                        "adam_beta2", apis.ADAM_DEFAULT_BETA2, where, "default adam_beta2=0.999"
                    )
            return
        opt = self._main_optimizer()
        if opt is None:
            fams = {o.extra.get("family") for o in self.a.objs(V.OPTIMIZER)} - {None}
            if len(fams) > 1:
                self.warn(
                    f"{self.label}: several optimizer families; which one trains is not decided"
                )
            return
        fam = opt.extra.get("family")
        if fam is None:
            return
        self.emit("optimizer_family", fam, opt.where, f"{apis.last(opt.canon)} optimizer")
        if fam != "adam":
            return
        betas = opt.kwargs.get("betas")
        if betas is None:
            if apis.last(opt.canon) in ("Adam", "AdamW", "NAdam", "RAdam", "Adamax"):
                self.emit(
                    "adam_beta2", apis.ADAM_DEFAULT_BETA2, opt.where, "default betas (beta2=0.999)"
                )
            return
        if betas.items is not None and len(betas.items) == 2:
            b2 = _num(betas.items[1])
            if b2 is not None and V.ARGDEFAULT in betas.items[1].taint:
                self.cli_default("adam_beta2", b2, opt.where)
                return
            if b2 is not None:
                self.emit("adam_beta2", b2, opt.where, f"beta2={b2}")
                return
        if betas.known and isinstance(betas.const, tuple) and len(betas.const) == 2:
            self.emit("adam_beta2", float(betas.const[1]), opt.where, f"beta2={betas.const[1]}")

    def batch_size(self) -> None:
        if self.hf:
            val, where = self.hf_arg("per_device_train_batch_size")
            if val is not None:
                n = _num(val)
                if n is not None:
                    self.emit(
                        "per_gpu_batch_size", int(n), where, f"per_device_train_batch_size={int(n)}"
                    )
                elif "default" in val.taint or "cli" in val.taint:
                    self.emit(
                        "per_gpu_batch_size", 8, where, "HF default per_device_train_batch_size=8"
                    )
            return
        loader = self.training_loader()
        if loader is None:
            return
        bs = loader.kwargs.get("batch_size")
        if bs is None:
            if loader.kwargs.get("batch_sampler") is None:
                self.emit("per_gpu_batch_size", 1, loader.where, "DataLoader default batch_size=1")
            return
        n = _num(bs)
        if n is not None and V.ARGDEFAULT in bs.taint:
            self.cli_default("per_gpu_batch_size", int(n), loader.where)
        elif n is not None and V.WORLD not in bs.taint:
            self.emit(
                "per_gpu_batch_size",
                int(n),
                loader.where,
                f"DataLoader(batch_size={int(n)}) per rank",
            )

    # ------------------------------------------------------------------ loss shape
    def _token_signals(self) -> list[str]:
        """Padding, label masking or token-count plumbing anywhere in the scanned files."""
        out: list[tuple[str, int]] = []
        modules = [self.walk.sources.main, *self.walk.sources.modules.values()]
        for m in modules:
            idx = m.index
            for kw in idx.keywords:
                value = kw.value
                const = value.value if isinstance(value, ast.Constant) else None
                if (
                    kw.arg in ("ignore_index", "num_items_in_batch")
                    or (
                        kw.arg == "padding"
                        and (const is True or const in ("longest", "max_length"))
                    )
                    or (kw.arg == "packing" and const is True)
                ):
                    out.append((m.label, value.lineno))
            for call, name, _ in idx.calls:
                if apis.last(name) in apis.PADDING_SIGNALS - {"pad"}:
                    out.append((m.label, call.lineno))
            out.extend((m.label, s.lineno) for s in idx.strings if s.value == "attention_mask")
            out.extend(
                (m.label, a.lineno)
                for a in idx.attrs
                if a.attr in ("attention_mask", "pad_token_id")
            )
            out.extend((m.label, u.lineno) for u in idx.neg100)
        out.sort(key=lambda w: (w[0] != self.label, w[1]))
        return [f"{f}:{line}" for f, line in out]

    def loss_shape(self) -> None:
        a = self.a
        if self.hf:
            self.emit("loss_reduction", "mean", "", "HF models return a mean loss")
        b = a.main_backward
        loss = a.loss_of(b) if b is not None else None
        if b is not None and loss is not None and not self.hf and V.FWD in loss.taint:
            if V.SUM_RED in loss.taint:
                self.emit(
                    "loss_reduction",
                    "sum",
                    b.where,
                    "loss is a sum over the batch (reduction='sum' or .sum())",
                )
            elif V.MEAN_RED in loss.taint:
                self.emit("loss_reduction", "mean", b.where, "loss is a mean over the batch")
        signals = self._token_signals()
        tokenized = (
            signals
            or any(o.canon == "tokenizer" or "Tokenizer" in o.canon for o in a.objects.values())
            or any(e.result is not None and e.result.kind == "tokenizer" for e in a.events)
        )
        if signals:
            self.emit(
                "variable_length_sequences",
                True,
                signals[0],
                f"padding / label masking ({signals[0]})",
            )
        elif not tokenized and (a.main_backward is not None) and not self._data_from_elsewhere():
            self.emit(
                "variable_length_sequences",
                False,
                a.main_backward.where,
                "fixed-size examples: no padding or label masking",
            )
        else:
            return
        if not signals:
            return
        if self.hf:
            val, where = self.hf_arg("average_tokens_across_devices")
            if val is not None and val.known and val.const is True:
                self.emit(
                    "loss_normalised_by_global_tokens",
                    True,
                    where,
                    "average_tokens_across_devices=True",
                )
            return
        if b is None or loss is None or V.FWD not in loss.taint:
            return
        if V.NORM_GLOBAL in loss.taint:
            self.emit(
                "loss_normalised_by_global_tokens",
                True,
                b.where,
                "loss divided by a token count summed across ranks",
            )
        elif V.MEAN_RED in loss.taint:
            where = self._loss_line(loss) or b.where
            self.emit(
                "loss_normalised_by_global_tokens",
                False,
                where,
                f"per-rank mean over this batch's tokens ({where}): ranks with few tokens weigh as much as full ones",
            )

    def _loss_line(self, loss: Val) -> str | None:
        """Where the loss was reduced: the criterion call feeding the backward."""
        seqs = [int(t.split(":", 1)[1]) for t in loss.taint if t.startswith("fwdseq:")]
        if not seqs:
            return None
        fwd = self.a.by_seq.get(seqs[-1])
        if fwd is None:
            return None
        for e in self.a.events:
            if e.seq <= fwd.seq or e.kind != "call" or e.result is None:
                continue
            if f"fwdseq:{fwd.seq}" in e.result.taint and V.MEAN_RED in e.result.taint:
                return e.where
            if e.seq > fwd.seq + 40:
                break
        return fwd.where

    def _data_from_elsewhere(self) -> bool:
        loader = self.training_loader()
        if loader is None:
            return bool(self.walk.sources.missing)
        ds = loader.kwargs.get("dataset")
        obj = self.obj(ds)
        return obj is None and ds is not None and (V.UNBOUND in ds.taint or ds.kind is None)

    # ------------------------------------------------------------------ logging
    def logging(self) -> None:
        a = self.a
        if self.hf:
            self.emit("logs_rank0_only", False, "", "HF Trainer logs the loss averaged over ranks")
            self.emit(
                "logged_loss_reduction_wrong", False, "", "HF Trainer reduces the logged loss"
            )
            return
        logs: list[Event] = []
        for e in a.calls():
            n = e.method or apis.last(e.name)
            if n not in apis.LOG_NAMES and apis.last(e.name) not in apis.LOG_NAMES:
                continue
            vals = [*e.args, *e.kwargs.values()]
            if not any(V.FWD in v.taint for v in vals):
                continue
            if "loss" not in text(e.node, 400).lower():
                continue
            logs.append(e)
        if not logs:
            return
        rank0_unreduced = []
        reduced = []
        for e in logs:
            vals = [*e.args, *e.kwargs.values()]
            is_reduced = any(V.REDUCED in v.taint for v in vals)
            rank0 = any(_is_rank_cond(c) for c in e.ctx) or (
                e.recv is not None and e.recv.kind == V.ACCELERATOR and e.method == "print"
            )
            if is_reduced:
                reduced.append(e)
            elif rank0:
                rank0_unreduced.append(e)
        if reduced:
            e = reduced[0]
            vals = [*e.args, *e.kwargs.values()]
            self.emit(
                "logs_rank0_only", False, e.where, "logged loss is reduced across ranks first"
            )
            wrong = [v for v in vals if V.REDUCED_SUM in v.taint or "double_div_world" in v.taint]
            unsure = [v for v in vals if "reduced_div_unknown" in v.taint]
            if unsure and not wrong:
                self.warn(
                    f"{e.where}: summed loss divided by {self._divisor_text(e)}; is that the world size?"
                )
            elif wrong:
                why = (
                    "all_reduce SUM not divided by the world size"
                    if V.REDUCED_SUM in wrong[0].taint
                    else "averaged and then divided by the world size again"
                )
                self.emit(
                    "logged_loss_reduction_wrong", True, e.where, f"logged loss {why} ({e.where})"
                )
            else:
                self.emit(
                    "logged_loss_reduction_wrong",
                    False,
                    e.where,
                    "logged loss averaged across ranks",
                )
        if rank0_unreduced and not reduced:
            e = rank0_unreduced[0]
            self.emit(
                "logs_rank0_only",
                True,
                e.where,
                f"rank 0 logs its own micro-batch loss without an all_reduce ({e.where})",
            )

    @staticmethod
    def _divisor_text(e: Event) -> str:
        for sub in ast.walk(e.node):
            if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Div):
                return text(sub.right)
        return "a number"

    # ------------------------------------------------------------------ data randomness
    def augmentation(self) -> None:
        a = self.a
        for e in a.calls():
            if apis.is_random_transform(e.name) and (
                e.name.startswith(("torchvision", "transforms", "T.", "v2", "A.", "albumentations"))
                or "transforms" in e.name
            ):
                self.emit(
                    "uses_random_augmentation",
                    True,
                    e.where,
                    f"random augmentation {apis.last(e.name)} ({e.where})",
                )
                return
            if apis.last(e.name) == "DataCollatorForLanguageModeling":
                mlm = e.kwargs.get("mlm")
                if mlm is None or (mlm.known and mlm.const is True):
                    self.emit(
                        "uses_random_augmentation", True, e.where, "random token masking (mlm=True)"
                    )
                    return
        for info in self.walk.classes:
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
                            "self",
                        ):
                            where = f"{info.scope.module.label}:{sub.lineno}"
                            self.emit(
                                "uses_random_augmentation",
                                True,
                                where,
                                f"random draws in {info.name}.{mname} ({where})",
                            )
                            return
        loader = self.training_loader()
        if loader is None or a.main_backward is None:
            return
        ds = self.obj(loader.kwargs.get("dataset"))
        ds_info = self._class_of(ds)
        if ds is not None and (apis.last(ds.canon) == "TensorDataset" or ds_info is not None):
            self.emit(
                "uses_random_augmentation", False, ds.where, "dataset draws no random augmentation"
            )

    def seeding(self) -> None:
        seeds = [
            e
            for e in self.a.calls()
            if apis.last(e.name)
            in ("manual_seed", "seed", "set_seed", "seed_everything", "manual_seed_all")
            and not (
                e.recv is not None and e.recv.kind is not None and e.recv.kind not in ("symbol",)
            )
        ]
        if not seeds:
            return
        ranked = [e for e in seeds if any(V.RANK in v.taint for v in [*e.args, *e.kwargs.values()])]
        if ranked:
            self.emit(
                "rank_seeds_identical",
                False,
                ranked[0].where,
                f"seed offset by rank ({ranked[0].where})",
            )
            return
        if all(
            any(v.known or V.ARGDEFAULT in v.taint for v in [*e.args, *e.kwargs.values()])
            for e in seeds
        ):
            e = seeds[0]
            self.emit("rank_seeds_identical", True, e.where, f"same seed on every rank ({e.where})")

    # ------------------------------------------------------------------ ordering
    def _sort_fault(self, fact: str, fault: Value) -> None:
        mine = [f for f in self.findings if f.fact == fact]
        if not mine:
            return
        rest = [f for f in self.findings if f.fact != fact]
        faults = [f for f in mine if f.value == fault]
        others = [f for f in mine if f.value != fault]
        self.findings = rest + (faults if faults else others)


def _function_constants(fn: ast.AST) -> dict[str, object]:
    """Constants a function sets up for itself: parameter defaults and ``name = 4`` lines.

    A schedule function is called with the step only, so its other parameters keep their
    defaults (``def lr(step, warmup=3)``)."""
    from ddpadvisor.scan.evaluate import Undecidable, evaluate

    out: dict[str, object] = {}
    args = getattr(fn, "args", None)
    if isinstance(args, ast.arguments):
        positional = [*args.posonlyargs, *args.args]
        for param, default in zip(
            positional[len(positional) - len(args.defaults) :], args.defaults
        ):
            if isinstance(default, ast.Constant):
                out[param.arg] = default.value
    for stmt in getattr(fn, "body", []) if isinstance(getattr(fn, "body", None), list) else []:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        ):
            try:
                out[stmt.targets[0].id] = evaluate(stmt.value, out)
            except Undecidable:
                continue
    return out


def _mentions_world(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        name = dotted(sub.func) if isinstance(sub, ast.Call) else dotted(sub)
        last = apis.last(name).lower() if name else ""
        if last in (
            "size",
            "get_world_size",
            "world_size",
            "num_processes",
            "ws",
            "nprocs",
            "n_gpus",
            "ngpus",
        ):
            return True
        if "world" in last:
            return True
    return False


def _call_site(ev: Event) -> str:
    """Where the user wrote it: a forward inside ``model.module.some_method()`` is blamed on
    that call, not on ``self(x)`` inside the model class."""
    for c in ev.ctx:
        if isinstance(c, FuncCtx) and c.self_kind in (V.MODEL, V.DDP_MODULE) and c.call_where:
            return c.call_where
    return ev.where


# Import roots whose calls the scanner understands or that cannot touch training state.
_KNOWN_HEADS = {
    "torch",
    "transformers",
    "accelerate",
    "peft",
    "deepspeed",
    "datasets",
    "torchvision",
    "timm",
    "math",
    "numpy",
    "np",
    "random",
    "os",
    "sys",
    "time",
    "logging",
    "wandb",
    "tqdm",
    "trange",
    "json",
    "yaml",
    "pickle",
    "copy",
    "functools",
    "itertools",
    "contextlib",
    "print",
    "len",
    "range",
    "enumerate",
    "zip",
    "iter",
    "next",
    "isinstance",
    "getattr",
    "setattr",
    "hasattr",
    "int",
    "float",
    "str",
    "bool",
    "list",
    "dict",
    "tuple",
    "set",
    "min",
    "max",
    "sum",
    "abs",
    "round",
    "sorted",
    "reversed",
    "open",
    "super",
    "type",
    "any",
    "all",
    "map",
    "filter",
    "format",
    "repr",
    "id",
    "vars",
    "callable",
    "gc",
    "argparse",
    "pathlib",
    "Path",
    "shutil",
    "warnings",
    "dataclasses",
    "collections",
}


def _exclusive(a: Event, b: Event) -> bool:
    """Two events in different branches of the same ``if``."""
    for x in a.ctx:
        if isinstance(x, CondCtx):
            for y in b.ctx:
                if isinstance(y, CondCtx) and y.node is x.node and y.branch != x.branch:
                    return True
    return False


def _kw_node(node: ast.AST | None, name: str) -> ast.expr | None:
    if not isinstance(node, ast.Call):
        return None
    for k in node.keywords:
        if k.arg == name:
            return k.value
    return None


__all__ = ["Finding", "Rules", "eval_at"]
