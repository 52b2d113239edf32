"""What every rule works with: the walk, its analysis, the findings so far and shared helpers.

A rule is a function ``rule(rc: RuleContext) -> None`` (see :mod:`ddpadvisor.scan.rules`). It
emits a :class:`Finding` only when the code decides the fact; when it cannot, it emits nothing
(the fact stays unknown) and may add a warning that says why. Findings for a fact are ordered
so that the decisive one comes last.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.analysis import Accum, Analysis, eval_at, exclusive, text
from ddpadvisor.scan.context import CondCtx, Event, FuncCtx, LoopCtx
from ddpadvisor.scan.evaluate import free_names
from ddpadvisor.scan.interp import ClassInfo, WalkResult
from ddpadvisor.scan.interp.frames import _RANK_NAMES, _WORLD_NAMES
from ddpadvisor.scan.library import views
from ddpadvisor.scan.library.views import (
    AccelerateView,
    Answer,
    FrameworkView,
    HFTrainerView,
    Open,
    Said,
    Script,
)
from ddpadvisor.scan.source import dotted
from ddpadvisor.scan.values import Obj, Val

Value = bool | int | float | str

# A value known only as a command-line default (``parser.add_argument("--accum", default=4)``)
# is not reported as a fact: scanned facts outrank the user's own answers and --set, so a
# run launched with other flags could never be corrected. Flip to report defaults anyway.
CLI_DEFAULTS_ARE_FACTS = False


# The tail of a warning about a value only a command-line default gives; see
# ``cli_default_fact``.
CLI_DEFAULT_NOTE = " only by command-line default; if the run used that, "
_CLI_DEFAULT = re.compile(r": (\w+) is .*" + re.escape(CLI_DEFAULT_NOTE))


def cli_default_fact(warning: str) -> str | None:
    """The fact a command-line-default warning is about, else None: once another source
    (the trace of the run, an answer) gives the fact, the warning has nothing left to say."""
    m = _CLI_DEFAULT.search(warning)
    return m.group(1) if m else None


@dataclass(frozen=True)
class Finding:
    fact: str
    value: Value
    where: str
    detail: str


def const(val: Val | None) -> object | None:
    return val.const if val is not None and val.known else None


def num(val: Val | None) -> float | None:
    c = const(val)
    if isinstance(c, bool) or not isinstance(c, (int, float)):
        return None
    return float(c)


def is_rank_cond(c: object) -> bool:
    """A branch that runs on some ranks only. A test on a rank value that holds on every
    rank of the job (``local_rank != -1``, torch.distributed.launch's "under DDP") or on
    none (see interp.branches) is not one."""
    return isinstance(c, CondCtx) and V.RANK in c.taint and c.job not in ("all", "none")


def lines_at(taint: frozenset[str], prefix: str) -> list[str]:
    out = [t.split("@", 1)[1] for t in taint if t.startswith(prefix + "@")]

    def key(w: str) -> tuple[str, int]:
        f, _, line = w.rpartition(":")
        return f, int(line) if line.isdigit() else 0

    return sorted(out, key=key)


class UndeclaredFact(AssertionError):
    """A rule set a fact its entry in ``RULES`` does not declare."""


class RuleContext:
    def __init__(
        self,
        walk: WalkResult,
        strict: bool = False,
        given: Mapping[str, object] | None = None,
    ) -> None:
        self.walk = walk
        # Fact values the run's other evidence supplies (--set, answers, an attached config).
        # They never become scanned facts; a rule reads them where the code leaves a value
        # open (a command-line default, an unread config) and would otherwise stop there.
        self.given: dict[str, object] = dict(given or {})
        self.a = Analysis(walk)
        self.findings: list[Finding] = []
        self.warnings: list[str] = []
        self.strict = strict or bool(os.environ.get("DDPADVISOR_DEBUG"))
        self.label = walk.sources.main.label
        self._by_class: dict[int, list[tuple[ast.Call, str]]] | None = None
        self.lora_switched: list[str] = []  # LoRA evidence only a command-line option reaches
        # The facts the running rule declares; None outside a rule (no check).
        self.declared: frozenset[str] | None = None
        self.running = ""

    def _check_declared(self, fact: str) -> None:
        if self.declared is not None and fact not in self.declared:
            raise UndeclaredFact(f"rule {self.running} sets {fact}, which it does not declare")

    # ------------------------------------------------------------------ plumbing
    def emit(self, fact: str, value: Value, where: str, detail: str) -> None:
        self._check_declared(fact)
        fw = self.framework
        if not where and isinstance(fw, HFTrainerView):
            where = fw.where  # the HF Trainer's line for what the framework does
        self.findings.append(Finding(fact, value, where or self.label, detail))

    def cli_default(self, fact: str, value: Value, where: str) -> None:
        """A value that is only a command-line default stays unknown: a scanned fact beats
        the user's own answer, so a guess here could not be corrected."""
        self._check_declared(fact)
        shown = str(value).lower() if isinstance(value, bool) else value
        if CLI_DEFAULTS_ARE_FACTS:
            self.emit(fact, value, where, f"{fact}={shown} (command-line default)")
            return
        self.warn(f"{where}: {fact} is {shown}{CLI_DEFAULT_NOTE}pass --set {fact}={shown}")

    def given_number(self, fact: str) -> float | None:
        """A numeric value other evidence gives for ``fact`` (see :attr:`given`), else None."""
        v = self.given.get(fact)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        return float(v)

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    # ------------------------------------------------------------------ helpers
    def obj(self, val: Val | None) -> Obj | None:
        if val is None or val.ref is None:
            return None
        return self.walk.objects.get(val.ref)

    @cached_property
    def framework(self) -> FrameworkView | None:
        """The view of the framework that drives the job (library/views.py), built once;
        None for a hand-written loop."""
        return views.build(self.a)

    def say(self, fact: str, said: Said | Script) -> None:
        """What a framework's view answers: an Answer is the fact, an Open a warning, None
        (and SCRIPT) nothing."""
        if isinstance(said, Answer):
            self.emit(fact, said.value, said.where, said.why)
        elif isinstance(said, Open):
            self.warn(said.why)

    @property
    def hf(self) -> bool:
        return isinstance(self.framework, HFTrainerView)

    @property
    def acc(self) -> bool:
        return isinstance(self.framework, AccelerateView)

    def training_loader(self) -> Obj | None:
        """The DataLoader the training loop reads (Analysis.training_loaders: the loop
        around the main backward that takes its batches, however wrapped); failing that,
        the only DataLoader that is not an evaluation one."""
        b = self.a.main_backward
        if b is not None:
            for ref in self.a.training_loaders:
                obj = self.walk.objects.get(ref)
                if obj is not None and obj.kind == V.LOADER:
                    return obj
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

    def _opaque_touches(self, refs: set[int | None], loop: LoopCtx | None) -> list[Event]:
        """Calls into code the scan cannot read that receive one of these objects."""
        out = []
        for e in self.a.calls():
            if loop is not None and loop not in e.ctx:
                continue
            head = e.name.split(".")[0]
            if not e.name or e.name.startswith(("local:", ".")) or head in KNOWN_HEADS:
                continue
            if any(v.ref in refs for v in [*e.args, *e.kwargs.values()] if v.ref is not None):
                out.append(e)
        return out

    def unreached_calls(self, wanted: Callable[[str], bool]) -> list[str]:
        """Calls in the files the scan read that the walk never reached (a function started
        by a launcher it does not follow, ``fabric.launch(main)``), whose dotted name
        ``wanted`` accepts: a fact decided by the *absence* of such a call is not decided."""
        entered = {(c.file, c.line) for e in self.a.events for c in e.ctx if isinstance(c, FuncCtx)}
        sources = self.walk.sources
        out: list[str] = []
        for m in [sources.main, *sources.modules.values()]:
            calls = [(c, n) for c, n, _cls in m.index.calls if n and wanted(n)]
            if not calls:
                continue
            # a call in a function the walk never entered; one skipped in code it walked is
            # dead code (``if compile:`` with ``compile = False``), not unseen
            for fn in ast.walk(m.tree):
                if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                if (m.label, fn.lineno) in entered:
                    continue
                inside = {id(sub) for sub in ast.walk(fn)}
                out.extend(f"{m.label}:{c.lineno}" for c, _ in calls if id(c) in inside)
        return sorted(set(out))

    # ------------------------------------------------------------------ precision
    @property
    def ds(self) -> Obj | None:
        """The DeepSpeed engine, whose JSON config decides precision, accumulation, clipping."""
        return next((o for o in self.a.ddps if o.extra.get("deepspeed")), None)

    # ------------------------------------------------------------------ wrap order
    def _lora_evidence(self) -> list[str]:
        """Where adapters are added, on paths every run takes; those only a command-line
        option or a value the scan does not know takes (``if args.lora_dim > 0:``,
        ``if lora_rank > 0:`` with a rank from a config) go to :attr:`lora_switched`."""
        out: list[str] = []
        self.lora_switched = []

        def seen(where: str, ev: Event | None) -> None:
            (self.lora_switched if ev is not None and switched(ev) else out).append(where)

        for o in self.a.objects.values():
            if o.extra.get("peft"):
                ev = self.a.by_seq.get(o.extra["peft"])
                seen(ev.where if ev else o.where, ev)
        for e in self.a.calls():
            n = apis.last(e.name)
            if n in (
                "LoraConfig",
                "get_peft_model",
                "inject_adapter_in_model",
                "prepare_model_for_kbit_training",
            ) or e.name.startswith(("peft.", "loralib.")):
                seen(e.where, e)
        made: dict[int, list[Event]] = {}
        for e in self.a.calls():
            built = self.obj(e.result) if e.result is not None else None
            if built is not None and built.seq == e.seq:  # built by this call
                made.setdefault(id(built.extra.get("class")), []).append(e)
        for info in self.walk.classes:
            if "lora" in info.name.lower() and info.object_kind() == V.MODEL and id(info) in made:
                where = f"{info.scope.module.label}:{info.node.lineno}"
                seen(where, made[id(info)][0] if all(map(switched, made[id(info)])) else None)
        return out

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

        # A learning rate that does not depend on the world size says nothing about how it
        # was changed by hand for the multi-GPU run, so "none" is never read from code.

    # ------------------------------------------------------------------ ordering
    def _sort_fault(self, fact: str, fault: Value) -> None:
        mine = [f for f in self.findings if f.fact == fact]
        if not mine:
            return
        rest = [f for f in self.findings if f.fact != fact]
        faults = [f for f in mine if f.value == fault]
        others = [f for f in mine if f.value != fault]
        self.findings = rest + (faults if faults else others)


def function_constants(fn: ast.AST) -> dict[str, object]:
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


def mentions_world(node: ast.AST) -> bool:
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


def call_site(ev: Event) -> str:
    """Where the user wrote it: a forward inside ``model.module.some_method()`` is blamed on
    that call, not on ``self(x)`` inside the model class."""
    for c in ev.ctx:
        if isinstance(c, FuncCtx) and c.self_kind in (V.MODEL, V.DDP_MODULE) and c.call_where:
            return c.call_where
    return ev.where


# Import roots whose calls the scanner understands or that cannot touch training state.
KNOWN_HEADS = {
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


def cli_switched(e: Event) -> bool:
    """Under an ``if`` that a command-line value decides (``if args.sync_bn:``): whether it
    ran depends on the run's flags, which the scan does not know."""
    # A flag whose default is not read (the parser went through an opaque helper) too. A
    # flag that says the job runs distributed (``if args.distributed:``) is set in the job
    # being diagnosed (interp.branches): it does not switch.
    return any(
        isinstance(c, CondCtx)
        and c.job not in ("all", "none")
        and (V.ARGDEFAULT in c.taint or "cli" in c.taint)
        for c in e.ctx
    )


def switched(e: Event) -> bool:
    """Under an ``if`` the run decides: a command-line value, or a test the scan could not
    evaluate (a config value, a helper's result). Tests on the rank or world size are not
    switches: both sides run in the same job."""
    return cli_switched(e) or any(
        isinstance(c, CondCtx) and c.const is None and not is_rank_cond(c) for c in e.ctx
    )


def may_not_run(
    rc: RuleContext,
    e: Event,
    start: int = 0,
    stop: int | None = None,
    guards: frozenset[str] = frozenset(),
) -> bool:
    """Under an ``if`` the scan cannot decide, or one a command-line option decides. Tests on
    the rank or world size do not count (every rank of a multi-GPU job takes its side), nor
    the side of an ``if`` on which alone the job becomes distributed (``if args.distributed:``:
    the job being diagnosed takes it), nor tests on what a loop around
    them changes (``if epoch == 2:`` runs, at some epoch). ``start``/``stop``: only the part
    of ``e.ctx`` at those positions is judged, as code that runs where ``e.ctx[:start]`` runs
    (another event's path up to there). ``guards``: names a test may check without counting
    (``if sampler is not None: sampler.set_epoch(epoch)`` runs whenever the sampler does)."""
    sides = _distributed_sides(rc)
    runs = _run_loops(rc)
    varying: set[str] = set()
    ctx = e.ctx if stop is None else e.ctx[:stop]
    for i, c in enumerate(ctx):
        if isinstance(c, LoopCtx):
            if i >= start and id(c.node) not in runs:
                varying |= _loop_names(c.node)
            continue
        if not isinstance(c, CondCtx) or is_rank_cond(c) or V.WORLD in c.taint or i < start:
            continue
        if c.runs == "all" or (id(c.node), c.branch) in sides:
            continue
        if not (c.const is None or V.ARGDEFAULT in c.taint or "cli" in c.taint):
            continue
        raw = getattr(c.node, "test", c.test)
        if guards and (free_names(raw) | free_names(c.test)) & guards:
            continue
        if (free_names(c.test) | free_names(raw)) & varying and not _option_conjunct(
            raw, c.branch, varying
        ):
            continue
        return True
    return False


def _option_conjunct(test: ast.expr, branch: bool, varying: set[str]) -> bool:
    """``if epoch > 0 and cfg.chunked:`` taken: the loop's own part holds at some pass, but
    the other part is an option the run decides, so the body may never run."""
    if not (branch and isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And)):
        return False
    for part in test.values:
        names = free_names(part) | {n.attr for n in ast.walk(part) if isinstance(n, ast.Attribute)}
        if names & varying or {n.lower() for n in names} & (_RANK_NAMES | _WORLD_NAMES):
            continue
        return True
    return False


def _run_loops(rc: RuleContext) -> set[int]:
    """The loops around the job's own set-up (its process group, its model wrap): each pass
    is another run (``for path in args.cfg_files: cfg = load_config(path); launch(cfg)``),
    not another epoch or step, so what they rebind is the run's configuration, and a test
    on it is an option, not a test on what changes as training goes on."""
    out: set[int] = set()
    for e in rc.a.events:
        if e.kind != "call":
            continue
        if apis.last(e.name) == "init_process_group" or (
            e.result is not None and e.result.kind in (V.DDP, V.FSDP)
        ):
            out.update(id(c.node) for c in e.ctx if isinstance(c, LoopCtx))
    return out


def _distributed_sides(rc: RuleContext) -> set[tuple[int, bool]]:
    """The sides of the ``if`` statements on which the job becomes distributed (a process
    group set up, a model wrapped), when it becomes distributed only there: the job being
    diagnosed runs distributed, so it takes them (imagenet's ``elif args.distributed:`` and
    ``if args.gpu is not None:``). Where a set-up also runs outside any ``if`` (DINO wraps its
    student unconditionally), no ``if`` decides distributed-ness (DINO's teacher wrap under
    ``if has_batchnorms(student):`` is one side of a real switch)."""
    out: set[tuple[int, bool]] = set()
    for e in rc.a.events:
        if e.kind != "call":
            continue
        sets_up = apis.last(e.name) == "init_process_group" or (
            e.result is not None and e.result.kind in (V.DDP, V.FSDP)
        )
        if not sets_up:
            continue
        sides = {
            (id(c.node), c.branch)
            for c in e.ctx
            if isinstance(c, CondCtx) and not is_rank_cond(c) and V.WORLD not in c.taint
        }
        if not sides:
            return set()
        out |= sides
    return out


def _loop_names(node: ast.AST) -> set[str]:
    """Names a loop rebinds on each pass: its target and what its body assigns."""
    out: set[str] = set()
    parts = [node.target] if isinstance(node, (ast.For, ast.AsyncFor)) else []
    parts += list(getattr(node, "body", []))
    for part in parts:
        for sub in ast.walk(part):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                out.add(sub.id)
    return out


def default_runs(e: Event) -> bool:
    """Every option-decided ``if`` around the event takes its side with the defaults."""
    return all(
        c.const is not None and bool(c.const) == c.branch
        for c in e.ctx
        if isinstance(c, CondCtx) and (V.ARGDEFAULT in c.taint or "cli" in c.taint)
    )


def kw_node(node: ast.AST | None, name: str) -> ast.expr | None:
    if not isinstance(node, ast.Call):
        return None
    for k in node.keywords:
        if k.arg == name:
            return k.value
    return None


def names_the_count(t: str, value: object, accum: Accum) -> bool:
    """A divisor (as written, and its value when constant) that is the accumulation count."""
    return (
        (accum.k is not None and value == accum.k)
        or (accum.k_node is not None and t == text(accum.k_node))
        or any(w in t.lower() for w in ("accum", "grad_acc", "gradient_acc", "micro"))
    )


__all__ = ["Finding", "RuleContext", "eval_at", "exclusive"]
