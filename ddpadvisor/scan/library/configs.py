"""Config files a script reads its training arguments from, when the scan can find them.

``HfArgumentParser.parse_json_file`` / ``parse_yaml_file`` fill the dataclasses from a file:
the keys it sets are the run's values and every other field keeps its default
(https://github.com/huggingface/transformers/blob/main/src/transformers/hf_argparser.py).
The scan reads such a file when its path is a constant or is built next to the script
(``os.path.join(os.path.dirname(__file__), "args.json")``, ``Path(__file__).parent / ...``);
a path from the command line leaves the values unknown.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from ddpadvisor.errors import InputError
from ddpadvisor.scan.interp.frames import Frame
from ddpadvisor.scan.values import Val
from ddpadvisor.yamlio import load_mapping_file

MAX_DEPTH = 8
CONFIG_BYTES = 1 << 20


def config_path(
    val: Val | None, expr: ast.expr | None, frame: Frame, root: Path, script: Path
) -> Path | None:
    """The existing file a config argument names, or None when the scan cannot tell."""
    found: Path | None = None
    if val is not None and val.known and isinstance(val.const, str):
        found = Path(val.const)
    elif expr is not None:
        found = _path_of(expr, frame, script.resolve(), 0)
    if found is None:
        return None
    if not found.is_absolute():
        found = root / found
    return found if found.is_file() else None


def read_config(path: Path) -> tuple[dict[str, Any] | None, str]:
    """The mapping a JSON or YAML config holds, or None and why not."""
    try:
        if path.stat().st_size > CONFIG_BYTES:
            return None, "config too large to read"
        data = load_mapping_file(path)
    except (InputError, OSError) as exc:
        return None, str(exc)
    if not isinstance(data, dict):
        return None, "config is not a mapping"
    return dict(data), ""


def _path_of(node: ast.expr, frame: Frame, script: Path, depth: int) -> Path | None:
    if depth > MAX_DEPTH:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return Path(node.value)
    if isinstance(node, ast.Name):
        if node.id == "__file__":
            return script
        bound = _bound(node.id, frame)
        return _path_of(bound, frame, script, depth + 1) if bound is not None else None
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        inner = _path_of(node.value, frame, script, depth + 1)
        return inner.parent if inner is not None else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        left = _path_of(node.left, frame, script, depth + 1)
        right = _path_of(node.right, frame, script, depth + 1)
        return left / right if left is not None and right is not None else None
    if isinstance(node, ast.Call):
        name = ast.unparse(node.func)
        parts = [_path_of(a, frame, script, depth + 1) for a in node.args]
        if any(p is None for p in parts) or node.keywords:
            return None
        paths = [p for p in parts if p is not None]
        if name in ("os.path.join", "path.join", "join") and paths:
            out = paths[0]
            for p in paths[1:]:
                out = out / p
            return out
        if len(paths) == 1:
            (p,) = paths
            if name in ("os.path.dirname", "path.dirname", "dirname"):
                return p.parent
            if name in ("os.path.abspath", "os.path.realpath", "Path", "pathlib.Path"):
                return p
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("resolve", "absolute"):
            return _path_of(node.func.value, frame, script, depth + 1)
    return None


def _bound(name: str, frame: Frame) -> ast.expr | None:
    f: Frame | None = frame
    while f is not None:
        if name in f.exprs:
            return f.exprs[name]
        f = f.parent
    return frame.scope.exprs.get(name)
