"""The agent: the per-step window, the optimizer step boundary, the checks, and the hook
bodies that DDP modules and comm hooks call."""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import hashlib
import json
import math
import os
import signal
import socket
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from . import runtime as rt
from .format import FORMAT_VERSION
from .runtime import (
    _ORIG,
    DEVICE_FLUSH_EVERY,
    DIGEST_PREFIX,
    INDEX_LIMIT,
    INTERNAL,
    _compiling,
    _in_data_worker,
    _local,
)
from .writer import Writer


def _sharded(t: Any) -> bool:
    """The tensor holds only this rank's shard: a DTensor sharded on some mesh dimension
    (FSDP2's fully_shard), an FSDP FlatParameter of a sharding strategy, or an original
    parameter that FSDP(use_orig_params=True) turned into a view of one. Ranks do not hold
    copies of such a tensor, so comparing it across ranks says nothing about replicas."""
    placements = getattr(t, "placements", None)
    if placements is not None and getattr(t, "to_local", None) is not None:
        return any(getattr(pl, "is_shard", lambda: False)() for pl in placements)
    if getattr(t, "_is_flat_param", False):
        full = getattr(t, "_unpadded_unsharded_size", None)
        shard = getattr(t, "_sharded_size", None)
        return full is None or shard is None or tuple(full) != tuple(shard)
    return bool(getattr(t, "_fsdp_flattened", False))


# Optimizers whose state is partitioned across ranks: each rank holds the state of its own
# parameters only, so optimizer state is never compared across ranks for them.
PARTITIONED_OPTIMIZERS = ("ZeroRedundancyOptimizer",)
MAX_AUX = 4  # models run beside the wrapped one whose weights are compared across ranks
# Steps in a row of an optimizer over another DDP model, the counted one idle meanwhile, that
# make a new phase of training (a GAN's optimizers take turns; a critic stepping several times
# per generator step takes over once, which costs a few steps of the count)
PHASE_STEPS = 3
DDP_TYPES = (torch.nn.parallel.DistributedDataParallel,)
# Updates rounded away: at most this many float16/bfloat16 tensors per step, this many elements
# each (a fixed stride), compared before and after the optimizer's step
LOWP_TENSORS = 16
LOWP_SAMPLE = 64


def _stack(tensors: list[Any]) -> Any:
    """``torch.stack`` of tensors that may live on different devices, on the first accelerator
    among them (else the CPU). A job's state mixes them: Adam keeps its ``step`` counters on
    the CPU beside CUDA moments, a GradScaler keeps one found-inf flag per device of a model
    split across GPUs, a loop may leave the labels on the CPU (seen on an H200 run)."""
    target = next((t.device for t in tensors if t.device.type != "cpu"), None)
    if target is None:
        return torch.stack(tensors)
    return torch.stack([t if t.device == target else t.to(target) for t in tensors])


def _fingerprint(tensors: list[Any]) -> Any:
    """float64 sum and sum of squares of every tensor, stacked as an [n, 2] tensor on device."""
    if not tensors:
        return torch.zeros((0, 2), dtype=torch.float64)
    rows = []
    for t in tensors:
        d = _local(t).detach()
        if d.is_complex():
            d = torch.view_as_real(d)
        d = d.to(torch.float64)
        rows.append(torch.stack([d.sum(), (d * d).sum()]))
    return _stack(rows)


def _seed_digests() -> dict[str, str]:
    """Per-generator digests (torch CPU, python, numpy), to compare seeding across ranks."""
    import random

    out = {}
    state = torch.random.get_rng_state()
    np = sys.modules.get("numpy")
    raw = state.numpy().tobytes() if np is not None else bytes(rt.tolist(state))
    out["torch"] = hashlib.blake2b(raw, digest_size=8).hexdigest()
    out["python"] = f"{hash(random.getstate()[1]) & 0xFFFFFFFFFFFFFFFF:016x}"
    if np is not None:
        try:
            np_state = np.random.get_state()
            raw = np_state[1].tobytes() + str(np_state[2]).encode()
            out["numpy"] = hashlib.blake2b(raw, digest_size=8).hexdigest()
        except Exception:
            pass
    return out


def _rng_digest() -> list[str]:
    """Digests of the torch, python and numpy generator states, in that order."""
    d = _seed_digests()
    return [d.get("torch", ""), d.get("python", ""), d.get("numpy", "")]


def _tensors_in(obj: Any, limit: int = 6) -> list[tuple[str, Any]]:
    """Tensors of a forward's inputs, with a name for dict entries (labels, attention_mask)."""
    found: list[tuple[str, Any]] = []

    def walk(x: Any, name: str, depth: int) -> None:
        if len(found) >= limit or depth > 3:
            return
        if isinstance(x, torch.Tensor):
            found.append((name, x))
        elif isinstance(x, dict):
            for k, v in list(x.items())[:16]:
                walk(v, str(k), depth + 1)
        elif isinstance(x, (list, tuple)):
            for v in x[:16]:
                walk(v, name, depth + 1)
        elif hasattr(x, "keys") and hasattr(x, "__getitem__"):  # BatchEncoding and friends
            try:
                for k in list(x.keys())[:16]:
                    walk(x[k], str(k), depth + 1)
            except Exception:
                pass

    walk(obj, "", 0)
    return found


class _Weights:
    """Cached position weights that make the input digest order-sensitive."""

    def __init__(self) -> None:
        self.cache: dict[tuple[int, str], Any] = {}

    def get(self, n: int, device: Any) -> Any:
        key = (n, str(device))
        w = self.cache.get(key)
        if w is None:
            if len(self.cache) > 64:
                self.cache.clear()
            w = (torch.arange(n, dtype=torch.float64, device=device) % 1021.0) + 1.0
            self.cache[key] = w
        return w


def _subset(indices: list[int], total: int) -> tuple[list[int], int]:
    """All indices, or a hash-selected subset that is the same on every rank (for overlaps)."""
    if total <= INDEX_LIMIT:
        return indices, 1
    modulus = math.ceil(total / INDEX_LIMIT)
    return [i for i in indices if (i * 2654435761) % 4294967296 % modulus == 0], modulus


class Backward:
    """One call of backward(): its loss, how the loss was scaled, and what it synchronised."""

    __slots__ = ("buckets", "factor", "flag", "loss", "post", "pre", "tensor_div", "terms")

    def __init__(self) -> None:
        self.loss: Any = None
        self.factor: float | None = 1.0
        self.tensor_div = False
        self.terms = 1  # terms summed below the factor (a division inside one stays unseen)
        self.buckets = 0
        self.pre: list[Any] = []
        self.post: list[Any] = []
        self.flag: bool | None = None


class Window:
    """Everything that happened since the previous optimizer step attempt."""

    def __init__(self) -> None:
        self.backwards: list[Backward] = []
        self.digests: list[Any] = []
        self.tokens: list[Any] = []
        self.ce: list[list[Any]] = []  # [kept targets, targets, reduction] (hooks/losses.py)
        self.fwd_flags: list[bool] = []
        self.bypass = 0
        self.zero_calls = 0
        self.zero_after_backward = False
        self.zero_between = False
        self.sched = 0
        self.clips: list[dict[str, Any]] = []
        self.scaled = False
        self.loss_reads = 0
        self.reductions = 0
        self.big_reductions = 0
        self.big_collectives = 0
        self.rng: list[list[Any]] = []
        self.batch: int | None = None
        self.ds: dict[str, Any] | None = None  # DeepSpeed engine calls (hooks/deepspeed.py)
        self.lowp: list[Any] = []  # [updates rounded away, sampled] (Agent._count_lost_updates)
        self.others = 0  # steps of optimizers other than the counted one


class Agent:
    def __init__(self, out_dir: Path, every: int, max_steps: int | None) -> None:
        self.dir = out_dir
        self.every = max(1, every)
        self.max_steps = max_steps
        self.writer = Writer(out_dir)
        self.weights = _Weights()
        self.rank: int | None = None
        self.world = 1
        self.active = False
        self.disabled: set[str] = set()
        self.step = 0  # optimizer step attempts of the primary optimizer (skipped ones included)
        self.window = Window()
        self.cur_bwd: Backward | None = None
        self.pending_step: dict[str, Any] | None = None  # waits for scaler.update()
        self.ddps: list[weakref.ref[Any]] = []
        self.ddp_info: dict[int, dict[str, Any]] = {}
        self.ds_info: dict[int, dict[str, Any]] = {}  # DeepSpeed engines (hooks/deepspeed.py)
        self.ds_opts: set[int] = set()  # their optimizers: the engine's and the torch one inside
        self.out_lines = 0  # printed or logged lines with numbers recorded (hooks/output.py)
        # Models the training loop runs but neither wraps nor steps (a distillation teacher, a
        # reference model, a frozen encoder), found at the first step: [module ref, used]
        self.aux: list[list[Any]] = []
        self.aux_searched = False
        # (param, sampled indices, values, gradient non-zero) before a step of fp16/bf16 weights
        self.lowp_sample: list[tuple[Any, Any, Any, Any]] = []
        self.lowp_opts: dict[int, bool] = {}  # optimizer id -> it steps fp16/bf16 weights
        self.ds_in_step = 0  # > 0 while a DeepSpeed engine's step() runs
        self.ds_check: Any = None  # a check due once that step() returns
        # The step of the training counted inside the DeepSpeed engine's step() under way:
        # ZeRO-1/2 (and ZeRO-3 per sub-group) step the torch optimizer once per parameter
        # group, each time with only that group in ``param_groups``
        # (deepspeed/runtime/zero/stage_1_and_2.py, ``_optimizer_step``).
        self.ds_step_counted = False
        self.wrapped_modules: weakref.WeakSet[Any] = weakref.WeakSet()
        self.in_ddp_forward = 0
        self.in_inner_forward = 0  # forwards of a DDP's inner module under way
        self.primary: weakref.ref[Any] | None = None
        self.opt_steps: dict[int, int] = {}
        self.opt_seen: set[int] = set()
        self.opt_stack: list[int] = []  # optimizers whose step() is under way, outermost first
        self.nested_opts: set[int] = set()
        self.first_checked = False
        self.primary_before_wrap = False
        self.primary_ddps: frozenset[int] = frozenset()  # the DDP wrappers it steps
        self.takeover = (0, 0)  # (optimizer id, its steps in a row while the counted one waits)
        self.primary_id = 0  # id() of the counted optimizer (its weakref may be dead)
        self.primary_sig: tuple[int, int] = (0, 0)  # its parameters: how many, how many numbers
        self.retired: set[int] = set()  # optimizers a new phase took the count from
        # _ddps_of and _param_signature, read once per optimizer (keyed by the object: an id
        # may come back for the next epoch's optimizer)
        self.opt_ddps: weakref.WeakKeyDictionary[Any, tuple[int, frozenset[int]]] = (
            weakref.WeakKeyDictionary()
        )
        self.opt_sigs: weakref.WeakKeyDictionary[Any, tuple[int, int]] = weakref.WeakKeyDictionary()
        self.over_ddp: dict[int, bool] = {}  # optimizer id -> it holds DDP-wrapped parameters
        self.scalers: weakref.WeakSet[Any] = weakref.WeakSet()
        self.scaled_map: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self.loss_ptrs: list[int] = []
        self.sched_depth = 0
        self.batch_depth = 0  # > 0 while a recorded batch sampler draws its next batch
        self.sched_total = 0
        # scheduler key -> [class, planned length, its steps so far (its own last_epoch, which a
        # restored state carries on), the optimizer step count at its last step]
        self.sched_plans: dict[str, list[Any]] = {}
        self.sampler_ids: dict[int, int] = {}
        self.iterations = 0
        self.worker_iterators = 0  # iterators whose workers were probed (hooks/workers.py)
        self.set_epoch_calls: dict[int, list[int]] = {}
        self.buffer_check_step: int | None = None
        self.final_done = False
        self.seen_cfg: set[str] = set()
        self.counters: dict[str, Any] = {"fwd": 0, "bwd": 0, "buckets": 0, "phase": "start"}
        self.since_flush = 0
        self.started = time.time()

    # -- plumbing -------------------------------------------------------------------------
    def safe(self, part: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run agent code; on error, disable that part, log once, never raise into user code."""
        if part in self.disabled or not self.writer.mine:
            return None
        try:
            with INTERNAL:
                return fn(*args, **kwargs)
        except Exception as exc:
            self.disabled.add(part)
            tb = traceback.extract_tb(exc.__traceback__)
            where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else "?"
            self.record({"k": "agent_error", "part": part, "error": repr(exc), "at": where})
            return None

    def record(self, rec: dict[str, Any]) -> None:
        rec.setdefault("t", round(time.time() - self.started, 4))
        self.writer.add(rec)

    def cfg(self, key: str, rec: dict[str, Any]) -> None:
        """A configuration record written once per distinct key."""
        if key not in self.seen_cfg:
            self.seen_cfg.add(key)
            self.record(rec)

    # -- activation (the process group exists) ---------------------------------------------
    def activate(self) -> None:
        dist = torch.distributed
        if self.active or not dist.is_available() or not dist.is_initialized():
            return
        if _in_data_worker():  # a DataLoader worker never traces itself
            return
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.writer.open(self.rank)
        self.active = True
        backend = str(dist.get_backend())
        self.record(
            {
                "k": "start",
                "v": FORMAT_VERSION,
                "rank": self.rank,
                "world": self.world,
                "local_rank": int(os.environ.get("LOCAL_RANK", "-1")),
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "backend": backend,
                "torch": torch.__version__,
                "cuda": torch.version.cuda,
                "every": self.every,
                "max_steps": self.max_steps,
                "argv": sys.argv[:16],
                "cwd": os.getcwd(),
                "checks": "agent",
            }
        )
        self._start_progress()
        try:
            # The launcher sends SIGUSR1 to a stalled job to learn where each rank waits.
            stack = open(self.dir / f"rank{self.rank}.stack", "w")  # noqa: SIM115
            chain = signal.getsignal(signal.SIGUSR1) not in (signal.SIG_DFL, None)
            faulthandler.register(signal.SIGUSR1, file=stack, all_threads=True, chain=chain)
        except Exception:
            pass
        atexit.register(self.at_exit)
        rt.run_on_activate()

    def _start_progress(self) -> None:
        path = self.dir / f"rank{self.rank}.progress"
        tmp = path.with_suffix(".progress.tmp")

        def beat() -> None:
            while True:
                data = dict(self.counters, pid=os.getpid(), rank=self.rank, step=self.step)
                data["time"] = time.time()
                try:
                    tmp.write_text(json.dumps(data))
                    os.replace(tmp, path)
                except OSError:
                    return
                time.sleep(0.5)

        threading.Thread(target=beat, name="ddpadvisor-progress", daemon=True).start()

    # -- DDP -----------------------------------------------------------------------------
    def on_wrap(self, ddp: Any) -> None:
        self.activate()
        index = len(self.ddps)
        self.ddps.append(weakref.ref(ddp))
        module = ddp.module
        named = list(module.named_parameters())
        reducer_ids = {id(p) for p in getattr(ddp, "_module_parameters", []) if p.requires_grad}
        if not reducer_ids:
            reducer_ids = {id(p) for _, p in named if p.requires_grad}
        ignored = set(getattr(ddp, "parameters_to_ignore", set()) or ())
        info: dict[str, Any] = {
            "index": index,
            "reducer": reducer_ids,
            "names": {id(p): n for n, p in named},
            "params": [(n, weakref.ref(p)) for n, p in named],
            "buffers": [(n, weakref.ref(b)) for n, b in module.named_buffers()],
            "module": weakref.ref(module),
            "ignored": ignored,
            "hooked": False,
            "builtin_hook": False,
        }
        self.ddp_info[id(ddp)] = info
        for m in module.modules():
            self.wrapped_modules.add(m)
        self.wrapped_modules.add(ddp)
        bn = [type(m).__name__ for m in module.modules() if "BatchNorm" in type(m).__name__]
        forward_sync = getattr(ddp, "forward_sync_buffers", getattr(ddp, "broadcast_buffers", True))
        self.record(
            {
                "k": "wrap",
                "ddp": index,
                "step": self.step,
                "n_params": len(named),
                "n_trainable": sum(1 for _, p in named if p.requires_grad),
                "n_reducer": len(reducer_ids),
                "ignored": sorted(ignored)[:50],
                "numel": sum(p.numel() for _, p in named),
                "dtypes": sorted({str(p.dtype).replace("torch.", "") for _, p in named}),
                "device": str(ddp.device) if hasattr(ddp, "device") else None,
                "forward_sync_buffers": bool(forward_sync),
                "n_buffers": len(info["buffers"]),
                "find_unused": bool(getattr(ddp, "find_unused_parameters", False)),
                "static_graph": bool(getattr(ddp, "static_graph", False)),
                "batchnorm": sorted(set(bn)),
                "lora": sum(1 for n, _ in named if "lora" in n.lower()),
                "seeds": _seed_digests(),
                "fp": self._fp_summary([p for _, p in named]),
            }
        )
        ddp.register_forward_pre_hook(_ddp_pre_forward, with_kwargs=True)
        ddp.register_forward_hook(_ddp_post_forward, always_call=True)
        module.register_forward_pre_hook(_inner_pre_forward, with_kwargs=True)
        module.register_forward_hook(_inner_post_forward, always_call=True)
        # the inner module's parts called on their own (model.module.encoder(x)) bypass the
        # wrapper as surely as model.module(x) does
        for child in module.children():
            if any(True for _ in child.parameters()):
                child.register_forward_pre_hook(_part_pre_forward)
        weakref.finalize(ddp, _on_ddp_collected, index)

    def _fp_summary(self, tensors: list[Any]) -> Any:
        fp = _fingerprint([t for t in tensors if t is not None])
        return fp.sum(0) if fp.numel() else fp.new_zeros(2)

    def ensure_comm_hooks(self) -> None:
        """Register the observing comm hook on every DDP that has none (before its backward)."""
        for ref in self.ddps:
            ddp = ref()
            if ddp is None:
                continue
            info = self.ddp_info.get(id(ddp))
            if info is None or info["hooked"] or info["builtin_hook"]:
                continue
            info["hooked"] = True
            if getattr(ddp, "_comm_hooks", None):
                continue  # the user's hook was registered through our wrapper already
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            hook = _observing_hook(default_hooks.allreduce_hook)
            _ORIG["ddp_register_comm_hook"](ddp, ddp.process_group, hook)

    def on_forward(self, ddp: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.counters["fwd"] += 1
        self.counters["phase"] = "forward"
        if torch.is_grad_enabled():
            self.digest_inputs(args, kwargs)

    def after_forward(self, ddp: Any) -> None:
        if torch.is_grad_enabled():
            self.window.fwd_flags.append(bool(ddp.require_backward_grad_sync))

    def digest_inputs(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        tensors = _tensors_in((args, kwargs))
        if not tensors:
            return
        parts = []
        tokens = None
        for name, t in tensors:
            flat = t.detach().reshape(-1)
            if flat.numel() == 0:
                continue
            if flat.is_complex():
                flat = torch.view_as_real(flat).reshape(-1)
            # The full sum plus an order-sensitive sum over a prefix: cheap even for images.
            prefix = flat[:DIGEST_PREFIX].to(torch.float64)
            w = self.weights.get(prefix.numel(), prefix.device)
            parts.append(torch.stack([flat.sum(dtype=torch.float64), (prefix * w).sum()]))
            if tokens is None and name == "labels" and not t.is_floating_point():
                tokens = (t.detach() != -100).sum()
            elif tokens is None and name == "attention_mask":
                tokens = t.detach().sum()
        if not parts:
            return
        first = tensors[0][1]
        if self.window.batch is None and first.dim() > 0:
            self.window.batch = int(first.shape[0])
        self.window.digests.append(_stack(parts).reshape(-1) if len(parts) > 1 else parts[0])
        if tokens is not None:
            self.window.tokens.append(tokens)

    # -- backward --------------------------------------------------------------------------
    def before_backward(self, loss: Any) -> Backward:
        if rt.LATE:
            rt.run_late()
        self.counters["bwd"] += 1
        self.counters["phase"] = "backward"
        self.safe("comm", self.ensure_comm_hooks)
        b = Backward()
        if isinstance(loss, torch.Tensor) and loss.numel() == 1:
            original = self.scaled_map.get(loss)
            source = original if original is not None else loss
            b.loss = source.detach().reshape(()).to(torch.float32).clone()
            b.factor, b.tensor_div, b.terms = _loss_factor(loss, self.scalers)
            self.loss_ptrs = [*self.loss_ptrs[-3:], loss.data_ptr()]
            if original is not None:
                self.loss_ptrs.append(original.data_ptr())
        if self.window.zero_after_backward:
            self.window.zero_between = True
        self.cur_bwd = b
        return b

    def after_backward(self, b: Backward) -> None:
        self.counters["phase"] = "step"
        ddp = self._last_ddp()
        if ddp is not None:
            b.flag = bool(ddp.require_backward_grad_sync)
        self.window.backwards.append(b)
        self.window.zero_after_backward = False
        self.cur_bwd = None

    def _last_ddp(self) -> Any:
        for ref in reversed(self.ddps):
            ddp = ref()
            if ddp is not None:
                return ddp
        return None

    def on_bucket(self, bucket: Any) -> Backward:
        self.counters["buckets"] += 1
        b = self.cur_bwd
        if b is None:  # backward started outside the wrapped entry points
            b = Backward()
            self.cur_bwd = b
        b.buckets += 1
        b.pre.append(_norm_sq(bucket.buffer()))
        return b

    # -- optimizer -------------------------------------------------------------------------
    def is_primary(self, opt: Any) -> bool:
        """Steps are counted on one optimizer: the first that steps. Steps taken before any
        model was wrapped (a rank-0-only pre-training, say) are not the job's training: the
        first step of an optimizer over DDP's parameters, or of a DeepSpeed engine's optimizer,
        starts the count again."""
        current = self.primary() if self.primary is not None else None
        if (
            current is not opt
            and self.primary_before_wrap
            and ((self.ddps and self._over_ddp(opt)) or id(opt) in self.ds_opts)
        ):
            # also when the pre-training's optimizer is gone (a local of a function that
            # returned): its steps are still in the count
            self.restart(opt)
        elif current is not opt and self._next_phase(opt, current):
            self.restart(opt, "phase")
        elif current is None:
            self.primary = weakref.ref(opt)
            self.primary_before_wrap = not self.ddps and not self.ds_info
            self.primary_ddps = self._ddps_of(opt)
            self.primary_id = id(opt)
            self.primary_sig = self._signature(opt)
            self.cfg(f"opt{id(opt)}", _optimizer_record(opt))
        if current is opt:
            self.takeover = (0, 0)
        return self.primary is not None and self.primary() is opt

    def _ddps_of(self, opt: Any) -> frozenset[int]:
        """The DDP wrappers whose reducer holds parameters ``opt`` steps (read once per
        optimizer and wrapper count: another optimizer's every step asks)."""
        wrappers = len(self.ddp_info)
        known = self.opt_ddps.get(opt)
        if known is None or known[0] != wrappers:
            ids = {id(p) for g in opt.param_groups for p in g["params"]}
            found = frozenset(k for k, info in self.ddp_info.items() if ids & info["reducer"])
            known = self.opt_ddps[opt] = (wrappers, found)
        return known[1]

    def _signature(self, opt: Any) -> tuple[int, int]:
        known = self.opt_sigs.get(opt)
        if known is None:
            known = self.opt_sigs[opt] = _param_signature(opt)
        return known

    def _next_phase(self, opt: Any, current: Any) -> bool:
        """Training moved on to another DDP model with an optimizer of its own (a teacher
        trained under DDP, then the student distilled from it; pre-training, then
        fine-tuning): the counted optimizer is gone, or has not stepped for PHASE_STEPS steps
        of ``opt`` in a row. An optimizer over the same wrapper (one made afresh), or one
        taking turns with the counted one (a GAN's), or one over a model shaped exactly like
        the counted one's (rebuilt to resume), is no new phase."""
        if self.primary is None or not self.ddps or id(opt) in self.retired:
            return False
        mine = self._ddps_of(opt)
        if not mine or mine <= self.primary_ddps:
            return False
        if self._signature(opt) == self.primary_sig:
            # the same model built again (a job that rebuilds model, optimizer and scheduler
            # each epoch and resumes them from its checkpoint): the same training goes on
            return False
        if current is None:
            return True
        runs = self.takeover[1] + 1 if self.takeover[0] == id(opt) else 1
        self.takeover = (id(opt), runs)
        return runs >= PHASE_STEPS

    def _over_ddp(self, opt: Any) -> bool:
        known = self.over_ddp.get(id(opt))
        if known is not None:
            return known
        ids = set().union(*(info["reducer"] for info in self.ddp_info.values()))
        found = any(id(p) in ids for g in opt.param_groups for p in g["params"])
        self.over_ddp[id(opt)] = found
        return found

    def restart(self, opt: Any, why: str = "wrapped") -> None:
        """Start counting steps again on ``opt``; the reader drops the steps counted before
        (``why``: "wrapped" after a phase before any wrapping, "phase" when training moved on
        to another DDP model). The new phase's first step is checked and its loop searched
        for frozen models again."""
        self.write_pending_step()
        self.record({"k": "restart", "why": why, "s": self.step, "cls": type(opt).__name__})
        if why == "phase":
            # the optimizer counted so far never takes the count back: optimizers that take
            # turns in long runs (an actor's and a critic's epochs) restart it once, not each time
            self.retired.add(self.primary_id)
        self.primary = weakref.ref(opt)
        self.primary_before_wrap = False
        self.primary_ddps = self._ddps_of(opt)
        self.primary_id = id(opt)
        self.primary_sig = self._signature(opt)
        self.takeover = (0, 0)
        if why == "phase":
            self.first_checked = False
            self.aux_searched = False
            self.aux = []
        self.cfg(f"opt{id(opt)}", _optimizer_record(opt))
        self.step = 0  # the window under way already belongs to the first step of the new count

    def on_opt_pre(self, opt: Any) -> None:
        if id(opt) in self.opt_stack:  # an earlier step of it raised: start afresh
            self.opt_stack.clear()
        outermost = not self.opt_stack
        self.opt_stack.append(id(opt))
        current = self.primary() if self.primary is not None else None
        first = outermost and self.step == 0 and not self.first_checked
        if outermost and (current is None or current is opt):
            self.safe("lowp", self._sample_low_precision, opt)
        if first and self.ddps and (current is None or current is opt):
            # Replicas as the first step's forward and backward saw them: DDP broadcast them
            # at wrapping, so a difference now was made on some ranks since then (and an
            # optimizer that re-broadcasts parameters may hide it later).
            self.first_checked = True
            self.check(opt, False)

    def on_opt_post(self, opt: Any) -> None:
        if self.opt_stack and self.opt_stack[-1] == id(opt):
            self.opt_stack.pop()
        self.opt_steps[id(opt)] = self.opt_steps.get(id(opt), 0) + 1
        if self.opt_stack:
            # Stepped inside another optimizer's step (ZeroRedundancyOptimizer steps its local
            # optimizer, then broadcasts the parameters): the outer step is the boundary.
            self.nested_opts.add(id(opt))
            return
        if id(opt) not in self.opt_seen:
            self.opt_seen.add(id(opt))
            self.cfg(f"opt{id(opt)}", _optimizer_record(opt))
        if not self.is_primary(opt):
            if not self.ds_in_step:
                self._hand_to_other_optimizer()
        else:
            if self.ds_in_step and self.ds_step_counted:
                # the same engine step, another parameter group: one step of the training
                self.lowp_sample = []
                return
            self.safe("lowp", self._count_lost_updates)
            if not self.aux_searched and self.ddps:
                self.aux_searched = True
                self.safe("aux", self._find_aux_models, opt, sys._getframe(1))
            self.end_step(opt, skipped=False)
            if self.ds_in_step:
                self.ds_step_counted = True
        self.lowp_sample = []

    def _find_aux_models(self, opt: Any, frame: Any) -> None:
        """Modules with parameters in the training loop's scope (its frames' local and module
        names, one attribute level into ``self``) that no DDP wrapper holds and the counted
        optimizer does not step. Each gets a forward pre-hook that notes a call made while a
        DDP model is in training mode; checks then fingerprint those that ran, to compare
        across ranks the weights every rank's training forward depends on."""
        stepped = {id(p) for g in opt.param_groups for p in g["params"]}
        seen: set[int] = set()
        found: list[Any] = []

        def take(x: Any) -> None:
            if len(found) >= MAX_AUX or not isinstance(x, torch.nn.Module) or id(x) in seen:
                return
            seen.add(id(x))
            if isinstance(x, DDP_TYPES) or x in self.wrapped_modules:
                return
            params = list(x.parameters())
            if not params or any(id(p) in stepped for p in params):
                return
            found.append(x)

        depth = 0
        while frame is not None and depth < 12:
            name = str(frame.f_globals.get("__name__", ""))
            depth += 1
            if name.startswith(("torch", "ddpadvisor_trace_agent")):
                frame = frame.f_back
                continue
            for scope in (frame.f_locals, frame.f_globals):
                for v in list(scope.values())[:256]:
                    take(v)
            owner = frame.f_locals.get("self")
            if owner is not None and not isinstance(owner, torch.nn.Module):
                for v in list(getattr(owner, "__dict__", {}).values())[:64]:
                    take(v)
            frame = frame.f_back
        for m in found:
            slot: list[Any] = [weakref.ref(m), False]
            self.aux.append(slot)

            def pre(module: Any, args: Any, slot: list[Any] = slot) -> None:
                if not slot[1] and any(
                    (d := ref()) is not None and d.training for ref in self.ddps
                ):
                    slot[1] = True

            rt.on_undo(m.register_forward_pre_hook(pre).remove)

    def _hand_to_other_optimizer(self) -> None:
        """Another optimizer stepped (a GAN's generator while the discriminator's is counted,
        say): the backwards since the counted optimizer's last step fed that step, not the next
        one of the counted optimizer. They leave the window, with the zero_grad and clip calls
        seen around them, so that they do not read as micro-batches of an accumulation."""
        w = self.window
        w.others += 1
        if not w.backwards and not w.clips:
            return
        w.backwards = []
        w.zero_after_backward = False
        w.zero_between = False
        w.clips = []

    def _sample_low_precision(self, opt: Any) -> None:
        """Before a step: a fixed sample of the float16/bfloat16 parameters the optimizer steps
        in place (no float32 master copy), their values and where their gradient is non-zero."""
        self.lowp_sample = []
        low = self.lowp_opts.get(id(opt))
        if low is None:  # looked up once per optimizer, not on every step
            low = any(
                p.dtype in (torch.float16, torch.bfloat16)
                for group in opt.param_groups
                for p in group["params"]
            )
            self.lowp_opts[id(opt)] = low
        if not low:
            return
        for group in opt.param_groups:
            for p in group["params"]:
                if len(self.lowp_sample) >= LOWP_TENSORS:
                    return
                if p.dtype not in (torch.float16, torch.bfloat16) or p.grad is None:
                    continue
                flat = rt._local(p).detach().reshape(-1)
                grad = rt._local(p.grad).detach().reshape(-1)
                if flat.numel() == 0 or grad.numel() != flat.numel():
                    continue
                idx = torch.arange(0, flat.numel(), max(1, flat.numel() // LOWP_SAMPLE))
                idx = idx[:LOWP_SAMPLE].to(flat.device)
                self.lowp_sample.append((p, idx, flat[idx].clone(), grad[idx] != 0))

    def _count_lost_updates(self) -> None:
        """After the step: sampled elements with a non-zero gradient whose value did not move
        (the update rounded away at the weight's precision), against all such elements."""
        if not self.lowp_sample:
            return
        lost, moved = [], []
        for p, idx, before, nonzero in self.lowp_sample:
            after = rt._local(p).detach().reshape(-1)[idx]
            lost.append(((after == before) & nonzero).sum())
            moved.append(nonzero.sum())
        self.window.lowp = [_stack(lost).sum(), _stack(moved).sum()]

    def end_step(self, opt: Any, skipped: bool) -> None:
        self.write_pending_step()
        self.step += 1
        self.counters["phase"] = "loop"
        w = self.window
        rec: dict[str, Any] = {"k": "step", "s": self.step}
        if skipped:
            rec["skip"] = True
        bws = w.backwards
        if bws:
            rec["loss"] = [b.loss for b in bws]
            rec["fac"] = [b.factor for b in bws]
            if any(b.terms > 1 for b in bws):
                rec["fterms"] = [b.terms for b in bws]
            if any(b.tensor_div for b in bws):
                rec["tdiv"] = [b.tensor_div for b in bws]
            rec["syn"] = [b.buckets > 0 for b in bws]
            rec["bflag"] = [b.flag for b in bws]
            synced = [b for b in bws if b.buckets]
            if synced:
                last = synced[-1]
                rec["pre"] = _stack(last.pre).sum().sqrt()
                if last.post:
                    rec["post"] = _stack(last.post).sum().sqrt()
        rec["lr"] = [_plain(g.get("lr")) for g in opt.param_groups]
        if w.digests:
            rec["dig"] = w.digests
        if w.tokens:
            rec["tok"] = w.tokens
        if w.ce:
            rec["ce"] = w.ce
        if w.lowp:
            rec["lowp"] = w.lowp
        if w.fwd_flags:
            rec["fflag"] = w.fwd_flags
        if (
            bws
            and not w.bypass
            and not w.fwd_flags
            and self.ddps
            and not any(b.buckets for b in bws)
            and self._over_ddp(opt)
        ):
            # gradients on a DDP model's parameters with no forward through any wrapper in
            # the window: its inner module ran in a way no hook saw (compiled on its own, say)
            w.bypass = len(bws)
            rec["bypi"] = True
        if w.bypass:
            rec["byp"] = w.bypass
        if w.zero_calls:
            rec["zc"] = w.zero_calls
        if w.others:
            rec["oth"] = w.others
        if w.zero_between:
            rec["zb"] = True
        rec["sch"] = w.sched
        if w.clips:
            rec["clip"] = [c["norm"] for c in w.clips]
            rec["cctx"] = [
                [c["unsynced"], c["before_unscale"], c["n_bwd"] < len(bws), c["n_bwd"]]
                for c in w.clips
            ]
        if w.loss_reads:
            rec["lread"] = w.loss_reads
        if w.reductions:
            rec["red"] = w.reductions
        if w.big_reductions:
            rec["bigred"] = w.big_reductions
        if w.big_collectives:
            rec["bigcol"] = w.big_collectives
        if w.rng:
            rec["rng"] = w.rng
        if w.batch is not None:
            rec["bs"] = w.batch
        if w.ds is not None:
            rec["ds"] = w.ds
            if w.ds.get("scale") is not None:  # a DeepSpeed fp16 loss scaler
                rec["scale"] = w.ds["scale"]
                rec["finf"] = 1 if w.ds.get("overflow") else 0
        self.window = Window()
        self.window.sched = 0
        self.since_flush += 1
        if w.scaled and self.scalers:
            self.pending_step = rec  # completed by scaler.update() with the new scale
        else:
            self.record(rec)
        if self.should_check(self.step):
            if self.ds_in_step:
                # A DeepSpeed engine writes the stepped weights back into its module (ZeRO:
                # from the fp32 partitions, then all-gathered) after the optimizer's step:
                # fingerprint them once engine.step() returns.
                self.ds_check = opt
            else:
                self.safe("check", self.check, opt, False)
        if self.since_flush >= DEVICE_FLUSH_EVERY:
            self.since_flush = 0
            self.writer.flush()
        if self.max_steps and self.step >= self.max_steps:
            self.stop_at_max_steps(opt)

    def write_pending_step(self, scaler: Any = None) -> None:
        rec, self.pending_step = self.pending_step, None
        if rec is None:
            return
        if scaler is not None:
            rec["scale"] = _clone(getattr(scaler, "_scale", None))
            rec["growth"] = _clone(getattr(scaler, "_growth_tracker", None))
            found = _found_inf(scaler)
            if found is not None:
                rec["finf"] = found
        self.record(rec)

    def should_check(self, step: int) -> bool:
        if step % self.every == 0:
            return True
        return step < self.every and (step & (step - 1)) == 0  # 1, 2, 4, 8, ... early on

    # -- checks ----------------------------------------------------------------------------
    def check(self, opt: Any, final: bool) -> None:
        """Fingerprints of parameters, gradients, optimizer state and scaler, per tensor."""
        self.counters["phase"] = "check"
        rec: dict[str, Any] = {"k": "chk", "s": self.step}
        if final:
            rec["final"] = True
        cats: dict[str, tuple[list[str], list[Any]]] = {}
        names_by_id: dict[int, str] = {}
        params: list[tuple[str, Any]] = []
        buffers: list[tuple[str, Any]] = []
        unreduced: list[str] = []
        for info in self.ddp_info.values():
            prefix = f"ddp{info['index']}." if len(self.ddp_info) > 1 else ""
            for name, ref in info["params"]:
                p = ref()
                if p is not None:
                    params.append((prefix + name, p))
                    names_by_id[id(p)] = prefix + name
            module = info["module"]()
            if module is not None:
                current = list(module.named_parameters())
                for name, p in current:  # parameters created after wrapping are checked too
                    if id(p) not in names_by_id:
                        params.append((prefix + name, p))
                        names_by_id[id(p)] = prefix + name
                unreduced += [
                    prefix + n
                    for n, p in current
                    if p.requires_grad and id(p) not in info["reducer"] and n not in info["ignored"]
                ]
                info["params"] = [(n, weakref.ref(p)) for n, p in current]
            for name, ref in info["buffers"]:
                b = ref()
                if b is not None:
                    buffers.append((prefix + name, b))
        opts = [o for o in ([opt] if opt is not None else []) if o is not None]
        partitioned = any(type(o).__name__ in PARTITIONED_OPTIMIZERS for o in opts)
        ds_sharded: set[str] = set()
        for ds in self.ds_info.values():
            ds_module = ds["module"]() if ds["module"] is not None else None
            if ds_module is None:
                continue
            # ZeRO stage >= 1 partitions the optimizer state across ranks; stage 3 partitions
            # the parameters too (each holds an empty placeholder outside a gather): only what
            # every rank holds in full is a replica
            partitioned = partitioned or ds["stage"] >= 1
            prefix = f"engine{ds['index']}." if len(self.ds_info) > 1 else ""
            for name, p in ds_module.named_parameters():
                if id(p) not in names_by_id:
                    params.append((prefix + name, p))
                    names_by_id[id(p)] = prefix + name
                    if ds["stage"] >= 3:
                        ds_sharded.add(prefix + name)
        if not params and opts:
            for gi, group in enumerate(opts[0].param_groups):
                for pi, p in enumerate(group["params"]):
                    params.append((f"group{gi}.param{pi}", p))
                    names_by_id[id(p)] = f"group{gi}.param{pi}"
        elif opts and self.ddp_info and not self.ds_info:
            # Parameters the counted optimizer steps that no DDP wrapper holds (a GAN's
            # discriminator left unwrapped, a head kept outside): checked as replicas too, and
            # counted, since nothing synchronises their gradients.
            stepped = 0
            outside: list[str] = []
            for gi, group in enumerate(opts[0].param_groups):
                for pi, p in enumerate(group["params"]):
                    if not getattr(p, "requires_grad", False):
                        continue
                    stepped += 1
                    if id(p) not in names_by_id and not _sharded(p):
                        name = f"opt.group{gi}.param{pi}"
                        params.append((name, p))
                        names_by_id[id(p)] = name
                        outside.append(name)
            if outside:
                rec["outside"] = [len(outside), stepped]
                unreduced += outside
        cats["params"] = ([n for n, _ in params], [p for _, p in params])
        aux: list[tuple[str, Any]] = []
        for i, (ref, used) in enumerate(self.aux):
            m = ref()
            if m is None or not used:
                continue
            aux += [(f"aux{i}.{type(m).__name__}.{n}", p) for n, p in m.named_parameters()]
        if aux:
            cats["aux"] = ([n for n, _ in aux], [p for _, p in aux])
        sharded = {n for n, p in params if _sharded(p)} | ds_sharded
        grads = [(n, p.grad) for n, p in params if p.grad is not None]
        cats["grads"] = ([n for n, _ in grads], [g for _, g in grads])
        state_names: list[str] = []
        state_tensors: list[Any] = []
        for o in opts:
            for gi, group in enumerate(o.param_groups):
                for pi, p in enumerate(group["params"]):
                    st = o.state.get(p)
                    if not st:
                        continue
                    base = names_by_id.get(id(p), f"group{gi}.param{pi}")
                    for key, value in st.items():
                        if isinstance(value, torch.Tensor):
                            state_names.append(f"{base}.{key}")
                            state_tensors.append(value)
                            if base in sharded or _sharded(value):
                                sharded.add(f"{base}.{key}")
        cats["optim"] = (state_names, state_tensors)
        for cat, (names, tensors) in cats.items():
            rec[cat] = _fingerprint(tensors)
            rec[cat + "_names"] = names
        if sharded:
            rec["sharded"] = sorted(sharded)
        if partitioned:
            rec["optim_partitioned"] = True
        for scaler in self.scalers:
            if getattr(scaler, "_scale", None) is not None:
                rec["scaler"] = [_clone(scaler._scale), _clone(scaler._growth_tracker)]
                break
        if unreduced:
            rec["unreduced"] = unreduced[:200]
            rec["n_unreduced"] = len(unreduced)
        self.record(rec)
        if buffers and not final:
            self.buffer_check_step = self.step
        self.counters["phase"] = "loop"

    def check_buffers(self, info: dict[str, Any]) -> None:
        """Buffers right after DDP's forward broadcast, before this forward updates them."""
        step = self.buffer_check_step
        self.buffer_check_step = None
        names, tensors = [], []
        for name, ref in info["buffers"]:
            b = ref()
            if b is not None:
                names.append(name)
                tensors.append(b)
        if tensors:
            fp = _fingerprint(tensors)
            self.record({"k": "bufchk", "s": step, "buffers": fp, "buffers_names": names})

    def final_check(self, reason: str) -> None:
        if self.final_done or not self.active:
            return
        self.final_done = True
        opt = self.primary() if self.primary is not None else None
        self.check(opt, final=True)
        self.record({"k": "final", "why": reason, "s": self.step})

    def stop_at_max_steps(self, opt: Any) -> None:
        self.safe("final", self.final_check, "max_steps")
        self.safe("end", self.finish, "max_steps")
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(0)

    def finish(self, reason: str) -> None:
        self.write_pending_step()
        self.record(
            {
                "k": "end",
                "why": reason,
                "s": self.step,
                "fwd": self.counters["fwd"],
                "bwd": self.counters["bwd"],
                "sched": self.sched_total,
                "plans": [v for v in self.sched_plans.values() if v[1]],
                # DeepSpeed never imported: no engine can have run unseen
                "dsmod": "deepspeed" in sys.modules,
                "opt_steps": sorted(self.opt_steps.values()),
            }
        )
        self.writer.flush()

    def at_exit(self) -> None:
        if not self.writer.mine:
            return
        self.safe("final", self.final_check, "exit")
        self.safe("end", self.finish, "exit")


def _plain(x: Any) -> Any:
    if torch is not None and isinstance(x, torch.Tensor):
        return x.detach().clone()
    return x


def _clone(x: Any) -> Any:
    return x.detach().clone() if isinstance(x, torch.Tensor) else x


def _norm_sq(t: Any) -> Any:
    x = t.detach()
    if x.dtype in (torch.float16, torch.bfloat16):
        x = x.to(torch.float32)
    n = torch.linalg.vector_norm(x).to(torch.float64)
    return n * n


def _found_inf(scaler: Any) -> Any:
    states = getattr(scaler, "_per_optimizer_states", None)
    if not states:
        return None
    flags = [
        t.reshape(())
        for st in list(states.values())
        for t in st.get("found_inf_per_device", {}).values()
    ]
    return _stack(flags).sum() if flags else None


def _loss_factor(loss: Any, scalers: Any) -> tuple[float | None, bool, int]:
    """Constant factor applied to the loss right before backward (``loss / k``, ``loss * w``),
    and how many terms the loss sums below it.

    Walks down the last Mul/Div nodes of the autograd graph whose other operand is a constant.
    Python scalars are saved as CPU tensors, so reading them never synchronises a GPU. A
    GradScaler's scale is skipped; a division by a device tensor (a token count) is reported as
    ``tensor_div`` with an unknown factor. Where the walk ends at a sum (``a + b - c``) the
    terms are counted: a factor inside one of them is not seen, and ``(a + b) / 2`` is an
    average of two terms as much as a division by a world size of 2.
    """
    scale_ptrs = set()
    for s in list(scalers):
        sc = getattr(s, "_scale", None)
        if sc is not None:
            scale_ptrs.add(sc.data_ptr())
    factor = 1.0
    fn = loss.grad_fn
    nr = getattr(loss, "output_nr", 0)
    for _ in range(8):
        if fn is None:
            break
        name = type(fn).__name__
        if _is_identity_sink(fn):
            # an identity wrapper (DDP's ``_DDPSink``, ZeRO-3's pre-backward function):
            # follow the edge of the output this loss came from
            edges = fn.next_functions
            if not 0 <= nr < len(edges) or edges[nr][0] is None:
                break
            fn, nr = edges[nr]
            continue
        if name not in ("DivBackward0", "MulBackward0"):
            return factor, False, _summed_terms(fn)
        try:
            other = fn._saved_other
        except Exception:
            return None, False, 1
        if not isinstance(other, torch.Tensor) or other.numel() != 1 or other.requires_grad:
            return (factor if factor != 1.0 else None), False, 1
        if other.data_ptr() in scale_ptrs:
            pass  # the GradScaler's multiplication
        elif other.device.type != "cpu":
            return None, name == "DivBackward0", 1
        else:
            value = float(_ORIG.get("item", torch.Tensor.item)(other))
            if value == 0.0 or not math.isfinite(value):
                return None, False, 1
            factor = factor / value if name == "DivBackward0" else factor * value
        nxt = [(f, n) for f, n in fn.next_functions if f is not None]
        if len(nxt) != 1:
            break
        fn, nr = nxt[0]
    return factor, False, 1


def _param_signature(opt: Any) -> tuple[int, int]:
    """How many parameters an optimizer steps and how many numbers they hold: the same for a
    model built again from the same code, different for another model as a rule."""
    params = [p for g in opt.param_groups for p in g["params"]]
    return len(params), sum(int(p.numel()) for p in params)


_SUMS = ("AddBackward0", "SubBackward0")


def _summed_terms(fn: Any, depth: int = 0) -> int:
    """How many terms a chain of additions and subtractions sums (1 for any other node);
    nested sums are followed a few levels, a constant added in counts as no term."""
    if type(fn).__name__ not in _SUMS or depth > 6:
        return 1
    return sum(_summed_terms(f, depth + 1) for f, _ in fn.next_functions if f is not None)


# Autograd functions that frameworks wrap around a module's outputs (or inputs) only to run
# code in backward, handing every gradient through unchanged: DDP's ``_DDPSink`` (when it must
# find unused parameters), torch's ``BackwardHookFunction`` (full backward hooks), and DeepSpeed
# ZeRO-3's pre/post-backward functions, which gather and release partitioned parameters
# (deepspeed/runtime/zero/parameter_offload.py). A loss factor is read through them.
IDENTITY_FUNCTIONS = frozenset(
    {
        "_DDPSink",
        "BackwardHookFunction",
        "PreBackwardFunctionForModule",
        "PostBackwardFunctionModule",
        "PreBackwardFunction",
        "PostBackwardFunction",
    }
)


def _is_identity_sink(fn: Any) -> bool:
    """The backward node of a function that hands each output's gradient through unchanged."""
    cls = getattr(fn, "_forward_cls", None)
    return getattr(cls, "__name__", "") in IDENTITY_FUNCTIONS and len(fn.next_functions) > 0


def _optimizer_record(opt: Any) -> dict[str, Any]:
    g = opt.param_groups[0] if opt.param_groups else {}
    keep = {}
    for key in ("lr", "betas", "eps", "weight_decay", "momentum", "foreach", "fused"):
        if key in g:
            value = g[key]
            keep[key] = rt.tolist(value) if isinstance(value, torch.Tensor) else value
    rec = {
        "k": "opt",
        "cls": type(opt).__name__,
        "module": type(opt).__module__,
        "groups": len(opt.param_groups),
        "n_params": sum(len(gr["params"]) for gr in opt.param_groups),
        "hp": keep,
    }
    inner = _inner_optimizer(opt)
    if inner is not None:
        rec["inner"] = type(inner).__name__
    return rec


# Where a wrapper keeps the optimizer it steps: ZeroRedundancyOptimizer's ``optim`` (built
# from ``optimizer_class``, torch/distributed/optim/zero_redundancy_optimizer.py),
# accelerate's AcceleratedOptimizer and DeepSpeed's ZeRO optimizers' ``optimizer``, the
# ``base_optimizer`` of Lookahead and SAM-style wrappers.
INNER_ATTRS = ("optim", "optimizer", "base_optimizer")


def _inner_optimizer(opt: Any) -> Any:
    """The innermost optimizer a wrapper steps (at most three levels down), read from the
    instances' own attributes (no property runs); None when ``opt`` wraps none."""
    inner = None
    current = opt
    for _ in range(3):
        own = getattr(current, "__dict__", None) or {}
        found = next(
            (
                v
                for v in (own.get(a) for a in INNER_ATTRS)
                if isinstance(v, torch.optim.Optimizer) and v is not current
            ),
            None,
        )
        if found is None:
            break
        inner = current = found
    return inner


def _ddp_pre_forward(ddp: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    a = rt.AGENT
    if a is None or _compiling():
        return None
    a.in_ddp_forward += 1
    a.safe("forward", a.on_forward, ddp, args, kwargs)
    return None


def _ddp_post_forward(ddp: Any, args: Any, output: Any) -> None:
    a = rt.AGENT
    if a is None or _compiling():
        return None
    a.in_ddp_forward = max(0, a.in_ddp_forward - 1)
    a.safe("forward", a.after_forward, ddp)
    return None


def _inner_pre_forward(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    a = rt.AGENT
    if a is None or _compiling():
        return None
    if a.buffer_check_step is not None:
        for info in a.ddp_info.values():
            if info["module"]() is module:
                a.safe("buffers", a.check_buffers, info)
                break
    a.in_inner_forward += 1
    if a.in_ddp_forward == 0 and torch.is_grad_enabled():
        a.window.bypass += 1
        a.safe("forward", a.digest_inputs, args, kwargs)
    return None


def _inner_post_forward(module: Any, args: Any, output: Any) -> None:
    a = rt.AGENT
    if a is not None:
        a.in_inner_forward = max(0, a.in_inner_forward - 1)
    return None


def _part_pre_forward(module: Any, args: Any) -> None:
    a = rt.AGENT
    if a is None or _compiling():
        return None
    if a.in_ddp_forward == 0 and a.in_inner_forward == 0 and torch.is_grad_enabled():
        a.window.bypass += 1
    return None


def _on_ddp_collected(index: int) -> None:
    a = rt.AGENT
    if a is not None and a.writer.mine:
        a.safe("final", a.final_check, "ddp_deleted")


def _observing_hook(inner: Callable[..., Any]) -> Callable[..., Any]:
    """A DDP comm hook that observes the bucket and leaves the reduction to ``inner``."""

    # No annotations: DDP rejects a comm hook whose annotations are not GradBucket/Future.
    def hook(state, bucket):  # type: ignore[no-untyped-def]
        a = rt.AGENT
        b = a.safe("comm", a.on_bucket, bucket) if a is not None else None
        with INTERNAL:
            fut = inner(state, bucket)
        if b is None:
            return fut

        def after(f: Any) -> Any:
            value = f.value()
            tensor = value[0] if isinstance(value, (list, tuple)) else value
            with contextlib.suppress(Exception):
                b.post.append(_norm_sq(tensor))
            return value

        return fut.then(after)

    hook.__qualname__ = getattr(inner, "__qualname__", "hook")
    hook.__name__ = getattr(inner, "__name__", "hook")
    return hook


def _record_load(a: Agent, target: Any, kind: str) -> None:
    wrapped = target in a.wrapped_modules if kind == "model" else False
    if kind in ("optimizer", "scaler"):
        wrapped = bool(a.ddps or a.ds_info)
    a.record(
        {
            "k": "load",
            "kind": kind,
            "cls": type(target).__name__,
            "after_wrap": bool(a.ddps or a.ds_info),
            "wrapped": wrapped,
            "s": a.step,
        }
    )
