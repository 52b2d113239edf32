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


@dataclass
class Module:
    """One parsed file: the script or a sibling module it imports."""

    name: str  # dotted module name as imported ("model", "utils.data"); "__main__" for the script
    path: Path
    label: str  # how locations are shown: "train.py", "utils/data.py"
    tree: ast.Module
    lines: int


@dataclass
class SourceSet:
    """The script plus every sibling module that was resolved so far (loaded on demand)."""

    root: Path  # the script's folder: sibling imports resolve against it
    main: Module
    modules: dict[str, Module] = field(default_factory=dict)
    missing: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)

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
        raise InputError(f"bad encoding declaration: {exc.msg}", label, exc.lineno) from None
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
