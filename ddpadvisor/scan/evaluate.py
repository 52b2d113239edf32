"""A tiny, safe evaluator for the arithmetic of training loops.

It answers questions such as "for which micro-step index is ``(step + 1) % 4 != 0`` true?"
by evaluating the (already name-expanded) condition with the index bound to small integers.
Only literals, arithmetic, comparisons, boolean operators and a few pure builtins are
understood; anything else raises :class:`Undecidable`. Nothing is ever executed.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any


class Undecidable(Exception):
    """The expression needs something the scanner does not know."""


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_CMPOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_FUNCS: dict[str, Callable[..., Any]] = {
    "int": int,
    "float": float,
    "bool": bool,
    "abs": abs,
    "min": min,
    "max": max,
    "round": round,
    "sqrt": math.sqrt,
    "ceil": math.ceil,
    "floor": math.floor,
}
_MAX_POW = 64
# Integers the scanner computes stay this small: a training loop's arithmetic never needs more,
# and ``((10**64)**64)**64`` in a script would otherwise cost seconds and megabytes per step.
MAX_BITS = 4096


def evaluate(node: ast.AST, env: Mapping[str, Any] | None = None) -> Any:
    env = env or {}
    try:
        return _eval(node, env)
    except Undecidable:
        raise
    except (ArithmeticError, TypeError, ValueError, OverflowError):
        raise Undecidable("arithmetic error") from None


def _bits(value: int | float) -> int:
    return abs(int(value)).bit_length() if isinstance(value, int) else 0


def _too_big(op: ast.operator, left: int | float, right: int | float) -> bool:
    """Whether an integer result would pass :data:`MAX_BITS` (judged before computing it)."""
    if not isinstance(left, int) or not isinstance(right, int):
        return False  # a float overflows with an error instead
    if isinstance(op, ast.Pow):
        return right > 0 and _bits(left) > 1 and _bits(left) * right > MAX_BITS
    if isinstance(op, ast.Mult):
        return _bits(left) + _bits(right) > MAX_BITS
    return max(_bits(left), _bits(right)) >= MAX_BITS  # + and - add at most one bit


def _eval(node: ast.AST, env: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, int) and _bits(node.value) > MAX_BITS:
            raise Undecidable("huge number")
        if isinstance(node.value, (int, float, str, bool)) or node.value is None:
            return node.value
        raise Undecidable("constant type")
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        if node.id in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[node.id]
        raise Undecidable(node.id)
    if isinstance(node, ast.BinOp):
        fn = _BINOPS.get(type(node.op))
        if fn is None:
            raise Undecidable("operator")
        left, right = _eval(node.left, env), _eval(node.right, env)
        if isinstance(node.op, ast.Pow) and isinstance(right, (int, float)) and right > _MAX_POW:
            raise Undecidable("huge power")
        if isinstance(left, str) or isinstance(right, str):
            if isinstance(node.op, ast.Add) and isinstance(left, str) and isinstance(right, str):
                return left + right
            raise Undecidable("string arithmetic")
        if not isinstance(left, (int, float)) or not isinstance(right, (int, float)):
            raise Undecidable("arithmetic on a sequence")  # (0,) * 10**9 is not computed
        if _too_big(node.op, left, right):
            raise Undecidable("huge number")
        return fn(left, right)
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, env)
        if isinstance(node.op, ast.Not):
            return not value
        if isinstance(node.op, ast.USub):
            return -value
        if isinstance(node.op, ast.UAdd):
            return +value
        raise Undecidable("unary operator")
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            result: Any = True
            for v in node.values:
                result = _eval(v, env)
                if not result:
                    return result
            return result
        result = False
        for v in node.values:
            result = _eval(v, env)
            if result:
                return result
        return result
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        for op, comp in zip(node.ops, node.comparators):
            right = _eval(comp, env)
            fn = _CMPOPS.get(type(op))
            if fn is None:
                raise Undecidable("comparison")
            if not fn(left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _eval(node.body, env) if _eval(node.test, env) else _eval(node.orelse, env)
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_eval(e, env) for e in node.elts)
    if isinstance(node, ast.Call) and not node.keywords:
        name = None
        if isinstance(node.func, ast.Name):
            name = node.func.id
        elif (
            isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "math"
        ):
            name = node.func.attr
        fn = _FUNCS.get(name or "")
        if fn is None:
            raise Undecidable("call")
        return fn(*(_eval(a, env) for a in node.args))
    raise Undecidable(type(node).__name__)


def free_names(node: ast.AST) -> set[str]:
    """Names an expression reads (minus the function names of understood calls)."""
    out: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id not in ("True", "False", "None"):
            out.add(sub.id)
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
            out.discard(sub.func.id)
    return out


def truth_table(node: ast.AST, var: str, values: range) -> list[bool] | None:
    """The condition's truth for each value of ``var``; None when it needs anything else."""
    if free_names(node) - {var}:
        return None
    out = []
    for i in values:
        try:
            out.append(bool(evaluate(node, {var: i})))
        except Undecidable:
            return None
    return out
