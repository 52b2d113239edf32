"""Reading and parsing the scanned script and the sibling modules it imports.

Nothing here imports or executes the scanned code: files are read as bytes, decoded and
handed to :func:`ast.parse`. Problems with the main script are :class:`InputError` (exit 2);
problems with a sibling module only produce a warning, because the main script is still
worth scanning.
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from ddpadvisor.errors import InputError

# Far above any real training script; protects the scanner from being fed a data file.
MAX_BYTES = 20 * 1024 * 1024
# A training script imports a handful of local modules (model.py, data.py, utils.py); a script
# that sits inside a big package would otherwise pull in the whole package.
MAX_SIBLINGS = 16
MAX_SIBLING_BYTES = 1536 * 1024


def dotted(node: ast.AST) -> str:
    """``torch.nn.utils.clip_grad_norm_`` for an attribute chain; "" for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


_INTERESTING_ATTRS = {"backward", "train", "step"}
_INTERESTING_NAMES = {"DDP", "DistributedDataParallel"}


@dataclass
class Index:
    """What the rules look up across a whole file, collected in one pass over the tree."""

    calls: list[tuple[ast.Call, str, ast.ClassDef | None]] = field(default_factory=list)
    keywords: list[ast.keyword] = field(default_factory=list)
    attrs: list[ast.Attribute] = field(default_factory=list)
    strings: list[ast.Constant] = field(default_factory=list)
    neg100: list[ast.UnaryOp] = field(default_factory=list)
    interesting_funcs: set[int] = field(default_factory=set)  # id() of FunctionDefs


def build_index(tree: ast.Module) -> Index:
    index = Index()
    stack: list[tuple[ast.AST, tuple[ast.AST, ...], ast.ClassDef | None]] = [(tree, (), None)]
    AST = ast.AST
    while stack:
        node, funcs, cls = stack.pop()
        kind = type(node)
        if isinstance(node, ast.Call):
            index.calls.append((node, dotted(node.func), cls))
        elif isinstance(node, ast.keyword):
            index.keywords.append(node)
        elif isinstance(node, ast.Attribute):
            index.attrs.append(node)
            if node.attr in _INTERESTING_ATTRS:
                index.interesting_funcs.update(id(f) for f in funcs)
        elif isinstance(node, ast.Name):
            if node.id in _INTERESTING_NAMES:
                index.interesting_funcs.update(id(f) for f in funcs)
        elif isinstance(node, ast.Constant):
            if isinstance(node.value, str) and len(node.value) < 40:
                index.strings.append(node)
        elif isinstance(node, ast.UnaryOp):
            operand = node.operand
            if (
                isinstance(node.op, ast.USub)
                and isinstance(operand, ast.Constant)
                and operand.value == 100
            ):
                index.neg100.append(node)
        elif kind in (ast.FunctionDef, ast.AsyncFunctionDef):
            funcs = (*funcs, node)
        elif isinstance(node, ast.ClassDef):
            cls = node
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, AST):
                        stack.append((item, funcs, cls))
            elif isinstance(value, AST):
                stack.append((value, funcs, cls))
    return index


@dataclass
class Module:
    """One parsed file: the script or a sibling module it imports."""

    name: str  # dotted module name as imported ("model", "utils.data"); "__main__" for the script
    path: Path
    label: str  # how locations are shown: "train.py", "utils/data.py"
    tree: ast.Module
    lines: int
    _index: Index | None = None

    @property
    def index(self) -> Index:
        if self._index is None:
            self._index = build_index(self.tree)
        return self._index


@dataclass
class SourceSet:
    """The script plus every sibling module that was resolved so far (loaded on demand)."""

    root: Path  # the script's folder: sibling imports resolve against it
    main: Module
    modules: dict[str, Module] = field(default_factory=dict)
    missing: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)
    sibling_bytes: int = 0

    def resolve(self, dotted: str) -> Module | None:
        """A sibling module for ``import dotted`` (``pkg/mod.py`` or ``pkg/mod/__init__.py``)."""
        if dotted in self.modules:
            return self.modules[dotted]
        if dotted in self.missing or not dotted:
            return None
        parts = dotted.split(".")
        candidates = [
            self.root.joinpath(*parts).with_suffix(".py"),
            self.root.joinpath(*parts, "__init__.py"),
        ]
        for candidate in candidates:
            if candidate.is_file():
                label = candidate.relative_to(self.root).as_posix()
                size = candidate.stat().st_size
                if (
                    len(self.modules) >= MAX_SIBLINGS
                    or self.sibling_bytes + size > MAX_SIBLING_BYTES
                ):
                    self.warnings.append(
                        f"{label}: not scanned (more local modules than a training script "
                        f"imports; read the first {len(self.modules)})"
                    )
                    break
                self.sibling_bytes += size
                try:
                    tree, text = parse_file(candidate, label)
                except InputError as exc:
                    self.warnings.append(f"{exc.one_line()} (imported module not scanned)")
                    break
                module = Module(dotted, candidate, label, tree, text.count("\n") + 1)
                self.modules[dotted] = module
                return module
        self.missing.add(dotted)
        return None


def read_text(path: Path, label: str) -> str:
    """The file's text: UTF-8, or the encoding its PEP 263 coding line declares."""
    if not path.exists():
        raise InputError("no such file", label)
    if path.is_dir():
        raise InputError("is a directory; pass the training script itself", label)
    if not path.is_file():
        raise InputError("not a regular file", label)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise InputError(
                f"file is {size // (1024 * 1024)} MiB; a training script is expected", label
            )
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", label) from None
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        head = b"\n".join(data.split(b"\n", 2)[:2])
        if b"coding" in head:
            raise InputError(f"bad encoding declaration: {exc.msg}", label, exc.lineno) from None
        encoding = "utf-8"  # undecodable first line: reported below with its position
    try:
        return data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        start = getattr(exc, "start", 0)
        line = data.count(b"\n", 0, start) + 1
        raise InputError(
            f"not a {encoding} text file (undecodable byte at offset {start}); "
            "is this a Python script?",
            label,
            line,
        ) from None


def parse_file(path: Path, label: str) -> tuple[ast.Module, str]:
    text = read_text(path, label)
    if "\x00" in text:
        raise InputError("contains NUL bytes; is this a Python script?", label)
    try:
        tree = ast.parse(text, filename=label, type_comments=False)
    except SyntaxError as exc:
        msg = exc.msg or "invalid syntax"
        raise InputError(f"syntax error: {msg}", label, exc.lineno) from None
    except (RecursionError, MemoryError):
        raise InputError("too deeply nested to parse", label) from None
    return tree, text


def load(path: Path) -> SourceSet:
    """Parse the script; sibling modules are parsed later, when an import names them."""
    label = path.name
    tree, text = parse_file(path, str(path))
    main = Module("__main__", path, label, tree, text.count("\n") + 1)
    return SourceSet(root=path.resolve().parent, main=main)


class ExcerptSources(SourceSet):
    """A code excerpt (pasted into a description): there is no folder, so no sibling module."""

    excerpt = True

    def resolve(self, dotted: str) -> Module | None:
        return None


def load_excerpt(code: str, label: str) -> ExcerptSources:
    """Parse an excerpt's text; raises :class:`InputError` when it is not Python."""
    try:
        tree = ast.parse(code, filename=label, type_comments=False)
    except SyntaxError as exc:
        raise InputError(
            f"syntax error: {exc.msg or 'invalid syntax'}", label, exc.lineno
        ) from None
    except (RecursionError, MemoryError, ValueError):
        raise InputError("cannot be parsed", label) from None
    main = Module("__main__", Path(label), label, tree, code.count("\n") + 1)
    return ExcerptSources(root=Path(label), main=main)
