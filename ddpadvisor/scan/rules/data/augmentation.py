from __future__ import annotations

import ast

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.analysis import text
from ddpadvisor.scan.interp.frames import ClassInfo, FuncRef
from ddpadvisor.scan.rules.base import RuleContext
from ddpadvisor.scan.rules.registry import not_in_excerpt, rule


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
            found = _draw_below(rc, info, fn, info.scope.module.label)
            if found is not None:
                where, via = found
                rc.emit(
                    "uses_random_augmentation",
                    True,
                    where,
                    f"random draws in {info.name}.{mname}{via} ({where})",
                )
                return
    loader = rc.training_loader()
    if loader is None or a.main_backward is None:
        return
    ds = rc.obj(loader.kwargs.get("dataset"))
    ds_info = rc._class_of(ds)
    if ds is not None and (apis.last(ds.canon) == "TensorDataset" or ds_info is not None):
        drawn = _draws_in_model_forward(rc)
        if drawn is not None:
            rc.warn(
                f"{drawn}: the trained model's forward draws random positions or values "
                "(a random crop or window of its inputs, a mask); whether they augment the "
                "data is not decided (uses_random_augmentation)"
            )
            return
        rc.emit("uses_random_augmentation", False, ds.where, "dataset draws no random augmentation")


_DRAW_HEADS = ("torch", "np", "numpy", "random", "rng", "rc")
# Draws that only reorder the examples (a dataset that shuffles its own index, as a sampler
# would): the order of the data, not an augmentation of it.
_ORDER_DRAWS = {"shuffle", "permutation", "randperm"}


def _draw_below(
    rc: RuleContext, info: ClassInfo, fn: ast.AST, label: str
) -> tuple[str, str] | None:
    """A random draw (torch/numpy/random) in a dataset method, or in what it calls of the
    project's own, three calls deep: ``self._augment(...)`` and the module functions it
    uses (a video pipeline's ``random_crop`` drawing with ``np.random``). (where, via)."""
    functions: dict[str, list[FuncRef]] = {}
    for f in rc.walk.functions:
        functions.setdefault(f.name, []).append(f)
    todo: list[tuple[ast.AST, str, int, str]] = [(fn, label, 0, "")]
    seen: set[int] = set()
    while todo:
        node, where, depth, via = todo.pop(0)
        if id(node) in seen:
            continue
        seen.add(id(node))
        for sub in ast.walk(node):
            if not isinstance(sub, ast.Call):
                continue
            name = text(sub.func)
            last = apis.last(name)
            if (
                last in apis.RANDOM_CALLS
                and last not in _ORDER_DRAWS
                and name.split(".")[0] in _DRAW_HEADS
            ):
                return f"{where}:{sub.lineno}", via
            if depth >= 3:
                continue
            if isinstance(sub.func, ast.Attribute) and text(sub.func.value) == "self":
                found = info.find_method(sub.func.attr)
                if found is not None:
                    owner, method = found
                    todo.append((method, owner.scope.module.label, depth + 1, f" via {last}"))
                continue
            for f in functions.get(last, []):
                todo.append((f.node, f.scope.module.label, depth + 1, via or f" via {last}"))
    return None


# Uniform and integer draws (positions, windows, masks), not Gaussian noise: a forward that
# samples ``randn`` reparameterises a distribution rather than picking from its inputs.
_INDEX_DRAWS = {"rand", "randint", "randperm", "rand_like", "randint_like", "uniform", "choice"}
_RANDOM_HEADS = ("torch", "np", "numpy", "random")


def _draws_in_model_forward(rc: RuleContext) -> str | None:
    """Where the forward of a trained project model (or a project function it calls, one
    level down) draws uniform or integer random numbers."""
    functions: dict[str, list[FuncRef]] = {}
    for f in rc.walk.functions:
        functions.setdefault(f.name, []).append(f)
    seen: set[int] = set()
    for o in rc.a.objs(V.MODEL):
        info = rc._class_of(o)
        if info is None or o.wrapped_by is None:
            continue
        found = info.find_method("forward")
        if found is None:
            continue
        owner, fwd = found
        todo: list[tuple[ast.AST, str, int]] = [(fwd, owner.scope.module.label, 0)]
        while todo:
            fn, label, depth = todo.pop()
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            for sub in ast.walk(fn):
                if not isinstance(sub, ast.Call):
                    continue
                name = text(sub.func)
                last = apis.last(name)
                if last in _INDEX_DRAWS and name.split(".")[0] in _RANDOM_HEADS:
                    return f"{label}:{sub.lineno}"
                if depth < 1:
                    for f in functions.get(last, []):
                        todo.append((f.node, f.scope.module.label, depth + 1))
    return None
