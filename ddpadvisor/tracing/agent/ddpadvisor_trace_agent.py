"""The ddpadvisor trace agent: records what a DDP job really does, per rank and per step.

Installed by ``sitecustomize`` (same folder) right after the training script imports torch.
It only uses torch's extension points and thin wrappers around public entry points:

* global optimizer step pre/post hooks: the step boundary, LR, periodic checksums;
* a DDP communication hook that delegates to the stock all-reduce (or to the user's own hook):
  whether a backward synchronised, pre-sync local and post-sync global gradient norms;
* forward hooks on each DDP module and its inner module: input digests, the
  ``require_backward_grad_sync`` flag, forwards that bypass the wrapper;
* global module/parameter registration hooks: modules created after wrapping;
* wrappers of ``Tensor.backward``, ``zero_grad``, ``clip_grad_norm_``, ``GradScaler``,
  LR schedulers, ``BatchSampler``/``DistributedSampler``, ``load_state_dict``, ``autocast``.

Each rank writes ``rank<R>.jsonl`` in ``$DDPADVISOR_TRACE``: one JSON object per line, written
and flushed per record. Per-step values stay tensors on their device; records holding CUDA
tensors are queued and copied to the host in one transfer every few steps, so a GPU job gets no
per-step host synchronisation from the agent. Parameter, buffer, gradient and optimizer-state
fingerprints are taken every K steps (more often at the start) and written like everything
else: the agent runs no collective of its own, so ranks that step unevenly (a rank-0-only
phase, ``join()``, evaluation on one rank) are never held up; the reader compares the ranks'
files offline, step by step.

The agent never draws random numbers, never writes to a user tensor and never raises into the
user's code: a failure inside a hook disables that part of the agent and is logged once.

Standard library and torch only, so this folder can be copied to a cluster on its own.
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import functools
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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:  # the format module beside us
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))
from ddpadvisor_trace_format import FORMAT_VERSION

ENV_DIR = "DDPADVISOR_TRACE"
ENV_EVERY = "DDPADVISOR_TRACE_EVERY"
ENV_MAX_STEPS = "DDPADVISOR_TRACE_MAX_STEPS"
DEFAULT_EVERY = 50

RNG_FETCHES_PER_ITERATOR = 32  # RNG digests cost ~20 us; the first batches of each epoch suffice
INDEX_CHUNK_BATCHES = 64  # sampler indices are written in chunks of this many batches
INDEX_LIMIT = 65536  # above this many indices per epoch, keep a hash-selected subset
DEVICE_FLUSH_EVERY = 16  # optimizer steps between host copies of queued CUDA values
DIGEST_PREFIX = 4096  # elements of each input tensor that enter the order-sensitive digest
PENDING_LIMIT = 4096  # records kept before the process group exists (then written)
SMALL_COLLECTIVE = 16  # user collectives on at most this many elements count as metric reductions

torch: Any = None  # bound in install(); the module is imported by the user first
_agent: Agent | None = None
_internal = threading.local()  # set while the agent itself runs torch code that we also wrap


def _busy() -> bool:
    return getattr(_internal, "depth", 0) > 0


class _Internal:
    def __enter__(self) -> None:
        _internal.depth = getattr(_internal, "depth", 0) + 1

    def __exit__(self, *exc: object) -> None:
        _internal.depth -= 1


INTERNAL = _Internal()


def _in_data_worker() -> bool:
    try:
        return torch.utils.data.get_worker_info() is not None
    except Exception:
        return False


def _compiling() -> bool:
    try:
        return bool(torch.compiler.is_compiling())
    except Exception:
        return False


# ----------------------------------------------------------------------------------- helpers
def _fingerprint(tensors: list[Any]) -> Any:
    """float64 sum and sum of squares of every tensor, stacked as an [n, 2] tensor on device."""
    if not tensors:
        return torch.zeros((0, 2), dtype=torch.float64)
    rows = []
    for t in tensors:
        d = t.detach()
        if d.is_complex():
            d = torch.view_as_real(d)
        d = d.to(torch.float64)
        rows.append(torch.stack([d.sum(), (d * d).sum()]))
    return torch.stack(rows)


def _seed_digests() -> dict[str, str]:
    """Per-generator digests (torch CPU, python, numpy), to compare seeding across ranks."""
    import random

    out = {}
    state = torch.random.get_rng_state()
    np = sys.modules.get("numpy")
    raw = state.numpy().tobytes() if np is not None else bytes(_tolist(state))
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


# ------------------------------------------------------------------------------------ writer
class Writer:
    """Per-rank JSONL file: one record per line, flushed per record.

    Records may hold tensors. Records whose tensors are all on the CPU are written at once;
    records holding device tensors wait for :meth:`flush`, which copies all their values to the
    host in one transfer per device.
    """

    def __init__(self, out_dir: Path) -> None:
        self.dir = out_dir
        self.pid = os.getpid()
        self.fh: Any = None
        self.pending: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    @property
    def mine(self) -> bool:  # a forked DataLoader worker inherits the agent but must not write
        return os.getpid() == self.pid

    def open(self, rank: int) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.fh = open(self.dir / f"rank{rank}.jsonl", "a", encoding="utf-8")  # noqa: SIM115

    def add(self, rec: dict[str, Any]) -> None:
        if not self.mine:
            return
        with self.lock:
            if self.fh is None and len(self.pending) >= PENDING_LIMIT:
                return  # a process that never joins a process group never writes: keep it small
            self.pending.append(rec)
            if self.fh is not None and not _on_device(rec):
                self._write_pending()

    def flush(self) -> None:
        if not self.mine:
            return
        with self.lock:
            if self.fh is not None:
                self._write_pending()

    def _write_pending(self) -> None:
        if not self.pending:
            return
        records, self.pending = self.pending, []
        with INTERNAL:
            _materialise(records)
        for rec in records:
            self.fh.write(json.dumps(rec, separators=(",", ":"), default=str) + "\n")
            self.fh.flush()


def _walk_tensors(obj: Any, out: list[tuple[Any, Any, Any]]) -> None:
    items = obj.items() if isinstance(obj, dict) else enumerate(obj)
    for key, value in items:
        if isinstance(value, (dict, list)):
            _walk_tensors(value, out)
        elif torch is not None and isinstance(value, torch.Tensor):
            out.append((obj, key, value))


def _on_device(rec: dict[str, Any]) -> bool:
    found: list[tuple[Any, Any, Any]] = []
    _walk_tensors(rec, found)
    return any(t.device.type != "cpu" for _, _, t in found)


_tolist: Callable[[Any], Any] = lambda t: t.tolist()  # noqa: E731  (rebound to the original)


def _materialise(records: list[dict[str, Any]]) -> None:
    """Replace every tensor in the records by plain numbers, one host copy per device."""
    found: list[tuple[Any, Any, Any]] = []
    for rec in records:
        _walk_tensors(rec, found)
    by_device: dict[str, list[tuple[Any, Any, Any]]] = {}
    for slot in found:
        by_device.setdefault(str(slot[2].device), []).append(slot)
    for device, slots in by_device.items():
        if device == "cpu":
            for holder, key, t in slots:
                holder[key] = _tolist(t.detach())
            continue
        flat = torch.cat([t.detach().reshape(-1).to(torch.float64) for _, _, t in slots])
        values = _tolist(flat.cpu())
        pos = 0
        for holder, key, t in slots:
            n = t.numel()
            chunk = values[pos : pos + n]
            pos += n
            if t.dim() == 0:
                holder[key] = chunk[0]
            else:
                holder[key] = _reshape(chunk, list(t.shape))
            if t.dtype in (torch.int64, torch.int32, torch.bool):
                holder[key] = _as_int(holder[key])


def _reshape(flat: list[Any], shape: list[int]) -> Any:
    if len(shape) <= 1:
        return flat
    step = len(flat) // shape[0] if shape[0] else 0
    return [_reshape(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


def _as_int(x: Any) -> Any:
    if isinstance(x, list):
        return [_as_int(v) for v in x]
    return int(x) if isinstance(x, float) and math.isfinite(x) else x


# ------------------------------------------------------------------------------ step window
class Backward:
    """One call of backward(): its loss, how the loss was scaled, and what it synchronised."""

    __slots__ = ("buckets", "factor", "flag", "loss", "post", "pre", "tensor_div")

    def __init__(self) -> None:
        self.loss: Any = None
        self.factor: float | None = 1.0
        self.tensor_div = False
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
        self.rng: list[list[Any]] = []
        self.batch: int | None = None


# ------------------------------------------------------------------------------------- agent
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
        self.wrapped_modules: weakref.WeakSet[Any] = weakref.WeakSet()
        self.in_ddp_forward = 0
        self.primary: weakref.ref[Any] | None = None
        self.opt_steps: dict[int, int] = {}
        self.opt_seen: set[int] = set()
        self.primary_before_wrap = False
        self.over_ddp: dict[int, bool] = {}  # optimizer id -> it holds DDP-wrapped parameters
        self.scalers: weakref.WeakSet[Any] = weakref.WeakSet()
        self.scaled_map: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self.loss_ptrs: list[int] = []
        self.sched_depth = 0
        self.sched_total = 0
        self.sampler_ids: dict[int, int] = {}
        self.iterations = 0
        self.set_epoch_calls: dict[int, list[int]] = {}
        self.buffer_check_step: int | None = None
        self.final_done = False
        self.seen_cfg: set[str] = set()
        self.counters = {"fwd": 0, "bwd": 0, "buckets": 0, "phase": "start"}
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
        info = {
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
        self.window.digests.append(torch.cat(parts) if len(parts) > 1 else parts[0])
        if tokens is not None:
            self.window.tokens.append(tokens)

    # -- backward --------------------------------------------------------------------------
    def before_backward(self, loss: Any) -> Backward:
        self.counters["bwd"] += 1
        self.counters["phase"] = "backward"
        self.safe("comm", self.ensure_comm_hooks)
        b = Backward()
        if isinstance(loss, torch.Tensor) and loss.numel() == 1:
            original = self.scaled_map.get(loss)
            source = original if original is not None else loss
            b.loss = source.detach().reshape(()).to(torch.float32).clone()
            b.factor, b.tensor_div = _loss_factor(loss, self.scalers)
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
        first step of an optimizer over DDP's parameters starts the count again."""
        current = self.primary() if self.primary is not None else None
        if current is None:
            self.primary = weakref.ref(opt)
            self.primary_before_wrap = not self.ddps
            self.cfg(f"opt{id(opt)}", _optimizer_record(opt))
        elif self.primary_before_wrap and self.ddps and self._over_ddp(opt):
            self.restart(opt)
        return self.primary() is opt

    def _over_ddp(self, opt: Any) -> bool:
        known = self.over_ddp.get(id(opt))
        if known is not None:
            return known
        ids = set().union(*(info["reducer"] for info in self.ddp_info.values()))
        found = any(id(p) in ids for g in opt.param_groups for p in g["params"])
        self.over_ddp[id(opt)] = found
        return found

    def restart(self, opt: Any) -> None:
        """Start counting steps again on ``opt``; the reader drops the steps counted before."""
        self.write_pending_step()
        self.record({"k": "restart", "why": "wrapped", "s": self.step, "cls": type(opt).__name__})
        self.primary = weakref.ref(opt)
        self.primary_before_wrap = False
        self.cfg(f"opt{id(opt)}", _optimizer_record(opt))
        self.step = 0  # the window under way already belongs to the first step of the new count

    def on_opt_post(self, opt: Any) -> None:
        self.opt_steps[id(opt)] = self.opt_steps.get(id(opt), 0) + 1
        if id(opt) not in self.opt_seen:
            self.opt_seen.add(id(opt))
            self.cfg(f"opt{id(opt)}", _optimizer_record(opt))
        if self.is_primary(opt):
            self.end_step(opt, skipped=False)

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
            if any(b.tensor_div for b in bws):
                rec["tdiv"] = [b.tensor_div for b in bws]
            rec["syn"] = [b.buckets > 0 for b in bws]
            rec["bflag"] = [b.flag for b in bws]
            synced = [b for b in bws if b.buckets]
            if synced:
                last = synced[-1]
                rec["pre"] = torch.stack(last.pre).sum().sqrt()
                if last.post:
                    rec["post"] = torch.stack(last.post).sum().sqrt()
        rec["lr"] = [_plain(g.get("lr")) for g in opt.param_groups]
        if w.digests:
            rec["dig"] = w.digests
        if w.tokens:
            rec["tok"] = w.tokens
        if w.fwd_flags:
            rec["fflag"] = w.fwd_flags
        if w.bypass:
            rec["byp"] = w.bypass
        if w.zero_calls:
            rec["zc"] = w.zero_calls
        if w.zero_between:
            rec["zb"] = True
        rec["sch"] = w.sched
        if w.clips:
            rec["clip"] = [c["norm"] for c in w.clips]
            rec["cctx"] = [
                [c["unsynced"], c["before_unscale"], c["n_bwd"] < len(bws)] for c in w.clips
            ]
        if w.loss_reads:
            rec["lread"] = w.loss_reads
        if w.reductions:
            rec["red"] = w.reductions
        if w.big_reductions:
            rec["bigred"] = w.big_reductions
        if w.rng:
            rec["rng"] = w.rng
        if w.batch is not None:
            rec["bs"] = w.batch
        self.window = Window()
        self.window.sched = 0
        self.since_flush += 1
        if w.scaled and self.scalers:
            self.pending_step = rec  # completed by scaler.update() with the new scale
        else:
            self.record(rec)
        if self.should_check(self.step):
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
        if not params and opts:
            for gi, group in enumerate(opts[0].param_groups):
                for pi, p in enumerate(group["params"]):
                    params.append((f"group{gi}.param{pi}", p))
                    names_by_id[id(p)] = f"group{gi}.param{pi}"
        cats["params"] = ([n for n, _ in params], [p for _, p in params])
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
        cats["optim"] = (state_names, state_tensors)
        for cat, (names, tensors) in cats.items():
            rec[cat] = _fingerprint(tensors)
            rec[cat + "_names"] = names
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
                "opt_steps": sorted(self.opt_steps.values()),
            }
        )
        self.writer.flush()

    def at_exit(self) -> None:
        if not self.writer.mine:
            return
        self.safe("final", self.final_check, "exit")
        self.safe("end", self.finish, "exit")


# ---------------------------------------------------------------------------- small helpers
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
    return torch.stack(flags).sum() if flags else None


def _loss_factor(loss: Any, scalers: Any) -> tuple[float | None, bool]:
    """Constant factor applied to the loss right before backward (``loss / k``, ``loss * w``).

    Walks down the last Mul/Div nodes of the autograd graph whose other operand is a constant.
    Python scalars are saved as CPU tensors, so reading them never synchronises a GPU. A
    GradScaler's scale is skipped; a division by a device tensor (a token count) is reported as
    ``tensor_div`` with an unknown factor.
    """
    scale_ptrs = set()
    for s in list(scalers):
        sc = getattr(s, "_scale", None)
        if sc is not None:
            scale_ptrs.add(sc.data_ptr())
    factor = 1.0
    fn = loss.grad_fn
    for _ in range(6):
        if fn is None:
            break
        name = type(fn).__name__
        if name not in ("DivBackward0", "MulBackward0"):
            break
        try:
            other = fn._saved_other
        except Exception:
            return None, False
        if not isinstance(other, torch.Tensor) or other.numel() != 1 or other.requires_grad:
            return (factor if factor != 1.0 else None), False
        if other.data_ptr() in scale_ptrs:
            pass  # the GradScaler's multiplication
        elif other.device.type != "cpu":
            return None, name == "DivBackward0"
        else:
            value = float(_ORIG["item"](other))
            if value == 0.0 or not math.isfinite(value):
                return None, False
            factor = factor / value if name == "DivBackward0" else factor * value
        nxt = [f for f, _ in fn.next_functions if f is not None]
        if len(nxt) != 1:
            break
        fn = nxt[0]
    return factor, False


def _optimizer_record(opt: Any) -> dict[str, Any]:
    g = opt.param_groups[0] if opt.param_groups else {}
    keep = {}
    for key in ("lr", "betas", "eps", "weight_decay", "momentum", "foreach", "fused"):
        if key in g:
            value = g[key]
            keep[key] = _ORIG["tolist"](value) if isinstance(value, torch.Tensor) else value
    return {
        "k": "opt",
        "cls": type(opt).__name__,
        "module": type(opt).__module__,
        "groups": len(opt.param_groups),
        "n_params": sum(len(gr["params"]) for gr in opt.param_groups),
        "hp": keep,
    }


# ------------------------------------------------------------------- hook & wrapper bodies
def _ddp_pre_forward(ddp: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    a = _agent
    if a is None or _compiling():
        return None
    a.in_ddp_forward += 1
    a.safe("forward", a.on_forward, ddp, args, kwargs)
    return None


def _ddp_post_forward(ddp: Any, args: Any, output: Any) -> None:
    a = _agent
    if a is None or _compiling():
        return None
    a.in_ddp_forward = max(0, a.in_ddp_forward - 1)
    a.safe("forward", a.after_forward, ddp)
    return None


def _inner_pre_forward(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    a = _agent
    if a is None or _compiling():
        return None
    if a.buffer_check_step is not None:
        for info in a.ddp_info.values():
            if info["module"]() is module:
                a.safe("buffers", a.check_buffers, info)
                break
    if a.in_ddp_forward == 0 and torch.is_grad_enabled():
        a.window.bypass += 1
        a.safe("forward", a.digest_inputs, args, kwargs)
    return None


def _on_ddp_collected(index: int) -> None:
    a = _agent
    if a is not None and a.writer.mine:
        a.safe("final", a.final_check, "ddp_deleted")


def _observing_hook(inner: Callable[..., Any]) -> Callable[..., Any]:
    """A DDP comm hook that observes the bucket and leaves the reduction to ``inner``."""

    # No annotations: DDP rejects a comm hook whose annotations are not GradBucket/Future.
    def hook(state, bucket):  # type: ignore[no-untyped-def]
        a = _agent
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


_ORIG: dict[str, Any] = {}


def _wrap(owner: Any, name: str, key: str, make: Callable[[Any], Any]) -> None:
    original = getattr(owner, name, None)
    if original is None or getattr(original, "__ddpadvisor__", False):
        return
    _ORIG.setdefault(key, original)
    wrapper = make(original)
    functools.update_wrapper(wrapper, original)
    wrapper.__ddpadvisor__ = True
    setattr(owner, name, wrapper)


def _patch_distributed() -> None:
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    def make_init(orig: Any) -> Any:
        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            out = orig(*args, **kwargs)
            a = _agent
            if a is not None:
                a.safe("activate", a.activate)
            return out

        return init_process_group

    def make_destroy(orig: Any) -> Any:
        def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
            a = _agent
            if a is not None and a.active and not (args or kwargs.get("group")):
                a.safe("final", a.final_check, "destroy")
                a.safe("end", a.record, {"k": "destroy", "s": a.step})
                a.safe("end", a.writer.flush)
            return orig(*args, **kwargs)

        return destroy_process_group

    for owner in (dist, c10d):
        _wrap(owner, "init_process_group", f"init_process_group.{owner.__name__}", make_init)
        _wrap(owner, "destroy_process_group", f"destroy.{owner.__name__}", make_destroy)

    def make_collective(kind: str) -> Callable[[Any], Any]:
        def make(orig: Any) -> Any:
            def collective(*args: Any, **kwargs: Any) -> Any:
                a = _agent
                if a is not None and not _busy():
                    t = args[0] if args else None
                    if kind.startswith("all_gather") and len(args) > 1:
                        t = args[1]
                    if isinstance(t, torch.Tensor) and t.numel() <= SMALL_COLLECTIVE:
                        a.window.reductions += 1
                    elif isinstance(t, torch.Tensor) and kind == "all_reduce" and a.ddps:
                        a.window.big_reductions += 1  # e.g. gradients all-reduced by hand
                return orig(*args, **kwargs)

            return collective

        return make

    for kind in ("all_reduce", "reduce", "all_gather", "all_gather_into_tensor"):
        for owner in (dist, c10d):
            _wrap(owner, kind, f"{kind}.{owner.__name__}", make_collective(kind))


def _patch_ddp() -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    def make_init(orig: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            orig(self, *args, **kwargs)
            a = _agent
            if a is not None:
                a.safe("wrap", a.on_wrap, self)

        return __init__

    def make_register(orig: Any) -> Any:
        def register_comm_hook(self: Any, state: Any, hook: Any) -> Any:
            a = _agent
            if a is not None and "comm" not in a.disabled:
                info = a.ddp_info.get(id(self))
                if info is not None:
                    info["hooked"] = True
                name = getattr(hook, "__qualname__", type(hook).__name__)
                a.safe("comm", a.cfg, "comm_hook", {"k": "cfg", "comm_hook": name})
                hook = _observing_hook(hook)
            return orig(self, state, hook)

        return register_comm_hook

    def make_builtin(orig: Any) -> Any:
        def _register_builtin_comm_hook(self: Any, *args: Any, **kwargs: Any) -> Any:
            a = _agent
            if a is not None and id(self) in a.ddp_info:
                a.ddp_info[id(self)]["builtin_hook"] = True
                a.record({"k": "cfg", "builtin_comm_hook": True})
            return orig(self, *args, **kwargs)

        return _register_builtin_comm_hook

    _ORIG["ddp_register_comm_hook"] = DDP.register_comm_hook
    _wrap(DDP, "__init__", "ddp_init", make_init)
    _wrap(DDP, "register_comm_hook", "ddp_register_comm_hook_user", make_register)
    _wrap(DDP, "_register_builtin_comm_hook", "ddp_builtin", make_builtin)


def _patch_autograd() -> None:
    def run(orig: Any, loss: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        a = _agent
        if a is None or _busy() or _compiling() or getattr(_internal, "in_backward", False):
            return orig(*args, **kwargs)
        b = a.safe("backward", a.before_backward, loss)
        _internal.in_backward = True
        try:
            return orig(*args, **kwargs)
        finally:
            _internal.in_backward = False
            if b is not None:
                a.safe("backward", a.after_backward, b)

    def make_tensor_backward(orig: Any) -> Any:
        def backward(self: Any, *args: Any, **kwargs: Any) -> Any:
            return run(orig, self, (self, *args), kwargs)

        return backward

    def make_autograd_backward(orig: Any) -> Any:
        def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
            loss = tensors[0] if isinstance(tensors, (list, tuple)) and tensors else tensors
            return run(orig, loss, (tensors, *args), kwargs)

        return backward

    _wrap(torch.Tensor, "backward", "tensor_backward", make_tensor_backward)
    _wrap(torch.autograd, "backward", "autograd_backward", make_autograd_backward)

    def make_read(key: str) -> Callable[[Any], Any]:
        def make(orig: Any) -> Any:
            def read(self: Any, *args: Any, **kwargs: Any) -> Any:
                a = _agent
                if a is not None and a.loss_ptrs and not _busy():
                    try:
                        if self.numel() == 1 and self.data_ptr() in a.loss_ptrs:
                            a.window.loss_reads += 1
                    except Exception:
                        pass
                return orig(self, *args, **kwargs)

            return read

        return make

    _ORIG["item"] = torch.Tensor.item
    _ORIG["tolist"] = torch.Tensor.tolist
    global _tolist
    _tolist = _ORIG["tolist"]
    for name in ("item", "tolist", "__float__"):
        _wrap(torch.Tensor, name, f"read_{name}", make_read(name))


def _patch_optim() -> None:
    from torch.optim.optimizer import (
        Optimizer,
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )

    def pre(opt: Any, args: Any, kwargs: Any) -> None:
        a = _agent
        if a is not None and not _compiling():
            a.counters["phase"] = "optimizer"
        return None

    def post(opt: Any, args: Any, kwargs: Any) -> None:
        a = _agent
        if a is not None and not _compiling():
            a.safe("step", a.on_opt_post, opt)
        return None

    register_optimizer_step_pre_hook(pre)
    register_optimizer_step_post_hook(post)

    def make_zero(orig: Any) -> Any:
        def zero_grad(self: Any, *args: Any, **kwargs: Any) -> Any:
            a = _agent
            if a is not None and not _busy():
                w = a.window
                w.zero_calls += 1
                if w.backwards:
                    w.zero_after_backward = True
            return orig(self, *args, **kwargs)

        return zero_grad

    _wrap(Optimizer, "zero_grad", "opt_zero_grad", make_zero)
    _wrap(torch.nn.Module, "zero_grad", "module_zero_grad", make_zero)

    def make_load(kind: str) -> Callable[[Any], Any]:
        def make(orig: Any) -> Any:
            def load_state_dict(self: Any, *args: Any, **kwargs: Any) -> Any:
                a = _agent
                if a is not None and not _busy():
                    a.safe("load", _record_load, a, self, kind)
                return orig(self, *args, **kwargs)

            return load_state_dict

        return make

    _wrap(Optimizer, "load_state_dict", "opt_load", make_load("optimizer"))
    _wrap(torch.nn.Module, "load_state_dict", "module_load", make_load("model"))

    from torch.optim import lr_scheduler

    def make_sched(orig: Any) -> Any:
        def step(self: Any, *args: Any, **kwargs: Any) -> Any:
            a = _agent
            if a is None or getattr(self, "_is_initial", False) or _busy():
                return orig(self, *args, **kwargs)
            outer = a.sched_depth == 0
            a.sched_depth += 1
            try:
                return orig(self, *args, **kwargs)
            finally:
                a.sched_depth -= 1
                if outer:
                    a.window.sched += 1
                    a.sched_total += 1
                    a.safe("sched", a.cfg, f"sched{id(self)}", _sched_record(self))

        return step

    base = getattr(lr_scheduler, "LRScheduler", None)
    classes = [base] if base is not None else []
    for obj in vars(lr_scheduler).values():
        if (
            isinstance(obj, type)
            and base is not None
            and issubclass(obj, base)
            and obj is not base
            and "step" in vars(obj)
            and obj.__name__ != "ReduceLROnPlateau"
        ):
            classes.append(obj)
    for cls in classes:
        _wrap(cls, "step", f"sched_step.{cls.__name__}", make_sched)


def _sched_record(s: Any) -> dict[str, Any]:
    return {"k": "sched", "cls": type(s).__name__, "primary": _is_primary_opt(s)}


def _is_primary_opt(s: Any) -> bool:
    a = _agent
    opt = getattr(s, "optimizer", None)
    return bool(a and a.primary is not None and a.primary() is opt)


def _record_load(a: Agent, target: Any, kind: str) -> None:
    wrapped = target in a.wrapped_modules if kind == "model" else False
    if kind in ("optimizer", "scaler"):
        wrapped = bool(a.ddps)
    a.record(
        {
            "k": "load",
            "kind": kind,
            "cls": type(target).__name__,
            "after_wrap": bool(a.ddps),
            "wrapped": wrapped,
            "s": a.step,
        }
    )


def _patch_clip() -> None:
    import torch.nn.utils as nn_utils
    import torch.nn.utils.clip_grad as clip_mod

    def make(orig: Any) -> Any:
        def clip_grad_norm_(*args: Any, **kwargs: Any) -> Any:
            norm = orig(*args, **kwargs)
            a = _agent
            if a is not None and not _busy() and not _compiling():
                a.safe("clip", _record_clip, a, norm)
            return norm

        return clip_grad_norm_

    for owner in (nn_utils, clip_mod):
        _wrap(owner, "clip_grad_norm_", f"clip.{owner.__name__}", make)


def _record_clip(a: Agent, norm: Any) -> None:
    w = a.window
    last = w.backwards[-1] if w.backwards else None
    before_unscale = False
    opt = a.primary() if a.primary is not None else None
    if w.scaled:
        for scaler in a.scalers:
            if not getattr(scaler, "_enabled", False):
                continue
            states = getattr(scaler, "_per_optimizer_states", {})
            if opt is not None and id(opt) in states:
                stages = [states[id(opt)].get("stage")]
            else:  # before the first optimizer step the agent does not know the optimizer yet
                stages = [st.get("stage") for st in list(states.values())]
            if not any(getattr(st, "name", str(st)) == "UNSCALED" for st in stages):
                before_unscale = True
    w.clips.append(
        {
            "norm": norm.detach().clone() if isinstance(norm, torch.Tensor) else norm,
            "unsynced": bool(a.ddps) and last is not None and last.buckets == 0,
            "before_unscale": before_unscale,
            "n_bwd": len(w.backwards),
        }
    )
    a.cfg("clip", {"k": "cfg", "clip": True})


def _patch_amp() -> None:
    try:
        from torch.amp import grad_scaler
    except Exception:
        return
    GradScaler = grad_scaler.GradScaler

    def make_scale(orig: Any) -> Any:
        def scale(self: Any, outputs: Any) -> Any:
            out = orig(self, outputs)
            a = _agent
            if a is not None and getattr(self, "_enabled", False) and not _busy():
                a.scalers.add(self)
                a.window.scaled = True
                if isinstance(out, torch.Tensor) and isinstance(outputs, torch.Tensor):
                    a.scaled_map[out] = outputs
                a.cfg("scaler", {"k": "cfg", "scaler": True, "device": self._device})
            return out

        return scale

    def make_step(orig: Any) -> Any:
        def step(self: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            a = _agent
            before = a.opt_steps.get(id(optimizer), 0) if a is not None else 0
            out = orig(self, optimizer, *args, **kwargs)
            skipped = a is not None and a.opt_steps.get(id(optimizer), 0) == before
            enabled = getattr(self, "_enabled", False) and not _busy()
            if skipped and enabled and a.is_primary(optimizer):
                a.safe("step", a.end_step, optimizer, True)
            return out

        return step

    def make_update(orig: Any) -> Any:
        def update(self: Any, *args: Any, **kwargs: Any) -> Any:
            a = _agent
            if a is not None and getattr(self, "_enabled", False) and not _busy():
                found = a.safe("scaler", _found_inf, self)
                out = orig(self, *args, **kwargs)
                rec = a.pending_step
                if rec is not None and found is not None:
                    rec["finf"] = found
                a.pending_step = None
                if rec is not None:
                    rec["scale"] = _clone(getattr(self, "_scale", None))
                    rec["growth"] = _clone(getattr(self, "_growth_tracker", None))
                    a.safe("scaler", a.record, rec)
                return out
            return orig(self, *args, **kwargs)

        return update

    def make_load(orig: Any) -> Any:
        def load_state_dict(self: Any, *args: Any, **kwargs: Any) -> Any:
            a = _agent
            if a is not None and not _busy():
                a.safe("load", _record_load, a, self, "scaler")
            return orig(self, *args, **kwargs)

        return load_state_dict

    _wrap(GradScaler, "scale", "scaler_scale", make_scale)
    _wrap(GradScaler, "step", "scaler_step", make_step)
    _wrap(GradScaler, "update", "scaler_update", make_update)
    _wrap(GradScaler, "load_state_dict", "scaler_load", make_load)

    def make_enter(orig: Any) -> Any:
        def __enter__(self: Any) -> Any:
            out = orig(self)
            a = _agent
            if a is not None and getattr(self, "_enabled", False) and not _busy():
                dtype = str(getattr(self, "fast_dtype", "")).replace("torch.", "")
                key = f"autocast:{self.device}:{dtype}"
                a.safe("amp", a.cfg, key, {"k": "cfg", "autocast": dtype, "device": self.device})
            return out

        return __enter__

    from torch.amp import autocast_mode

    _wrap(autocast_mode.autocast, "__enter__", "autocast_enter", make_enter)

    def make_compile(orig: Any) -> Any:
        def compile(*args: Any, **kwargs: Any) -> Any:
            a = _agent
            if a is not None:
                a.safe("compile", a.cfg, "compile", {"k": "cfg", "compile": True})
            return orig(*args, **kwargs)

        return compile

    _wrap(torch, "compile", "compile", make_compile)


def _patch_data() -> None:
    from torch.utils.data import dataloader as dl_mod
    from torch.utils.data import distributed as dist_mod
    from torch.utils.data import sampler as sampler_mod

    def make_batch_iter(orig: Any) -> Any:
        def __iter__(self: Any) -> Iterator[Any]:
            a = _agent
            if a is None or not a.writer.mine:
                yield from orig(self)
                return
            it = orig(self)
            state = a.safe("sampler", _epoch_start, a, self)
            chunk: list[int] = []
            batches = 0
            try:
                for batch in it:
                    if state is not None:
                        try:
                            chunk.extend(int(i) for i in batch)
                        except (TypeError, ValueError):
                            state = None
                        batches += 1
                        if batches % INDEX_CHUNK_BATCHES == 0:
                            a.safe("sampler", _write_indices, a, state, chunk, False)
                            chunk = []
                    yield batch
            finally:
                if state is not None:
                    a.safe("sampler", _write_indices, a, state, chunk, True)

        return __iter__

    _wrap(sampler_mod.BatchSampler, "__iter__", "batch_sampler_iter", make_batch_iter)

    def make_set_epoch(orig: Any) -> Any:
        def set_epoch(self: Any, epoch: int) -> Any:
            a = _agent
            if a is not None:
                a.set_epoch_calls.setdefault(id(self), []).append(int(epoch))
                a.safe("sampler", a.record, {"k": "set_epoch", "epoch": int(epoch), "s": a.step})
            return orig(self, epoch)

        return set_epoch

    _wrap(dist_mod.DistributedSampler, "set_epoch", "set_epoch", make_set_epoch)

    base_iter = getattr(dl_mod, "_BaseDataLoaderIter", None)
    if base_iter is None:
        return

    def make_next(orig: Any) -> Any:
        def __next__(self: Any) -> Any:
            a = _agent
            if a is None or not a.active or _busy():
                return orig(self)
            n = getattr(self, "_ddpadvisor_fetches", 0)
            self._ddpadvisor_fetches = n + 1
            if n == 0:
                a.safe("sampler", _iterator_record, a, self)
            if n >= RNG_FETCHES_PER_ITERATOR or "rng" in a.disabled:
                return orig(self)
            before = a.safe("rng", _rng_digest)
            out = orig(self)
            after = a.safe("rng", _rng_digest)
            if before is not None and after is not None:
                a.window.rng.append([n, before, after])
            return out

        return __next__

    _wrap(base_iter, "__next__", "loader_next", make_next)


def _iterator_record(a: Agent, it: Any) -> None:
    a.record(
        {
            "k": "iter",
            "workers": int(getattr(it, "_num_workers", 0)),
            "base_seed": getattr(it, "_base_seed", None),
            "s": a.step,
        }
    )


def _epoch_start(a: Agent, batch_sampler: Any) -> dict[str, Any]:
    sampler = getattr(batch_sampler, "sampler", None)
    sid = a.sampler_ids.setdefault(id(sampler), len(a.sampler_ids))
    a.iterations += 1
    rec: dict[str, Any] = {
        "k": "epoch",
        "it": a.iterations,
        "sampler": sid,
        "cls": type(sampler).__name__,
        "bs": getattr(batch_sampler, "batch_size", None),
        "s": a.step,
    }
    source = getattr(sampler, "dataset", None)
    if source is None:
        source = getattr(sampler, "data_source", None)
    try:
        rec["dataset_len"] = len(source) if source is not None else len(sampler)
    except TypeError:
        rec["dataset_len"] = None
    for attr in ("seed", "epoch", "shuffle", "num_replicas", "rank", "drop_last"):
        value = getattr(sampler, attr, None)
        if isinstance(value, (bool, int, float, str)):
            rec[attr] = value
    if "shuffle" not in rec:
        rec["shuffle"] = type(sampler).__name__ in ("RandomSampler", "SubsetRandomSampler")
    rec["set_epoch_calls"] = a.set_epoch_calls.get(id(sampler), [])[-8:]
    a.record(rec)
    return {"it": a.iterations, "part": 0, "total": rec["dataset_len"] or 0}


def _write_indices(a: Agent, state: dict[str, Any], chunk: list[int], end: bool) -> None:
    kept, modulus = _subset(chunk, int(state["total"]))
    rec: dict[str, Any] = {"k": "idx", "it": state["it"], "part": state["part"], "idx": kept}
    if modulus > 1:
        rec["mod"] = modulus
    if end:
        rec["end"] = True
    state["part"] += 1
    a.record(rec)


def _registration_hook(kind: str) -> Callable[..., None]:
    def hook(module: Any, name: str, value: Any) -> None:
        a = _agent
        if a is None or not a.ddps or value is None or _busy():
            return None
        if module not in a.wrapped_modules:
            return None
        if kind == "module":
            n = sum(1 for _ in value.parameters())
            if n == 0:
                return None
        a.safe(
            "register",
            a.record,
            {"k": "reg", "kind": kind, "name": name, "cls": type(value).__name__, "s": a.step},
        )
        if kind == "module":
            for m in value.modules():
                a.wrapped_modules.add(m)
        return None

    return hook


def _patch_modules() -> None:
    from torch.nn.modules import module as module_mod

    module_mod.register_module_module_registration_hook(_registration_hook("module"))
    module_mod.register_module_parameter_registration_hook(_registration_hook("param"))


def _patch_excepthook() -> None:
    previous = sys.excepthook

    def excepthook(exc_type: Any, exc: Any, tb: Any) -> None:
        a = _agent
        if a is not None and a.active and a.writer.mine:
            frames = traceback.extract_tb(tb)
            user = [
                f for f in frames if "site-packages" not in f.filename and f.filename != __file__
            ] or frames
            where = f"{user[-1].filename}:{user[-1].lineno}" if user else None
            a.safe(
                "end",
                a.record,
                {
                    "k": "exception",
                    "type": exc_type.__name__,
                    "msg": str(exc)[:500],
                    "where": where,
                    "s": a.step,
                    "wall": time.time(),
                },
            )
            a.safe("end", a.write_pending_step)
            a.safe("end", a.writer.flush)
        previous(exc_type, exc, tb)

    sys.excepthook = excepthook


def install() -> None:
    """Install every hook once. Safe to call again; does nothing without ``$DDPADVISOR_TRACE``."""
    global torch, _agent
    if _agent is not None or not os.environ.get(ENV_DIR):
        return
    import torch as _torch

    torch = _torch
    if getattr(torch, "_ddpadvisor_agent", False):
        return
    torch._ddpadvisor_agent = True
    every = int(os.environ.get(ENV_EVERY) or DEFAULT_EVERY)
    max_steps = int(os.environ.get(ENV_MAX_STEPS) or 0) or None
    _agent = Agent(Path(os.environ[ENV_DIR]).resolve(), every, max_steps)
    for patch in (
        _patch_autograd,
        _patch_distributed,
        _patch_ddp,
        _patch_optim,
        _patch_clip,
        _patch_amp,
        _patch_data,
        _patch_modules,
        _patch_excepthook,
    ):
        try:
            patch()
        except Exception as exc:  # one missing entry point must not cost the others
            sys.stderr.write(f"ddpadvisor agent: {patch.__name__} skipped: {exc!r}\n")
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        _agent.safe("activate", _agent.activate)


def agent() -> Agent | None:
    """The installed agent (for tests)."""
    return _agent
