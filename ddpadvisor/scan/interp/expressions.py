"""Expressions: names, attributes, operators, subscripts and calls (library calls go to
:mod:`ddpadvisor.scan.library`)."""

from __future__ import annotations

import ast
import functools
from dataclasses import replace
from typing import Any

from ddpadvisor.scan import apis, library
from ddpadvisor.scan import values as V
from ddpadvisor.scan.context import CondCtx, Ctx, Event, FuncCtx, WithCtx
from ddpadvisor.scan.interp import branches
from ddpadvisor.scan.interp.core import WalkerCore
from ddpadvisor.scan.interp.frames import (
    _CTX_KINDS,
    _MAIN_PROCESS_NAMES,
    _MODEL_KINDS,
    _RANK_ENV,
    _RANK_NAMES,
    _WORLD_ENV,
    _WORLD_GETTER,
    _WORLD_NAMES,
    ClassInfo,
    Frame,
    FuncRef,
    ModuleScope,
    _count_of,
    makes_context,
    reading,
)
from ddpadvisor.scan.values import NO_CONST, UNKNOWN, Obj, Op, Val, merge

# A model's methods that make a context manager, read as one even when taken without calling
# them (``context = model.no_sync``) and entered later.
_CONTEXT_METHODS = frozenset({"no_sync", "join"})

_UNDEFINED = frozenset({V.UNBOUND})
SUPER = "super"  # super() inside a method: (the defining class, the instance)


class Expressions(WalkerCore):
    # ------------------------------------------------------------------ expressions
    def eval(self, node: ast.expr | None, frame: Frame, ctx: Ctx) -> Val:
        if node is None:
            return UNKNOWN
        if isinstance(node, ast.Constant):
            return Val(const=node.value, node=node)
        if isinstance(node, ast.Name):
            return self.lookup(node.id, frame)
        if isinstance(node, ast.Attribute):
            return self.attribute(self.eval(node.value, frame, ctx), node.attr, frame)
        if isinstance(node, ast.Call):
            return self.eval_call(node, frame, ctx)
        if isinstance(node, ast.BinOp):
            left = self.eval(node.left, frame, ctx)
            right = self.eval(node.right, frame, ctx)
            return self.binop(node.op, left, right, node.right, node.left, at=self._at(node, frame))
        if isinstance(node, ast.UnaryOp):
            inner = self.eval(node.operand, frame, ctx)
            if inner.known:
                try:
                    if isinstance(node.op, ast.Not):
                        return replace(inner, const=not inner.const, kind=None, ref=None)
                    if isinstance(node.op, ast.USub):
                        return replace(inner, const=-inner.const, kind=None, ref=None)
                except TypeError:
                    pass
            return inner.plain()
        if isinstance(node, ast.BoolOp):
            vals = [self.eval(v, frame, ctx) for v in node.values]
            return self._boolop(node, vals)
        if isinstance(node, ast.Compare):
            vals = [
                self.eval(node.left, frame, ctx),
                *(self.eval(c, frame, ctx) for c in node.comparators),
            ]
            out = merge(*vals)
            if all(v.known for v in vals):
                from ddpadvisor.scan.evaluate import Undecidable, evaluate

                try:
                    const = evaluate(
                        ast.Compare(
                            left=ast.Constant(vals[0].const),
                            ops=node.ops,
                            comparators=[ast.Constant(v.const) for v in vals[1:]],
                        )
                    )
                    return replace(out, const=const)
                except Undecidable:
                    pass
            return Val(taint=out.taint)
        if isinstance(node, ast.IfExp):
            test = self.eval(node.test, frame, ctx)
            job: str | None = None
            if not (test.known and V.ARGDEFAULT not in test.taint):
                job = self.job_truth(node.test, frame)
                if job in (branches.ALL, branches.NONE):
                    # ``model.module(x) if world_size > 1 else model(x)``: only the side that
                    # runs in the multi-rank job is read (see interp.branches).
                    runs = job == branches.ALL
                    cond = CondCtx(
                        node,
                        frame.scope.module.label,
                        node.lineno,
                        self.expand(node.test, frame),
                        runs,
                        test.taint,
                        None,
                        job,
                    )
                    return self.eval(node.body if runs else node.orelse, frame, (*ctx, cond))
            if test.known and V.ARGDEFAULT not in test.taint:
                return self.eval(node.body if test.const else node.orelse, frame, ctx)
            # Each side runs only when its side of the test holds: calls made there carry it
            # (rules tell alternatives from code that runs on every path).
            expanded = self.expand(node.test, frame)
            label = frame.scope.module.label
            taint = test.taint | ({V.RANK} if job == branches.SOME else set())
            sides = [
                CondCtx(node, label, node.lineno, expanded, branch, taint, None, job)
                for branch in (True, False)
            ]
            yes = self.eval(node.body, frame, (*ctx, sides[0]))
            no = self.eval(node.orelse, frame, (*ctx, sides[1]))
            if yes.kind in _CTX_KINDS or no.kind in _CTX_KINDS:
                return Val(kind="ifexp", items=(yes, no), node=self.expand(node.test, frame))
            if (makes_context(yes) or makes_context(no)) and reading(yes) != reading(no):
                # ``torch.cuda.amp.autocast if cfg.use_fp16 else nullcontext``: one of two
                # context makers, entered later; not the first one
                return Val(kind="ifexp", items=(yes, no), node=self.expand(node.test, frame))
            dtypes = {apis.dtype_of(v.canon) if v.kind == "symbol" else None for v in (yes, no)}
            if None not in dtypes and len(dtypes) == 2:
                # ``torch.bfloat16 if <the GPU supports it> else torch.float32``: one of two
                # dtypes, not the first
                return Val(kind="ifexp", items=(yes, no), node=self.expand(node.test, frame))
            if (
                yes.kind in ("class", V.FUNCTION)
                and yes.kind == no.kind
                and yes.const is not no.const
                and job is None
                and V.RANK not in test.taint
            ):
                # ``(AMPTrainer if cfg.AMP else PlainTrainer)(model, ...)``: two classes (or
                # functions) the scan reads, one picked by a test it cannot decide: a site, as
                # for an ``if`` that binds one or the other, read both ways by scan_file
                site = (frame.scope.module.label, node.lineno, f"<{ast.unparse(node)[:60]}>")
                if site not in self.sites:
                    self.sites.insert(len(self.code_sites), site)
                    self.code_sites.add(site)
                chosen = no if site in self.flip else yes
                return replace(chosen, taint=yes.taint | no.taint | test.taint)
            if yes.kind is not None and yes.kind == no.kind:
                return replace(yes, taint=yes.taint | no.taint | test.taint)
            picked = yes if yes.kind is not None else no
            if picked.kind is not None:
                return replace(picked, taint=yes.taint | no.taint)
            out = merge(yes, no)
            if job == branches.SOME and yes.ref is None and no.ref is None:
                # one value on some ranks, another on the others: it depends on the rank
                out = out.with_taint(V.RANK)
            return out
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items: list[Val] = []
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    inner = self.eval(e.value, frame, ctx)
                    items.extend(inner.items or (inner.plain(),))
                else:
                    items.append(self.eval(e, frame, ctx))
            tconst: Any = NO_CONST
            if all(i.known for i in items):
                tconst = tuple(i.const for i in items)
            return Val(items=tuple(items), const=tconst, taint=merge(*items).taint)
        if isinstance(node, ast.Dict):
            pairs: list[tuple[str, Val]] = []
            for k, v in zip(node.keys, node.values):
                val = self.eval(v, frame, ctx)
                if k is None:
                    pairs.extend(val.mapping or ())
                    continue
                key = self.eval(k, frame, ctx)
                if key.known:
                    pairs.append((str(key.const), val))
            taint = merge(*(v for _, v in pairs)).taint
            if any("loss" in k.lower() for k, v in pairs if V.FWD in v.taint):
                taint |= {V.LOSS_NAMED}  # what is made of this dict logs a loss by that name
            return Val(mapping=tuple(pairs), taint=taint)
        if isinstance(node, ast.Subscript):
            return self.subscript(node, frame, ctx)
        if isinstance(node, ast.JoinedStr):
            parts = [self.eval(v, frame, ctx) for v in node.values]
            # the formatted values stay apart for the rules that read what a log line shows
            return replace(merge(*parts), items=tuple(parts))
        if isinstance(node, ast.FormattedValue):
            return self.eval(node.value, frame, ctx)
        if isinstance(node, ast.Lambda):
            ref = FuncRef(node, frame.scope, frame)
            return Val(kind=V.LAMBDA, const=ref, node=node)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            return self.comprehension(node, frame, ctx)
        if isinstance(node, ast.NamedExpr):
            val = self.eval(node.value, frame, ctx)
            self.bind_name(node.target.id, val, frame, node.value)
            return val
        if isinstance(node, ast.Starred):
            return self.eval(node.value, frame, ctx)
        if isinstance(node, ast.Await):
            return self.eval(node.value, frame, ctx)
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            val = self.eval(node.value, frame, ctx) if node.value is not None else UNKNOWN
            if isinstance(node, ast.YieldFrom):
                val = self.element_of(val, None)
            frame.yields.append(val)
            frame.yield_contexts.append(_open_context(ctx))
            return UNKNOWN
        if isinstance(node, ast.Slice):
            return merge(
                *(self.eval(x, frame, ctx) for x in (node.lower, node.upper, node.step) if x)
            )
        return UNKNOWN

    def _boolop(self, node: ast.BoolOp, vals: list[Val]) -> Val:
        out = merge(*vals)
        if all(v.known for v in vals):
            const: Any = isinstance(node.op, ast.And)
            for v in vals:
                const = v.const
                if isinstance(node.op, ast.And) and not const:
                    break
                if isinstance(node.op, ast.Or) and const:
                    break
            taint = out.taint
            return Val(const=const, taint=taint)
        return Val(taint=out.taint)

    def comprehension(self, node: ast.AST, frame: Frame, ctx: Ctx) -> Val:
        sub = Frame(frame.scope, {}, {}, frame, frame.name)
        its: list[Val] = []
        for gen in node.generators:  # type: ignore[attr-defined]
            it = self.eval(gen.iter, sub, ctx)
            its.append(it)
            self.assign(gen.target, self.element_of(it, gen.iter), None, sub, ctx, node)
            for cond in gen.ifs:
                self.eval(cond, sub, ctx)
        if isinstance(node, ast.DictComp):
            return merge(self.eval(node.key, sub, ctx), self.eval(node.value, sub, ctx))
        elt = self.eval(node.elt, sub, ctx)  # type: ignore[attr-defined]
        if elt.kind == V.PARAMS:
            return Val(kind=V.PARAMS, ref=elt.ref)
        count = _count_of(its[0]) if len(its) == 1 else None
        if count is not None:
            # [b for _, b in zip(range(K), it)]: a list of K items (micro-batches).
            return Val(kind="sized", items=(elt, count), taint=elt.taint)
        return Val(items=(elt,), taint=elt.taint)

    def binop(
        self,
        op: ast.operator,
        left: Val,
        right: Val,
        right_node: ast.expr | None,
        left_node: ast.expr | None = None,
        at: str | None = None,
    ) -> Val:
        if left.known and right.known:
            from ddpadvisor.scan.evaluate import Undecidable, evaluate

            try:
                const = evaluate(ast.BinOp(ast.Constant(left.const), op, ast.Constant(right.const)))
                return Val(const=const, taint=left.taint | right.taint)
            except Undecidable:
                pass
        taint = set(left.taint | right.taint)
        for side, other in ((left, right), (right, left)):
            if V.FWD in other.taint and V.FWD not in side.taint:
                # A loss over a token count summed across ranks is still one rank's loss: how
                # a loss was reduced is said by the operands that carry it, not by a count.
                taint -= {t for t in side.taint - other.taint if V.is_reduction_label(t)}
        ops = left.ops
        if isinstance(op, (ast.Div, ast.FloorDiv)):
            if V.FWD in left.taint and right_node is not None and len(ops) < 8:
                ops = (*ops, Op("div", right_node, right))
            if (
                V.WORLD in right.taint
                and V.FWD in left.taint
                and V.FWD not in right.taint
                and V.MUL_WORLD in left.taint
                and V.DIV_WORLD not in left.taint
            ):
                # (x * W) / W: the division undoes the multiplication; neither stays
                taint = {t for t in taint if t != V.MUL_WORLD and not t.startswith("mulworld@")}
            elif V.WORLD in right.taint:
                taint.add(V.DIV_WORLD)
                if at and V.FWD in left.taint:
                    taint.add(f"divworld@{at}")
                taint.discard(V.REDUCED_SUM)
                taint.discard("reduced_div_unknown")
                if V.REDUCED_AVG in left.taint:
                    taint.add("double_div_world")
            elif right.taint & V.ANY_REDUCED and V.REDUCED in left.taint:
                # A summed total over a summed count: a correct global mean.
                taint.discard(V.REDUCED_SUM)
            elif V.REDUCED_SUM in left.taint and right.taint & (V.COUNT_LABELS | {V.SIZE}):
                # A sum over the ranks divided by a count of this rank's batches, tokens or
                # samples (``len(loader)``): still summed over the ranks.
                pass
            elif V.REDUCED_SUM in left.taint:
                # Divided by something else (often a hard-coded world size): undecided here;
                # the divisor as written goes with it for the rules (the accumulation count
                # is not the world size).
                taint.discard(V.REDUCED_SUM)
                taint.add("reduced_div_unknown")
                if right_node is not None:
                    value = right.const if right.known else ""
                    taint.add(f"{V.SUM_DIVISOR}{value}:{ast.unparse(right_node)[:120]}")
            if V.FWD in left.taint and V.FWD not in right.taint:
                if V.GLOBAL_TOKENS in right.taint:
                    taint.add(V.NORM_GLOBAL)
                    if at:
                        taint.add(f"normglobal@{at}")
                    taint.discard(V.SUM_RED)
                    taint.add(V.MEAN_RED)
                elif V.SUM_RED in left.taint and right.taint & {V.TOKENS, V.DATA, V.SIZE}:
                    taint.discard(V.SUM_RED)
                    taint.add(V.MEAN_RED)
            if V.FWD not in right.taint and (
                V.WORLD in right.taint or (V.WORLD in left.taint and right.taint & V.ANY_REDUCED)
            ):
                # x / world_size undoes a world-size scaling; world_size * n / (n summed over
                # the ranks) is a rank's share of the global count, about 1: either way the
                # quotient carries no world-size factor
                taint.discard(V.WORLD)
        elif isinstance(op, ast.Mult):
            fwd_side, other, other_node = (
                (left, right, right_node) if V.FWD in left.taint else (right, left, left_node)
            )
            if V.FWD in fwd_side.taint and other_node is not None and len(ops) < 8:
                ops = (*fwd_side.ops, Op("mul", other_node, other))
            if (
                V.FWD in fwd_side.taint
                and V.MEAN_RED in fwd_side.taint
                and V.SIZE in other.taint
                and V.FWD not in other.taint
            ):
                # a mean over the batch times the batch's size: a sum over it
                taint.discard(V.MEAN_RED)
                taint.add(V.SUM_RED)
            if (
                V.FWD in fwd_side.taint
                and V.WORLD in other.taint
                and V.FWD not in other.taint
                and V.DIV_WORLD in fwd_side.taint
                and V.MUL_WORLD not in fwd_side.taint
            ):
                # (x / W) * W (a Sinkhorn assignment normalised over the global batch, then
                # scaled back): the multiplication undoes the division; neither stays
                taint = {
                    t
                    for t in taint
                    if t not in (V.DIV_WORLD, "double_div_world") and not t.startswith("divworld@")
                }
            elif V.FWD in fwd_side.taint and V.WORLD in other.taint and V.FWD not in other.taint:
                taint.add(V.MUL_WORLD)
                if at:
                    taint.add(f"mulworld@{at}")
            elif V.WORLD in taint and V.FWD not in taint and at:
                taint.add(f"scaled@{at}")
        elif (
            isinstance(op, ast.Pow) and V.WORLD in left.taint and right.known and right.const == 0.5
        ):
            taint.add("sqrt_world")
            if at:
                taint.add(f"scaled@{at}")
        return Val(taint=frozenset(taint), ops=ops)

    def subscript(self, node: ast.Subscript, frame: Frame, ctx: Ctx) -> Val:
        base = self.eval(node.value, frame, ctx)
        key = self.eval(node.slice, frame, ctx)
        if base.canon == "os.environ" and key.known:
            return self._env(str(key.const), None)
        if key.known and base.mapping is not None:
            got = base.get(str(key.const))
            if got is not None:
                # ``table[cfg.dtype]``: only as decided as the key (a default stays a default).
                loose = key.taint & {V.ARGDEFAULT, V.UNBOUND}
                return replace(got, taint=got.taint | loose) if loose else got
        if (
            key.known
            and base.items is not None
            and isinstance(key.const, int)
            and -len(base.items) <= key.const < len(base.items)
        ):
            return base.items[key.const]
        if base.kind == "batch":
            return Val(taint=base.taint | key.taint)
        if base.kind in _MODEL_KINDS:
            return Val(kind=base.kind, ref=base.ref)  # model.layers[3]: still (part of) the model
        if base.kind == "named_params" or base.kind == V.PARAMS:
            return Val(kind=V.PARAMS, ref=base.ref)
        if base.kind == "param_groups" and not isinstance(node.slice, ast.Slice):
            # ``optimizer.param_groups[0]``: one group, as a loop over them gives
            return Val(kind="param_group", ref=base.ref)
        if isinstance(node.slice, ast.Slice):
            sl = node.slice
            lower = self.eval_pure(sl.lower, frame) if sl.lower is not None else UNKNOWN
            step = self.eval_pure(sl.step, frame) if sl.step is not None else UNKNOWN
            if V.RANK in lower.taint and V.WORLD in step.taint:
                self.rank_slices.append(self._at(node, frame))
            return replace(base.plain(), taint=base.taint | key.taint)
        return merge(base, key)

    def _env(self, key: str, default: Val | None) -> Val:
        if key in _RANK_ENV:
            return Val(taint=frozenset({V.RANK}))
        if key in _WORLD_ENV:
            return Val(taint=frozenset({V.WORLD}))
        if default is not None and default.known:
            return Val(const=default.const, taint=frozenset({V.ARGDEFAULT}))
        return Val(taint=frozenset({"env"}))

    def attribute(self, base: Val, name: str, frame: Frame) -> Val:
        got = self._attribute(base, name, frame)
        obj = self.obj(base) if base.ref is not None else None
        if obj is not None and got.known and obj.extra.get("open_attrs"):
            # attributes the run's options may have overwritten (``setattr(config, k, v)``
            # over its keyword arguments): a constant there is only a default
            return got.with_taint(V.ARGDEFAULT)
        return got

    def _attribute(self, base: Val, name: str, frame: Frame) -> Val:
        kind = base.kind
        if kind == "symbol":
            # an excerpt's undefined name stays undecided through its attributes (self.seed)
            return Val(kind="symbol", canon=f"{base.canon}.{name}", taint=base.taint & _UNDEFINED)
        if kind == "module" and isinstance(base.const, ModuleScope):
            scope = base.const
            if name in scope.globals:
                return self.resolved(scope.globals, name)
            sub = self.sources.resolve(f"{scope.module.name}.{name}")
            if sub is not None:
                sub_scope = self._scope(sub)
                self._walk_module(sub_scope)
                return Val(kind="module", const=sub_scope)
            return Val(kind="symbol", canon=f"{scope.module.name}.{name}")
        if kind == SUPER and isinstance(base.const, ClassInfo) and base.items:
            return self._super_attr(base.const, base.items[0], name)
        if kind == "class" and isinstance(base.const, ClassInfo):
            info = base.const
            found = info.find_method(name)
            if found is not None:
                ref = FuncRef(found[1], found[0].scope, None, owner=found[0])
                return Val(kind=V.FUNCTION, const=ref, canon=f"local:{info.name}.{name}")
            attr = info.find_attr(name)
            return attr if attr is not None else UNKNOWN
        obj = self.obj(base)
        if obj is not None:
            if name in obj.attrs:
                got = obj.attrs[name]
                if kind in _MODEL_KINDS and got.kind in _MODEL_KINDS:
                    # A sub-module stands for the whole model it belongs to: what matters
                    # is which model (and whether reached around DDP), not which layer.
                    return Val(kind=kind, ref=base.ref)
                return got
            cinfo = obj.extra.get("class")
            if isinstance(cinfo, ClassInfo):
                found = cinfo.find_method(name)
                if found is not None:
                    ref = FuncRef(found[1], found[0].scope, None, owner=found[0])
                    return Val(
                        kind="method", const=ref, items=(base,), canon=f"local:{cinfo.name}.{name}"
                    )
                attr = cinfo.find_attr(name)
                if attr is not None:
                    return attr
            if kind == V.ARGS:
                return self._arg_default(obj, name)
            if (
                kind
                in (
                    V.TRAINING_ARGS,
                    V.TRAINER,
                    V.ACCELERATOR,
                    V.OPTIMIZER,
                    V.LOADER,
                    V.DSAMPLER,
                )
                and name in obj.kwargs
            ):
                return obj.kwargs[name]
        if kind in _MODEL_KINDS and kind != V.DDP_MODULE and name in _CONTEXT_METHODS:
            # ``context = model.no_sync`` then ``with context():``: the method, not a layer
            return Val(kind=V.BOUND, items=(base,), canon=name)
        if kind == V.DDP:
            if name == "module":
                inner = obj.wraps if obj is not None else None
                return Val(kind=V.DDP_MODULE, ref=inner if inner is not None else base.ref)
            return Val(kind=V.DDP, ref=base.ref) if name not in apis.MODEL_DATA_ATTRS else UNKNOWN
        if kind in (V.MODEL, V.DDP_MODULE, V.FSDP):
            if name in ("module", "_orig_mod", "base_model", "model") and kind == V.FSDP:
                return Val(kind=V.DDP_MODULE, ref=obj.wraps if obj and obj.wraps else base.ref)
            if name in apis.MODEL_DATA_ATTRS:
                return Val(kind=V.PARAMS, ref=base.ref) if name in ("weight", "bias") else UNKNOWN
            if name in _MAIN_PROCESS_NAMES or name in _RANK_NAMES:
                return Val(taint=frozenset({V.RANK}))  # LightningModule.global_rank
            if name in _WORLD_NAMES:
                return Val(taint=frozenset({V.WORLD}))
            if name in apis.MODULE_CONTEXT_ATTRS:
                return UNKNOWN  # LightningModule.trainer: not a submodule
            return Val(kind=kind, ref=base.ref)
        if kind == V.PARAMS:
            return Val(kind=V.PARAMS, ref=base.ref)
        if kind == V.OPTIMIZER and name == "param_groups":
            return Val(kind="param_groups", ref=base.ref)
        if kind == V.ACCELERATOR:
            if name in (
                "is_main_process",
                "is_local_main_process",
                "process_index",
                "local_process_index",
            ):
                return Val(taint=frozenset({V.RANK}))
            if name == "num_processes":
                return Val(taint=frozenset({V.WORLD}))
        if kind == V.LOADER and name == "sampler" and obj is not None:
            return obj.kwargs.get("sampler", Val(kind=V.SAMPLER))
        if kind == V.LOADER and name == "dataset" and obj is not None:
            return obj.kwargs.get("dataset", obj.args[0] if obj.args else UNKNOWN)
        if base.mapping is not None:
            mapped = base.get(name)
            if mapped is not None:
                return mapped
        if name in _MAIN_PROCESS_NAMES or name in _RANK_NAMES:
            return Val(taint=base.taint | {V.RANK})
        if name in _WORLD_NAMES:
            return Val(taint=base.taint | {V.WORLD})
        if name == "num_items_in_batch":
            return Val(taint=base.taint | {V.GLOBAL_TOKENS})
        if V.UNBOUND in base.taint and base.kind is None:
            role = self.unbound(name)  # self.scaler of a method nobody called: its name's role
            if role.kind is not None:
                return role
        out = base.plain()
        if name == "loss" and V.FWD in base.taint:
            out = out.with_taint(V.MEAN_RED)
        if name == "shape" and base.kind is None and V.FWD in base.taint:
            # a forward output's shape is a count (its batch size), not a value of the loss
            kept = {t for t in base.taint if t != V.FWD and not V.is_reduction_label(t)}
            kept -= {V.MEAN_RED, V.SUM_RED}
            out = Val(taint=frozenset(kept | {V.SIZE}))
        return out

    def _super_attr(self, owner: ClassInfo, self_val: Val, name: str) -> Val:
        """``super().name`` in a method of ``owner``: the first class after ``owner`` in the
        instance's MRO that defines it (a base class in another module of the project)."""
        obj = self.obj(self_val)
        cls = obj.extra.get("class") if obj is not None else None
        mro = cls.mro() if isinstance(cls, ClassInfo) and owner in cls.mro() else owner.mro()
        for info in mro[mro.index(owner) + 1 :]:
            if name in info.methods:
                ref = FuncRef(info.methods[name], info.scope, None, owner=info)
                return Val(
                    kind="method", const=ref, items=(self_val,), canon=f"local:{info.name}.{name}"
                )
            if name in info.attrs:
                return info.attrs[name]
        return UNKNOWN

    def _arg_default(self, parser_ns: Obj, name: str) -> Val:
        parser = self.objects.get(parser_ns.extra.get("parser", -1))
        taint: set[str] = set()
        if name.lower() in _RANK_NAMES:
            taint.add(V.RANK)
        if name.lower() in _WORLD_NAMES:
            taint.add(V.WORLD)
        if parser is not None:
            defaults: dict[str, Val] = parser.extra.get("defaults", {})
            if name in defaults:
                got = defaults[name]
                return replace(got, taint=got.taint | taint | {V.ARGDEFAULT})
        return Val(taint=frozenset(taint | {"cli"}))

    # ------------------------------------------------------------------ calls
    def eval_call(self, node: ast.Call, frame: Frame, ctx: Ctx) -> Val:
        func = node.func
        if (
            isinstance(func, ast.Name)
            and func.id == "super"
            and frame.owner is not None
            and frame.self_val is not None
            and "super" not in frame.scope.globals
        ):
            # ``super()`` in a method the scan inlined: the next classes of the instance's MRO.
            return Val(kind=SUPER, const=frame.owner, items=(frame.self_val,))
        recv: Val | None = None
        method: str | None = None
        if isinstance(func, ast.Attribute):
            recv = self.eval(func.value, frame, ctx)
            method = func.attr
            fval = (
                self.attribute(recv, method, frame)
                if recv.kind
                in (
                    "symbol",
                    "module",
                    "class",
                    V.INSTANCE,
                    V.MODEL,
                    V.DATASET,
                    V.SAMPLER,
                    V.DDP_MODULE,
                    SUPER,
                )
                else UNKNOWN
            )
            if fval.kind in _MODEL_KINDS and recv.kind in _MODEL_KINDS:
                fval = UNKNOWN  # a method on a model: handled by model_method
        else:
            fval = self.eval(func, frame, ctx)
        args: list[Val] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                inner = self.eval(a.value, frame, ctx)
                args.extend(inner.items or (inner.plain(),))
            else:
                args.append(self.eval(a, frame, ctx))
        kwargs: dict[str, Val] = {}
        for k in node.keywords:
            val = self.eval(k.value, frame, ctx)
            if k.arg is None:
                kwargs.update(dict(val.mapping or ()))
            else:
                kwargs[k.arg] = val
        if (fval.kind == "symbol" and fval.canon) or (
            fval.kind in (V.FUNCTION, "class", "method") and fval.canon
        ):
            name = fval.canon
        elif method:
            name = "." + method
        else:
            name = ""
        ev = Event(
            self.next_seq(),
            "call",
            frame.scope.module.label,
            node.lineno,
            ctx,
            node,
            name=name,
            method=method,
            recv=recv,
            args=args,
            kwargs=kwargs,
        )
        self.events.append(ev)
        result = self.call_semantics(ev, fval, frame, ctx)
        called = method or (apis.last(name) if name else "")
        if called and not result.known and _WORLD_GETTER.fullmatch(called):
            result = result.with_taint(V.WORLD)
        ev.result = result
        return result

    def call_semantics(self, ev: Event, fval: Val, frame: Frame, ctx: Ctx) -> Val:
        node = ev.node
        assert isinstance(node, ast.Call)
        if fval.kind == V.PARTIAL and fval.items:
            # ``amp = partial(torch.autocast, dtype=dt)`` then ``amp()``: the call of the
            # wrapped callable with the bound arguments first
            inner = fval.items[0]
            ev.args = [*fval.items[1:], *ev.args]
            ev.kwargs = {**dict(fval.mapping or ()), **ev.kwargs}
            if inner.canon and not ev.name:
                ev.name = inner.canon
            return self.call_semantics(ev, inner, frame, ctx)
        if fval.kind == V.BOUND and fval.items and fval.canon:
            # a model's method taken earlier (``context = model.no_sync``), called now
            ev.recv, ev.method = fval.items[0], fval.canon
            ev.name = ev.name or "." + fval.canon
            return self.method_call(ev, fval.items[0], fval.canon, frame, ctx)
        if fval.kind == V.ALTERNATIVES and fval.items and len(fval.items) == 2:
            # one of two callables a helper or a conditional expression picked: calling it
            # gives one of two results (a context manager on one side only stays "maybe")
            name, args, kwargs = ev.name, list(ev.args), dict(ev.kwargs)
            recv, method = ev.recv, ev.method
            got, named = [], []
            for side in fval.items:
                ev.name, ev.args, ev.kwargs = name, list(args), dict(kwargs)
                ev.recv, ev.method = recv, method
                got.append(self.call_semantics(ev, side, frame, ctx))
                named.append((ev.name, ev.recv, ev.method))
            # the event is the call of the side that names a method (``model.no_sync``)
            ev.name, ev.recv, ev.method = next((n for n in named if n[2]), named[-1])
            yes, no = got
            if yes.kind in _CTX_KINDS or no.kind in _CTX_KINDS:
                return Val(kind=V.ALTERNATIVES, items=(yes, no), node=fval.node)
            return yes if yes.kind is not None else no
        if fval.kind in (V.FUNCTION, V.LAMBDA) and isinstance(fval.const, FuncRef):
            owner = fval.const.owner
            if owner is not None and ev.method and ev.recv is not None and ev.recv.kind == "class":
                # ClassName.method(...) on a local class: a static or class method call.
                pass
            return self.inline(fval.const, ev.args, ev.kwargs, None, node, frame, ctx)
        if fval.kind == "method" and isinstance(fval.const, FuncRef) and fval.items:
            self_val = fval.items[0]
            result = self.inline(fval.const, ev.args, ev.kwargs, self_val, node, frame, ctx)
            if self_val.kind in _MODEL_KINDS and ev.method == "forward":
                return self.forward(self_val, ev)
            return result
        if fval.kind == "class" and isinstance(fval.const, ClassInfo):
            made = self.instantiate(fval.const, ev, frame, ctx)
            chosen = fval.taint & {V.ARGDEFAULT, V.UNBOUND}
            obj = self.obj(made)
            if chosen and obj is not None:
                # ``MODELS[args.model]()``: the class the default names, not the run's
                obj.extra["chosen_by_default"] = True
            return made
        recv = ev.recv
        if recv is not None and ev.method and recv.kind not in ("symbol", "module", "class"):
            # ``self.model(x)``: an object attribute that holds a model or a criterion.
            if fval.kind in _MODEL_KINDS and recv.kind not in _MODEL_KINDS:
                return self.forward(fval, ev)
            if fval.kind == V.CRITERION:
                return self.criterion_call(fval, ev)
            return self.method_call(ev, recv, ev.method, frame, ctx)
        if fval.kind == "symbol" and fval.canon:
            out = library.symbol_call(self, ev, fval.canon, frame, ctx)
            if V.UNBOUND in fval.taint and out.kind is None and not out.known:
                out = out.with_taint(V.UNBOUND)  # what an excerpt's undefined helper returns
            return out
        if fval.kind in _MODEL_KINDS:
            return self.forward(fval, ev)
        if fval.kind == V.CRITERION:
            return self.criterion_call(fval, ev)
        if fval.kind == V.INSTANCE:
            obj = self.obj(fval)
            info = obj.extra.get("class") if obj else None
            if isinstance(info, ClassInfo):
                found = info.find_method("__call__")
                if found is not None:
                    ref = FuncRef(found[1], found[0].scope, None, owner=found[0])
                    return self.inline(ref, ev.args, ev.kwargs, fval, node, frame, ctx)
        return merge(*ev.args, *ev.kwargs.values())

    def forward(self, model: Val, ev: Event) -> Val:
        model = self._through_owned_wrapper(model)
        route = model.kind or "unknown"
        base = merge(*_graph_cut(ev))
        taint = base.taint | {
            V.FWD,
            f"route:{route}",
            f"model:{model.ref}",
            f"fwdseq:{ev.seq}",
            f"fwdof:{model.ref}:{ev.seq}",
        }
        obj = self.obj(model)
        if obj is not None and "hf_class" in obj.extra and "labels" in ev.kwargs:
            taint |= {V.MEAN_RED}
        own = _own_loss_reduction(self._model_class(obj))
        if own is not None:
            taint |= {own}
        return Val(taint=frozenset(taint))

    def _through_owned_wrapper(self, model: Val) -> Val:
        """A module of the project that holds the DDP/FSDP-wrapped model as an attribute and
        calls it in its own code (a task or loss wrapper: ``self.trainable_module = DDP(m)``,
        ``self.trainable_module(x)`` in its forward): calling it goes through the wrapper. (The
        wrap itself reads ``self.trainable_module`` as the holder, a sub-module standing for
        its model, so the holder may look wrapped by the DDP it holds.)"""
        obj = self.obj(model)
        if model.kind != V.MODEL or obj is None:
            return model
        info = obj.extra.get("class")
        if not isinstance(info, ClassInfo):
            return model
        held = {
            name: val
            for name, val in obj.attrs.items()
            if val.kind in (V.DDP, V.FSDP) and val.ref != model.ref
        }
        if len({v.ref for v in held.values()}) != 1:
            return model
        called = _self_calls(info)
        return next((v for name, v in held.items() if name in called), model)

    def _model_class(self, obj: Obj | None) -> ClassInfo | None:
        """The user's module class behind a model value, through a DDP / accelerate wrapper."""
        for _ in range(4):
            if obj is None:
                return None
            info = obj.extra.get("class")
            if isinstance(info, ClassInfo):
                return info
            obj = self.objects.get(obj.wraps) if obj.wraps is not None else None
        return None

    def criterion_call(self, crit: Val, ev: Event) -> Val:
        base = merge(*ev.args, *ev.kwargs.values())
        obj = self.obj(crit)
        red = "mean"
        if obj is not None:
            r = obj.kwargs.get("reduction")
            if r is not None:
                red = str(r.const) if r.known else "unknown"
        taint = set(base.taint)
        if red == "sum":
            taint.add(V.SUM_RED)
        elif red == "mean":
            taint.add(V.MEAN_RED)
        return Val(taint=frozenset(taint), ops=base.ops)

    def method_call(self, ev: Event, recv: Val, method: str, frame: Frame, ctx: Ctx) -> Val:

        return library.method_call(self, ev, recv, method, frame, ctx)


def _self_calls(info: ClassInfo) -> set[str]:
    """Attributes the class's methods call as ``self.<name>(...)``."""
    out: set[str] = set()
    for cls in info.mro():
        for sub in ast.walk(cls.node):
            if (
                isinstance(sub, ast.Call)
                and isinstance(sub.func, ast.Attribute)
                and isinstance(sub.func.value, ast.Name)
                and sub.func.value.id == "self"
            ):
                out.add(sub.func.attr)
    return out


_LOSS_CALLS = ("cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss")


def _own_loss_reduction(info: ClassInfo | None) -> str | None:
    """A model whose ``forward`` returns its own loss (nanoGPT-style ``return F.cross_entropy(
    ..., reduction="sum")``): that loss's reduction, when every such return agrees."""
    found = info.find_method("forward") if info is not None else None
    if found is None:
        return None
    return _returned_reduction(found[1])


@functools.lru_cache(maxsize=1024)
def _returned_reduction(fn: ast.AST) -> str | None:
    """Read once per forward definition: every forward call of the model asks again."""
    seen: set[str] = set()
    for node in ast.walk(fn):
        if not isinstance(node, ast.Return) or not isinstance(node.value, ast.Call):
            continue
        call = node.value
        name = call.func.attr if isinstance(call.func, ast.Attribute) else ""
        name = name or (call.func.id if isinstance(call.func, ast.Name) else "")
        if name not in _LOSS_CALLS:
            continue
        red = next((k.value for k in call.keywords if k.arg == "reduction"), None)
        if red is None:
            seen.add(V.MEAN_RED)
        elif isinstance(red, ast.Constant) and red.value in ("sum", "mean"):
            seen.add(V.SUM_RED if red.value == "sum" else V.MEAN_RED)
        else:
            return None
    return seen.pop() if len(seen) == 1 else None


_GRAPH_TAGS = ("route:", "model:", "fwdseq:", "fwdof:")


def _graph_cut(ev: Event) -> list[Val]:
    """A call's argument values, where an argument written as ``x.detach()`` carries no
    autograd history into this forward (a GAN's ``D(fake.detach())`` does not reach G)."""
    node = ev.node
    written: list[ast.expr] = list(node.args) if isinstance(node, ast.Call) else []
    out = []
    for i, val in enumerate([*ev.args, *ev.kwargs.values()]):
        arg = written[i] if i < len(written) else None
        if (
            isinstance(arg, ast.Call)
            and isinstance(arg.func, ast.Attribute)
            and arg.func.attr == "detach"
        ):
            kept = frozenset(t for t in val.taint if t != V.FWD and not t.startswith(_GRAPH_TAGS))
            val = replace(val, taint=kept)
        out.append(val)
    return out


def _open_context(ctx: Ctx) -> Val | None:
    """The innermost ``with`` context of known kind the innermost function holds open here."""
    for c in reversed(ctx):
        if isinstance(c, FuncCtx):
            return None
        if isinstance(c, WithCtx) and c.kind is not None:
            return c.val
    return None
