"""Structure recovered from the walker's events: the training step and its accumulation window.

The rules in :mod:`ddpadvisor.scan.rules` ask questions such as "does zero_grad run on every
micro-step?". They are answered here by locating the main ``backward()``, the optimizer step
that consumes it, the loop between them, and by simulating the micro-step index through the
conditions around each event with :mod:`ddpadvisor.scan.evaluate`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cached_property

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.context import (
    CondCtx,
    Ctx,
    Event,
    FuncCtx,
    LoopCtx,
    WithCtx,
    common_prefix,
    ctx_after,
)
from ddpadvisor.scan.evaluate import Undecidable, evaluate, free_names
from ddpadvisor.scan.interp import WalkResult, is_cli_default
from ddpadvisor.scan.interp.statements import batch_refs
from ddpadvisor.scan.values import Obj, Val

PROBE_K = (2, 3, 4, 5)  # accumulation counts tried when the real one is not known


def text(node: ast.AST | None, limit: int = 60) -> str:
    if node is None:
        return ""
    try:
        out = ast.unparse(node)
    except Exception:  # unparse of a synthetic node; only used for messages
        return ""
    return out if len(out) <= limit else out[: limit - 1] + "…"


def recv_text(ev: Event) -> str:
    call = ev.node
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
        return text(call.func.value)
    return ""


@dataclass
class Accum:
    """How micro-batches relate to optimizer steps."""

    style: str  # "none" | "inner" | "modulo" | "framework" | "unknown"
    k: int | None = None
    k_node: ast.expr | None = None  # the count as written (expanded), when not a constant
    k_where: str = ""
    micro_loop: LoopCtx | None = None
    boundary: CondCtx | None = None
    index_var: str | None = None
    step: Event | None = None
    backward: Event | None = None
    k_default: bool = False  # k is a command-line / config default
    reason: str = ""
    # A last micro-step written after the micro-batch loop (``for mb in chunks[:-1]: …``
    # then one more forward/backward): the one that should synchronise.
    tail: Event | None = None

    @property
    def accumulates(self) -> bool | None:
        if self.style in ("none",):
            return False
        if self.k is not None:
            return self.k >= 2
        return None if self.style == "unknown" else True


@dataclass
class Window:
    """Micro-step indices to simulate and the ones after which the optimizer steps."""

    var: str | None
    indices: list[int]
    boundaries: set[int]
    k: int
    k_node: ast.expr | None
    scope: Ctx = field(default_factory=tuple)  # events nested below this are "per micro-step"


def _fixes(test: ast.expr, branch: bool, atoms: dict[str, bool]) -> bool:
    """Record the atoms a branch of ``test`` fixes ("a and not b" taken: a, not b); False when
    one contradicts an atom an enclosing branch fixed."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _fixes(test.operand, not branch, atoms)
    if isinstance(test, ast.Constant):
        # a test folded to a command-line default (``if args.flag:`` expanded; ``args.cpu``
        # and ``args.distributed``, both store_true): the run may set it either way, and two
        # options with the same default are not one atom
        return True
    if atoms.setdefault(ast.dump(test), branch) != branch:
        return False
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) == branch:
        # "a and b" taken, "a or b" not taken: each part is fixed too
        return all(_fixes(v, branch, atoms) for v in test.values)
    return True


def feasible(ev: Event) -> bool:
    """Whether the branches around ``ev`` can all be taken at once, in the multi-rank job.
    timm's loop calls a helper that steps under ``if need_update:`` from inside ``if not
    need_update: with no_sync():``; that step never runs inside no_sync. A side that runs on
    no rank of a multi-rank job (see interp.branches) never runs either."""
    atoms: dict[str, bool] = {}
    conds = ev.conds()
    return all(c.runs != "none" for c in conds) and all(
        _fixes(c.test, c.branch, atoms) for c in conds
    )


class Analysis:
    def __init__(self, walk: WalkResult) -> None:
        self.walk = walk
        # an event on a path that contradicts itself never runs: rules do not see it
        self.events = [e for e in walk.events if feasible(e)]
        self.objects = walk.objects
        self.by_seq = {e.seq: e for e in walk.events}
        self._calls_at: dict[str, list[Event]] | None = None

    # -------------------------------------------------------------- objects
    def objs(self, *kinds: str) -> list[Obj]:
        return [o for o in self.objects.values() if o.kind in kinds]

    @cached_property
    def ddps(self) -> list[Obj]:
        return self.objs(V.DDP)

    @cached_property
    def fsdps(self) -> list[Obj]:
        return self.objs(V.FSDP)

    @cached_property
    def framework(self) -> str | None:
        trainers = self.objs(V.TRAINER)
        if trainers and any(
            e.method == "train" and e.recv is not None and e.recv.kind == V.TRAINER
            for e in self.events
        ):
            return "hf_trainer"
        if trainers:
            return "hf_trainer"
        if any(o.extra.get("fit") is not None for o in self.objs(V.PL_TRAINER)):
            return "lightning"
        if self.objs(V.ACCELERATOR) and any(
            e.recv is not None
            and e.recv.kind == V.ACCELERATOR
            and (e.method or "").startswith("prepare")
            for e in self.events
        ):
            return "accelerate"
        return None

    @cached_property
    def distributed(self) -> bool:
        """The job runs several ranks: it wraps a model for data parallelism, runs through a
        framework object that launches and syncs them (an HF or Lightning Trainer, an
        accelerate Accelerator, a DeepSpeed engine, Fabric, the trainers built over them), or
        calls a distributed library's API for anything but asking whether it is there."""
        if self.ddps or self.fsdps or self.framework:
            return True
        if self.objs(V.ACCELERATOR, V.TRAINER, V.PL_TRAINER):
            return True
        return any(e.kind == "call" and apis.sets_up_ranks(e.name) for e in self.events)

    # -------------------------------------------------------------- events
    def calls(self, method: str | None = None) -> list[Event]:
        return [
            e for e in self.events if e.kind == "call" and (method is None or e.method == method)
        ]

    def calls_at(self, where: str) -> list[Event]:
        """The calls at one ``file:line`` (where an inlined function was called from)."""
        if self._calls_at is None:
            self._calls_at = {}
            for e in self.events:
                if e.kind == "call":
                    self._calls_at.setdefault(e.where, []).append(e)
        return self._calls_at.get(where, [])

    def under_no_grad(self, ev: Event) -> bool:
        """Inside ``with torch.no_grad():`` (or inference_mode), or inside a function
        decorated with it (``@torch.no_grad() def evaluate(...)``)."""
        if any(w.kind == V.CTX_NO_GRAD for w in ev.withs()):
            return True
        return any(
            isinstance(c, FuncCtx) and (c.file, c.line) in self.no_grad_functions for c in ev.ctx
        )

    @cached_property
    def no_grad_functions(self) -> set[tuple[str, int]]:
        """(file, line) of the functions decorated with ``no_grad`` / ``inference_mode``."""
        out: set[tuple[str, int]] = set()
        for f in self.walk.functions:
            node = f.node
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for deco in node.decorator_list:
                target = deco.func if isinstance(deco, ast.Call) else deco
                name = ast.unparse(target).rsplit(".", 1)[-1]
                if name in ("no_grad", "inference_mode"):
                    out.add((f.scope.module.label, node.lineno))
        return out

    @cached_property
    def backwards(self) -> list[Event]:
        out = []
        for e in self.calls():
            if (
                (
                    e.method == "backward"
                    and e.recv is not None
                    and e.recv.kind not in (V.OPTIMIZER,)
                )
                or (apis.last(e.name) == "backward" and e.name.endswith("autograd.backward"))
                or (e.method == "manual_backward" and e.args)  # Lightning manual optimization
            ):
                out.append(e)
        return [e for e in out if not self.under_no_grad(e)]

    @staticmethod
    def loss_of(ev: Event) -> Val:
        if ev.method == "manual_backward":
            return ev.args[0]
        if ev.method == "backward" and ev.recv is not None:
            if ev.recv.kind in (V.ACCELERATOR, V.DDP) and ev.args:
                return ev.args[0]
            return ev.recv
        return ev.args[0] if ev.args else Val()

    @cached_property
    def main_backward(self) -> Event | None:
        with_fwd = [b for b in self.backwards if V.FWD in self.loss_of(b).taint]
        # A file can also train a plain model (a single-process baseline, a test's reference
        # run): the backward through DDP (its wrapped forward, or accelerate's backward) is the
        # one the diagnosis is about.
        distributed = [
            b
            for b in self.backwards
            if "route:ddp" in self.loss_of(b).taint
            or (b.recv is not None and b.recv.kind == V.ACCELERATOR)
        ]
        pool = (
            [b for b in distributed if b in with_fwd] or distributed or with_fwd or self.backwards
        )
        if not pool:
            return None
        # The training backward is the one inside the most loops (warm-up passes sit outside);
        # of loop nests equally deep, the last one run (a compile warm-up loop runs before
        # the training loop); within one loop, the first backward (a GAN's D before its G).
        depth = max(len(b.loops()) for b in pool)
        deepest = [b for b in pool if len(b.loops()) == depth]
        # A backward whose gradients reach an optimizer step on its path is a training one;
        # one after the last step, zeroed before the next (a Hessian or curvature estimate
        # every k steps) is an auxiliary pass, however late it runs.
        stepped = [
            b for b in deepest if any(s.seq > b.seq and not exclusive(b, s) for s in self.opt_steps)
        ]
        if stepped:
            deepest = stepped
        if depth == 0:
            return min(deepest, key=lambda b: b.seq)
        last_nest = max(deepest, key=lambda b: b.seq).loops()[-1]
        return min((b for b in deepest if b.loops()[-1] is last_nest), key=lambda b: b.seq)

    def is_optimizer_step(self, e: Event) -> bool:
        if e.kind != "call" or e.method != "step":
            return False
        recv = e.recv
        if recv is None:
            return False
        if recv.kind == V.OPTIMIZER:
            return True
        if recv.kind == V.SCALER:
            return True
        if recv.kind == V.DDP:  # a DeepSpeed engine
            obj = self.objects.get(recv.ref or -1)
            return bool(obj and obj.extra.get("deepspeed"))
        if recv.kind is None:
            name = recv_text(e).lower()
            return "optim" in name or name in ("opt", "self.opt")
        return False

    @cached_property
    def opt_steps(self) -> list[Event]:
        return [e for e in self.events if self.is_optimizer_step(e)]

    def is_scheduler_step(self, e: Event) -> bool:
        if e.kind != "call" or e.method != "step" or e.recv is None:
            return False
        if e.recv.kind == V.SCHEDULER:
            return True
        return e.recv.kind is None and "sched" in recv_text(e).lower()

    @cached_property
    def sched_steps(self) -> list[Event]:
        return [e for e in self.events if self.is_scheduler_step(e)]

    @cached_property
    def zero_grads(self) -> list[Event]:
        out = []
        for e in self.events:
            if (e.kind == "call" and e.method == "zero_grad") or (
                e.kind == "assign"
                and e.attr == "grad"
                and e.value is not None
                and e.value.known
                and e.value.const is None
            ):
                out.append(e)
        return out

    @cached_property
    def main_step(self) -> Event | None:
        b = self.main_backward
        if b is None:
            return None
        best: Event | None = None
        best_key: tuple[int, int] | None = None
        for s in self.opt_steps:
            shared = len(common_prefix(b.ctx, s.ctx))
            after = 1 if s.seq > b.seq else 0
            key = (shared, after)
            if best_key is None or key > best_key:
                best, best_key = s, key
        return best

    @cached_property
    def step_loop(self) -> LoopCtx | None:
        """The loop whose one iteration is one micro-step (or one step without accumulation)."""
        b = self.main_backward
        if b is None:
            return None
        loops = b.loops()
        return loops[-1] if loops else None

    # -------------------------------------------------------------- loops over the data
    @cached_property
    def _loader_starts(self) -> dict[int, list[tuple[Ctx, int]]]:
        """Where each DataLoader's iteration begins (the context around the start and the
        walk position): a loop over it (directly, or through enumerate / tqdm / zip), and
        ``iter(loader)``. Each run of the code around a start is one pass over the data."""
        out: dict[int, list[tuple[Ctx, int]]] = {}
        for loop in self.walk.loops:
            for ref in loop.starts:
                out.setdefault(ref, []).append((loop.outer, loop.seq))
        for e in self.events:
            if e.kind != "call" or apis.last(e.name) != "iter" or e.method is not None:
                continue
            arg = e.args[0] if e.args else None
            if arg is not None and arg.kind == V.LOADER and arg.ref is not None:
                out.setdefault(arg.ref, []).append((e.ctx, e.seq))
        return out

    @cached_property
    def _next_loaders(self) -> dict[int, set[int]]:
        """Loops that take their batches with ``next()`` on an iterator begun outside them
        (``it = iter(loader)`` then ``while …: batch = next(it)``, a prefetcher's
        ``next()``): id(loop) → the DataLoaders."""
        out: dict[int, set[int]] = {}
        for e in self.events:
            if e.kind != "call" or apis.last(e.name) != "next" or e.method is not None:
                continue
            loops = e.loops()
            if not loops or e.result is None:
                continue
            inner = loops[-1]
            for ref in batch_refs(e.result):
                begun_inside = any(
                    any(c is inner for c in start) for start, _ in self._loader_starts.get(ref, [])
                )
                if not begun_inside:
                    out.setdefault(id(inner), set()).add(ref)
        return out

    def loop_loaders(self, loop: LoopCtx) -> frozenset[int]:
        """The DataLoaders whose batches one run of ``loop`` takes: through what it iterates
        (enumerate, tqdm, zip, a logging generator, a wrapper object) or by ``next()``."""
        return loop.loaders | self._next_loaders.get(id(loop), set())

    @cached_property
    def training_loaders(self) -> list[int]:
        """The DataLoaders the training loop (the innermost loop around the main backward
        that takes batches) reads; empty when no loop around it visibly does."""
        b = self.main_backward
        if b is None:
            return []
        for loop in reversed(b.loops()):
            refs = self.loop_loaders(loop)
            if not refs and loop.iter.kind == V.LOADER and loop.iter.ref is not None:
                refs = frozenset({loop.iter.ref})
            if refs:
                return sorted(refs)
        return []

    def epoch_loop(self, ref: int) -> tuple[LoopCtx | None, bool]:
        """The loop that repeats the passes over DataLoader ``ref`` that the training step
        reads: the innermost loop around the start of its iteration nearest the main
        backward. Returns (loop, whether a start was found); (None, True) means one pass."""
        b = self.main_backward
        starts = self._loader_starts.get(ref, [])
        if b is None or not starts:
            return None, False

        def key(start: tuple[Ctx, int]) -> tuple[int, int]:
            ctx, seq = start
            return len(common_prefix(ctx, b.ctx)), seq if seq <= b.seq else -seq

        ctx, _ = max(starts, key=key)
        loops = [c for c in ctx if isinstance(c, LoopCtx)]
        return (loops[-1] if loops else None), True

    @cached_property
    def train_forwards(self) -> list[Event]:
        """Forward passes whose output reaches a backward."""
        seqs: set[int] = set()
        for b in self.backwards:
            for t in self.loss_of(b).taint:
                if t.startswith("fwdseq:"):
                    seqs.add(int(t.split(":", 1)[1]))
        return [self.by_seq[s] for s in sorted(seqs) if s in self.by_seq]

    # -------------------------------------------------------------- accumulation
    @cached_property
    def accum(self) -> Accum:
        b, s = self.main_backward, self.main_step
        acc_ctx = [w for w in (b.withs() if b else []) if w.kind == V.CTX_ACCUMULATE]
        if acc_ctx:
            return self._framework_accum(b, s, acc_ctx[0])
        if b is None:
            return Accum("unknown", reason="no backward() call found")
        if s is None:
            return Accum("unknown", backward=b, reason="no optimizer.step() found")
        shared = common_prefix(b.ctx, s.ctx)
        b_rest = ctx_after(b.ctx, shared)
        s_rest = ctx_after(s.ctx, shared)
        inner = [c for c in b_rest if isinstance(c, LoopCtx)]
        if inner:
            loop = inner[0]
            k, k_node, dflt = self._count(loop.count)
            it = getattr(loop.node, "iter", None)
            if k is None and isinstance(it, ast.Call) and it.args and text(it.func) == "range":
                # expanded like the conditions and flags it is matched against
                k_node = loop.count_node or (it.args[-1] if len(it.args) <= 2 else None)
            tail = self._tail(loop, s)
            if tail is not None and k is not None:
                k += 1
            return Accum(
                "inner",
                k=k,
                k_node=k_node,
                k_where=loop.where,
                micro_loop=loop,
                index_var=loop.index_var,
                step=s,
                backward=b,
                k_default=dflt,
                tail=tail,
            )
        loops = [c for c in shared if isinstance(c, LoopCtx)]
        step_loop = loops[-1] if loops else None
        conds = [c for c in s_rest if isinstance(c, CondCtx)]
        for cond in conds:
            mod = find_mod(cond.test)
            if mod is None:
                continue
            mod_node = mod.right
            mod_k: int | None = None
            if isinstance(mod_node, ast.Constant) and isinstance(mod_node.value, int):
                mod_k = mod_node.value
            names = free_names(mod.left)
            index = next(iter(names)) if len(names) == 1 else None
            return Accum(
                "modulo",
                k=mod_k,
                k_node=None if mod_k is not None else mod_node,
                k_where=f"{cond.file}:{cond.line}",
                k_default=is_cli_default(mod_node),
                micro_loop=step_loop,
                boundary=cond,
                index_var=index,
                step=s,
                backward=b,
            )
        if step_loop is None:
            return Accum("unknown", step=s, backward=b, reason="backward() is not inside a loop")
        if any(isinstance(c, LoopCtx) for c in s_rest):
            return Accum(
                "unknown", step=s, backward=b, reason="optimizer.step() sits in a different loop"
            )
        if conds:
            if all(V.RANK not in c.taint for c in conds) and any(
                "finite" in text(c.test)
                or "nan" in text(c.test).lower()
                or "skip" in text(c.test).lower()
                for c in conds
            ):
                return Accum("none", k=1, micro_loop=step_loop, step=s, backward=b)
            return Accum(
                "unknown",
                step=s,
                backward=b,
                micro_loop=step_loop,
                reason="optimizer.step() runs under a condition the scanner cannot read",
            )
        return Accum("none", k=1, micro_loop=step_loop, step=s, backward=b, k_where=s.where)

    def _tail(self, loop: LoopCtx, step: Event) -> Event | None:
        """A backward after the micro-batch loop and before the optimizer step."""
        step_loops = step.loops()
        for b in self.backwards:
            if loop in b.ctx or not (step.seq > b.seq):
                continue
            if V.FWD not in self.loss_of(b).taint:
                continue
            if b.loops() == step_loops and b.seq > self._last_seq_in(loop):
                return b
        return None

    def _last_seq_in(self, loop: LoopCtx) -> int:
        last = 0
        for e in self.events:
            if loop in e.ctx:
                last = e.seq
        return last

    def _framework_accum(self, b: Event | None, s: Event | None, w: WithCtx) -> Accum:
        acc = next(iter(self.objs(V.ACCELERATOR)), None)
        # Accelerator's default of 1 is only a default: ``accelerate launch
        # --gradient_accumulation_steps`` sets ACCELERATE_GRADIENT_ACCUMULATION_STEPS, which
        # the constructor reads when no plugin is given (accelerate/accelerator.py).
        k: int | None = 1
        dflt = True
        if acc is not None and "gradient_accumulation_steps" in acc.kwargs:
            k, _, dflt = self._count(acc.kwargs["gradient_accumulation_steps"])
        elif acc is not None and (
            "gradient_accumulation_plugin" in acc.kwargs
            or (isinstance(acc.node, ast.Call) and any(kw.arg is None for kw in acc.node.keywords))
        ):
            k = None  # a plugin's num_steps, or keywords the scan cannot list
        return Accum(
            "framework", k=k, k_where=f"{w.file}:{w.line}", step=s, backward=b, k_default=dflt
        )

    @staticmethod
    def _count(val: Val | None) -> tuple[int | None, ast.expr | None, bool]:
        if val is None:
            return None, None, False
        if val.known and isinstance(val.const, (int, float)) and not isinstance(val.const, bool):
            return int(val.const), None, V.ARGDEFAULT in val.taint
        return None, None, False

    # -------------------------------------------------------------- simulation
    @cached_property
    def window(self) -> Window | None:
        acc = self.accum
        if acc.style == "none" and acc.micro_loop is not None:
            return Window(None, [0], {0}, 1, None, self._scope_of(acc.micro_loop))
        if acc.style not in ("inner", "modulo") or acc.micro_loop is None:
            return None
        k = acc.k or 4
        if acc.style == "inner":
            return Window(
                acc.index_var,
                list(range(k)),
                {k - 1},
                k,
                acc.k_node,
                self._scope_of(acc.micro_loop),
            )
        if acc.index_var is None or acc.boundary is None:
            return None
        indices = list(range(2 * k))
        boundaries: set[int] = set()
        for i in indices:
            hit = self._cond_true(acc.boundary, acc.index_var, i, k, acc.k_node)
            if hit is None:
                return None
            if hit:
                boundaries.add(i)
        if not boundaries:
            return None
        return Window(
            acc.index_var, indices, boundaries, k, acc.k_node, self._scope_of(acc.micro_loop)
        )

    def _scope_of(self, loop: LoopCtx) -> Ctx:
        for e in self.events:
            for i, c in enumerate(e.ctx):
                if c is loop:
                    return e.ctx[: i + 1]
        return (loop,)

    @staticmethod
    def _cond_true(
        cond: CondCtx, var: str | None, i: int, k: int, k_node: ast.expr | None
    ) -> bool | None:
        value = eval_at(cond.test, var, i, k, k_node)
        if value is None:
            return None
        return value if cond.branch else not value

    def runs_at(self, ev: Event, i: int, win: Window, *, guarded: bool = False) -> bool | None:
        """Does ``ev`` run in micro-step ``i`` of the window? None: cannot tell.

        ``guarded``: a condition the scanner cannot decide that does not depend on the
        micro-step (``if ddp:``) is taken as holding; it runs in every micro-step or in none,
        and the caller asks about the configuration in which it runs."""
        inner = ctx_after(ev.ctx, win.scope)
        if inner is ev.ctx and win.scope:
            return None  # not inside the window's loop
        for c in inner:
            if isinstance(c, CondCtx):
                if c.runs == "all":
                    continue  # a side every rank of the job takes (``if ddp:``)
                if c.const is not None and V.ARGDEFAULT not in c.taint:
                    if bool(c.const) != c.branch:
                        return False
                    continue
                hit = self._cond_true(c, win.var, i, win.k, win.k_node)
                if hit is None and guarded and win.var not in free_names(c.test):
                    continue
                if hit is None:
                    return None
                if not hit:
                    return False
        return True

    def in_window(self, ev: Event, win: Window) -> bool:
        return ctx_after(ev.ctx, win.scope) is not ev.ctx or not win.scope

    @cached_property
    def flag_events(self) -> list[Event]:
        """``x.require_backward_grad_sync = ...`` where ``x`` may be a DDP wrapper: the flag
        set on the project's own module (a stand-in wrapper for single-process runs that
        defines the attribute so the loop can set it either way) skips nothing."""
        return [
            e
            for e in self.events
            if e.kind == "assign"
            and e.attr == "require_backward_grad_sync"
            and not self._own_module(e.recv)
        ]

    def _own_module(self, recv: Val | None) -> bool:
        if recv is None or recv.ref is None or recv.kind != V.MODEL:
            return False
        obj = self.walk.objects.get(recv.ref)
        if obj is None or not obj.canon.startswith("local:"):
            return False
        info = obj.extra.get("class")
        bases = info.external_bases() if info is not None else []
        return not any(apis.is_ddp(b) or apis.is_fsdp(b) for b in bases)

    def synced_at(self, fwd: Event, i: int, win: Window) -> tuple[bool | None, str]:
        """Whether the forward ``fwd`` at micro-step ``i`` prepares a synchronising backward."""
        for w in fwd.withs():
            if w.kind != V.CTX_NO_SYNC:
                continue
            if w.cond is None:
                return False, f"{w.file}:{w.line}"
            hit = eval_at(w.cond, win.var, i, win.k, win.k_node)
            if hit is None:
                return None, ""
            if hit:
                return False, f"{w.file}:{w.line}"
        flags = [e for e in self.flag_events if self.in_window(e, win)]
        if flags:
            # The flag matters only where the model is DDP: a guard such as ``if ddp:`` holds.
            before = [e for e in flags if e.seq < fwd.seq and self.runs_at(e, i, win, guarded=True)]
            chosen: Event | None = before[-1] if before else None
            iteration = i
            if chosen is None and i > 0:
                prev = [e for e in flags if self.runs_at(e, i - 1, win, guarded=True)]
                chosen = prev[-1] if prev else None
                iteration = i - 1
            if chosen is not None and chosen.value_node is not None:
                val = eval_at(chosen.value_node, win.var, iteration, win.k, win.k_node)
                if val is None:
                    return None, ""
                if not val:
                    return False, chosen.where
        return True, ""


def find_mod(node: ast.AST) -> ast.BinOp | None:
    for sub in ast.walk(node):
        if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Mod):
            return sub
    return None


def _substitute(node: ast.expr, pattern: ast.expr | None, k: int) -> ast.expr:
    if pattern is None:
        return node
    target = ast.dump(pattern)

    class Sub(ast.NodeTransformer):
        def visit(self, n: ast.AST) -> ast.AST:
            if isinstance(n, ast.expr) and ast.dump(n) == target:
                return ast.Constant(k)
            return super().visit(n)

    import copy

    out = Sub().visit(copy.deepcopy(node))
    assert isinstance(out, ast.expr)
    return out


_EVAL_CACHE: dict[tuple[int, str | None, int, int, int], tuple[ast.expr, bool | None]] = {}


def eval_at(
    node: ast.expr, var: str | None, i: int, k: int, k_node: ast.expr | None
) -> bool | None:
    """Evaluate a condition at micro-step ``i``; with an unknown count, it must agree for all."""
    key = (id(node), var, i, k, id(k_node))
    hit = _EVAL_CACHE.get(key)
    if hit is not None and hit[0] is node:
        return hit[1]
    out = _eval_at(node, var, i, k, k_node)
    if len(_EVAL_CACHE) > 50_000:
        _EVAL_CACHE.clear()
    _EVAL_CACHE[key] = (node, out)
    return out


def _eval_at(
    node: ast.expr, var: str | None, i: int, k: int, k_node: ast.expr | None
) -> bool | None:
    tries = [k] if k_node is None else list(PROBE_K)
    if k_node is not None and var is not None and 0 < i % k < k - 1:
        # a micro-step between the window's first and last: a count of 2 has none, so it
        # says nothing about it (mapping it there would read the first micro-step instead)
        tries = [kk for kk in tries if kk >= 3]
    results = set()
    for kk in tries:
        expr = _substitute(node, k_node, kk)
        names = free_names(expr)
        env = {}
        if var is not None:
            env[var] = i if k_node is None else _scale(i, k, kk)
        if names - set(env):
            return None
        try:
            results.add(bool(evaluate(expr, env)))
        except Undecidable:
            return None
    return results.pop() if len(results) == 1 else None


def _scale(i: int, k: int, kk: int) -> int:
    """Map index ``i`` of a window of ``k`` to the same position in a window of ``kk``."""
    window, pos = divmod(i, k)
    if pos == k - 1:
        return window * kk + kk - 1
    return window * kk + min(pos, kk - 2)


def exclusive(a: Event, b: Event) -> bool:
    """Two events in different branches of the same ``if``."""
    for x in a.ctx:
        if isinstance(x, CondCtx):
            for y in b.ctx:
                if isinstance(y, CondCtx) and y.node is x.node and y.branch != x.branch:
                    return True
    return False
