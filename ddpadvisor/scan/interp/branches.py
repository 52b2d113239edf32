"""What a branch condition means in the job being diagnosed, which runs on several ranks.

Most conditions are alternatives the scan cannot decide (a flag, a config value). A few say
which side runs in a multi-rank job, and then the scan does not have to guess:

- ``ALL``: the test holds on every rank of a multi-rank job. The world size compared with 1
  (``world_size > 1``, ``dist.get_world_size() != 1``), a distributed-mode flag or check
  (``args.distributed``, ``dist.is_initialized()``, ``is_dist_avail_and_initialized()``,
  ``local_rank != -1`` in the ``torch.distributed.launch`` convention), ``hasattr(model,
  "module")`` or ``isinstance(model, DDP)`` on a model the scan knows is wrapped, and any test
  the script itself used to choose its distributed set-up (``if cfg.ddp:`` around the DDP wrap
  or ``init_process_group``; see ``Statements.walk_if``);
- ``NONE``: the test holds on no rank of a multi-rank job (``world_size == 1``, ``not
  args.distributed``, ``local_rank == -1``): that side is the single-process path;
- ``SOME``: the test holds on some ranks and not on others (``rank == 0``,
  ``is_main_process()``, ``accelerator.is_main_process``): both sides run in the job, on
  different ranks;
- ``None``: anything else; both sides are alternatives.

``not``, ``and`` and ``or`` combine these as three-valued logic (``ALL and x`` is unknown;
``NONE and x`` is ``NONE``; ``SOME and x`` is ``SOME``: it holds on a subset of the ranks at
most). The number of GPUs on a node (``torch.cuda.device_count()``,
``n_gpu``) is not the world size: the ``torch.distributed.launch``-era scripts set ``n_gpu =
1`` under DDP and use ``n_gpu > 1`` for ``DataParallel``, so those tests stay alternatives.
Names (``world_size``, ``distributed``) are hints the scan reads as the script's own
vocabulary; where a value's origin is known (``WORLD_SIZE`` from the environment, a getter of
the world size) that decides.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.interp.frames import _MAIN_PROCESS_NAMES, _RANK_NAMES, _WORLD_ENV
from ddpadvisor.scan.values import Val

ALL = "all"
NONE = "none"
SOME = "some"

# World-size names that count processes (not GPUs on one node).
_WORLD_SIZE_NAMES = {"world_size", "ddp_world_size", "num_processes", "num_replicas", "nprocs"}
_WORLD_SIZE_GETTER = re.compile(
    r"_?(?:get_)?(?:(?:data_parallel|dp|ddp)_(?:group_|world_)?|world_)size"
)
_GPU_WORDS = ("gpu", "device_count", "cuda")
# Flags and checks that hold exactly when the job runs distributed.
_DIST_FLAGS = {
    "distributed",
    "is_distributed",
    "use_distributed",
    "ddp",
    "use_ddp",
    "is_ddp",
    "ddp_enabled",
    "dist_enabled",
}
_DIST_CHECKS = re.compile(
    r"_?(?:is_)?(?:dist|distributed|ddp)_(?:avail_and_)?(?:initialized|available_and_initialized|enabled|on)"
    r"|_?is_(?:dist|distributed|ddp)"
)
_INIT_CHECKS = {"torch.distributed.is_initialized"}
_LAUNCH_CHECKS = {"is_torchelastic_launched"}


def negate(truth: str | None) -> str | None:
    return {ALL: NONE, NONE: ALL}.get(truth or "", truth)


def side(truth: str | None, branch: bool) -> str | None:
    """Whether the side ``branch`` of a test with this meaning runs in the multi-rank job."""
    return truth if branch else negate(truth)


def _names(node: ast.AST) -> list[str]:
    out: list[str] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            out.append(sub.id)
        elif isinstance(sub, ast.Attribute):
            out.append(sub.attr)
    return out


def _int_const(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) is int
    ):
        return -node.operand.value
    return None


def learned_key(test: ast.expr, expanded: ast.expr) -> str:
    """The key a test is learned under: its expanded form, unless that is a bare constant
    (two different options that both default to False are not the same test)."""
    return ast.dump(test if isinstance(expanded, ast.Constant) else expanded)


class Classifier:
    """Reads a test in the context the walker has for it.

    ``value_of`` evaluates a name or attribute without recording events (the walker's
    ``eval_pure``); ``learned`` maps a test (``ast.dump`` of its expanded form) the script
    used to choose its distributed set-up to whether it holds in the distributed job;
    ``expand`` replaces names with what they were assigned, as conditions are stored;
    ``set_up`` says whether the walk has met the process group's set-up yet: a check of
    state such as ``dist.is_initialized()`` holds only after it (``if not
    dist.is_initialized(): dist.init_process_group()`` runs on every rank)."""

    def __init__(
        self,
        value_of: Callable[[ast.expr], Val],
        learned: dict[str, bool],
        expand: Callable[[ast.expr], ast.expr],
        set_up: Callable[[], bool],
    ) -> None:
        self.value_of = value_of
        self.learned = learned
        self.expand = expand
        self.set_up = set_up

    def truth(self, test: ast.expr, depth: int = 0) -> str | None:
        if depth > 8:
            return None
        key = learned_key(test, self.expand(test))
        if key in self.learned:
            return ALL if self.learned[key] else NONE
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return negate(self.truth(test.operand, depth + 1))
        if isinstance(test, ast.BoolOp):
            parts = [self.truth(v, depth + 1) for v in test.values]
            if isinstance(test.op, ast.And):
                if NONE in parts:
                    return NONE
                if SOME in parts:
                    # true on a subset of the ranks at most (``ckpt is not None and
                    # is_main_process()``): never on every rank because of the others
                    return SOME
                if None in parts:
                    return None
                return ALL
            if ALL in parts:
                return ALL
            if None in parts:
                return None
            return NONE if all(p == NONE for p in parts) else SOME
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            return self._compare(test.left, test.ops[0], test.comparators[0])
        if isinstance(test, ast.Call):
            return self._call(test)
        if isinstance(test, (ast.Name, ast.Attribute)):
            name = test.id if isinstance(test, ast.Name) else test.attr
            if name in _MAIN_PROCESS_NAMES:
                return SOME
            if name.lower() in _DIST_FLAGS:
                return ALL
            val = self.value_of(test)
            if val.known and not isinstance(val.const, bool):
                return None
            if V.RANK in val.taint:
                return SOME
        return None

    def _call(self, call: ast.Call) -> str | None:
        func = call.func
        name = (
            func.id
            if isinstance(func, ast.Name)
            else func.attr
            if isinstance(func, ast.Attribute)
            else ""
        )
        if name in _MAIN_PROCESS_NAMES:
            return SOME
        if name in ("hasattr", "isinstance") and len(call.args) == 2:
            obj = self.value_of(call.args[0])
            what = call.args[1]
            wrapped = obj.kind in (V.DDP, V.FSDP)
            if name == "hasattr":
                if isinstance(what, ast.Constant) and what.value == "module" and wrapped:
                    return ALL
                return None
            texts = _names(what)
            if wrapped and any(t in ("DistributedDataParallel", "DDP") for t in texts):
                return ALL
            return None
        canon = ""
        if isinstance(func, ast.Attribute):
            base = self.value_of(func.value)
            if base.kind in ("symbol", "module") and base.canon:
                canon = f"{base.canon}.{func.attr}"
        if name in _LAUNCH_CHECKS:
            return ALL
        if (
            canon in _INIT_CHECKS
            or (name == "is_initialized" and "dist" in ast.unparse(func))
            or _DIST_CHECKS.fullmatch(name)
        ):
            return ALL if self.set_up() else None
        return None

    def _compare(self, left: ast.expr, op: ast.cmpop, right: ast.expr) -> str | None:
        k = _int_const(right)
        var = left
        if k is None:
            k, var = _int_const(left), right
            op = _FLIP.get(type(op), op)
        if k is None:
            if isinstance(op, (ast.In, ast.NotIn)) and self._is_rank(left):
                return SOME
            return None
        if self._is_world(var):
            return _world_truth(op, k)
        if self._is_rank(var):
            if k == -1 and isinstance(op, (ast.Eq, ast.NotEq)):
                # torch.distributed.launch's convention: local_rank -1 means no DDP
                return NONE if isinstance(op, ast.Eq) else ALL
            return SOME
        return None

    def _is_world(self, node: ast.expr) -> bool:
        text = ast.unparse(node).lower()
        if any(w in text for w in _GPU_WORDS):
            return False
        for sub in ast.walk(node):
            if isinstance(sub, ast.Constant) and sub.value in _WORLD_ENV:
                return True
        last = apis.last(text.split("(")[0]) if text else ""
        if last in _WORLD_SIZE_NAMES or _WORLD_SIZE_GETTER.fullmatch(last):
            return True
        if isinstance(node, (ast.Name, ast.Attribute)):
            val = self.value_of(node)
            return V.WORLD in val.taint and V.RANK not in val.taint and not val.known
        return False

    def _is_rank(self, node: ast.expr) -> bool:
        names = _names(node)
        if any(
            n in _RANK_NAMES or n in ("get_rank", "process_index", "global_rank") for n in names
        ):
            return True
        if isinstance(node, (ast.Name, ast.Attribute)):
            return V.RANK in self.value_of(node).taint
        return False


_FLIP: dict[type, ast.cmpop] = {
    ast.Lt: ast.Gt(),
    ast.Gt: ast.Lt(),
    ast.LtE: ast.GtE(),
    ast.GtE: ast.LtE(),
}


def _world_truth(op: ast.cmpop, k: int) -> str | None:
    """``world_size <op> k`` in a job of two or more ranks: ALL, NONE or undecided."""
    if isinstance(op, ast.Gt):
        return ALL if k <= 1 else None
    if isinstance(op, ast.GtE):
        return ALL if k <= 2 else None
    if isinstance(op, ast.NotEq):
        return ALL if k == 1 else None
    if isinstance(op, ast.Eq):
        return NONE if k == 1 else None
    if isinstance(op, ast.Lt):
        return NONE if k <= 2 else None
    if isinstance(op, ast.LtE):
        return NONE if k <= 1 else None
    return None
