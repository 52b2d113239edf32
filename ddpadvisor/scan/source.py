"""Reading and parsing the scanned script and the sibling modules it imports.

Nothing here imports or executes the scanned code: files are read as bytes, decoded and
handed to :func:`ast.parse`. Problems with the main script are :class:`InputError` (exit 2);
problems with a sibling module only produce a warning, because the main script is still
worth scanning.
"""

from __future__ import annotations

import ast
import io
import sys
import time
import tokenize
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from ddpadvisor.errors import InputError

# Far above any real training script; protects the scanner from being fed a data file.
MAX_BYTES = 20 * 1024 * 1024
# Modules are read only when an import names them (and, past the script, only when a name
# they bind is used), so a real package costs the files its training path touches. Measured
# on the tuned real-repository bench (bench/real_repos.py): 0 to 58 modules and up to 1.1 MiB,
# 99 modules for LLaMA-Factory's dispatcher over every training stage. The caps keep a script
# that sits inside a huge tree fast; what they stop is named in one warning.
MAX_SIBLINGS = 128
MAX_SIBLING_BYTES = 6 * 1024 * 1024
MAX_PARSE_SECONDS = 8.0
# How far up from the script the project root is looked for.
MAX_ROOT_DEPTH = 8
PROJECT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")
# Libraries whose calls the scan reads through its own views (library/): a copy of one in the
# repository (the framework's own examples, a vendored tree) is read through the view too, as
# are the modules Python has loaded before the script runs (a file named ``os.py`` beside the
# script does not replace them; other standard modules it does replace, as Python would).
LIBRARY_ROOTS = frozenset(
    {
        "torch", "torchvision", "torchaudio", "transformers", "accelerate", "deepspeed",
        "lightning", "pytorch_lightning", "lightning_fabric", "trl", "peft", "datasets",
        "numpy", "timm",
    }
)  # fmt: skip
PRELOADED = frozenset(sys.builtin_module_names) | {
    "abc", "codecs", "encodings", "genericpath", "io", "ntpath", "os", "posixpath", "site",
    "stat", "zipimport",
}  # fmt: skip


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
                and type(operand.value) is int  # an ignore index; -100.0 dB is not one
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
    # A package's ``__init__.py`` (or a namespace package's folder): its relative imports
    # resolve against itself, a plain module's against the package that holds it.
    is_package: bool = False
    # The script's own package when it sits inside one (``python -m pkg.train``); for other
    # modules their name says it.
    script_package: str = ""
    # A namespace package's folders (PEP 420): where its sub-modules are looked for.
    portions: tuple[Path, ...] = ()

    @property
    def package(self) -> str:
        """What a relative import inside this module resolves against."""
        if self.name == "__main__":
            return self.script_package
        return self.name if self.is_package else self.name.rpartition(".")[0]

    @property
    def index(self) -> Index:
        if self._index is None:
            self._index = build_index(self.tree)
        return self._index


@dataclass
class SourceSet:
    """The script plus every module of the project that was resolved so far (loaded on demand).

    Imports resolve as Python resolves them for ``python path/to/train.py`` or ``python -m
    pkg.train`` run from the repository root, with the project installed: the script's folder
    first, then the folder above the package that holds the script, the project root and its
    ``src/`` folder (:attr:`paths`). A name found in none of them is a library's, never a file
    outside the project (site-packages, the standard library)."""

    root: Path  # the script's folder
    main: Module
    modules: dict[str, Module] = field(default_factory=dict)
    missing: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    sibling_bytes: int = 0
    paths: list[Path] = field(default_factory=list)
    project: Path | None = None
    parse_seconds: float = 0.0
    # Modules found but not read, by the reason: named once, in one warning each.
    skipped: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.paths:
            self.paths = [self.root]

    @property
    def warnings(self) -> list[str]:
        out = list(self.errors)
        for reason, labels in self.skipped.items():
            shown = ", ".join(labels[:6]) + (
                f" and {len(labels) - 6} more" if len(labels) > 6 else ""
            )
            out.append(f"{shown}: not read ({reason}); what that code does is unknown to the scan")
        return out

    def resolve(self, dotted: str) -> Module | None:
        """The project's module for ``import dotted`` (a ``.py`` file, a package's
        ``__init__.py`` or a namespace package's folder), or None for a library's."""
        if dotted in self.modules:
            return self.modules[dotted]
        if dotted in self.missing or not dotted:
            return None
        parts = dotted.split(".")
        if parts[0] in PRELOADED or (
            parts[0] in LIBRARY_ROOTS
            # a single file of that name beside the script is what Python imports (the
            # script's folder comes first on sys.path): VideoMAE's own datasets.py
            and not (len(parts) == 1 and (self.root / f"{parts[0]}.py").is_file())
        ):
            self.missing.add(dotted)
            return None
        module: Module | None = None
        if len(parts) == 1:
            found = self._find(parts[0], self.paths)
        else:
            parent = self.resolve(".".join(parts[:-1]))
            found = None
            if parent is not None and parent.is_package:
                found = self._find(parts[-1], _folders(parent))
        if found is not None:
            module = self._load(dotted, *found)
        if module is None:
            self.missing.add(dotted)
            return None
        self.modules[dotted] = module
        return module

    @staticmethod
    def _find(name: str, folders: list[Path]) -> tuple[Path, bool, tuple[Path, ...]] | None:
        """(file, is_package, namespace portions) for ``name`` in the first folder that holds
        it as a module or a regular package; a folder without ``__init__.py`` is a namespace
        package only when no folder holds a module of that name (as in Python 3)."""
        portions: list[Path] = []
        for folder in folders:
            pkg = folder / name
            if (pkg / "__init__.py").is_file():
                return pkg / "__init__.py", True, ()
            if (folder / f"{name}.py").is_file():
                return folder / f"{name}.py", False, ()
            if pkg.is_dir() and name.isidentifier() and _has_python(pkg):
                portions.append(pkg)
        if portions:
            return portions[0], True, tuple(portions)
        return None

    def _label(self, path: Path) -> str:
        """The path from the script's folder, else from the innermost folder of the search
        path (or the project root) that holds it: ``detlib/engine.py``, ``src/pkg/x.py``."""
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            pass
        bases = [p for p in [*self.paths, self.project] if p is not None and p.name != "src"]
        for base in sorted(bases, key=lambda p: len(p.parts), reverse=True):
            try:
                return path.relative_to(base).as_posix()
            except ValueError:
                continue
        return path.as_posix()

    def _load(
        self, dotted: str, path: Path, is_package: bool, portions: tuple[Path, ...]
    ) -> Module | None:
        if portions:  # a namespace package: no code of its own
            label = self._label(path) + "/"
            return Module(dotted, path, label, ast.Module(body=[], type_ignores=[]), 0, None,
                          True, "", portions)  # fmt: skip
        label = self._label(path)
        size = path.stat().st_size
        if len(self.modules) >= MAX_SIBLINGS:
            self.skip(f"more than {MAX_SIBLINGS} modules of the project", label)
            return None
        if self.sibling_bytes + size > MAX_SIBLING_BYTES:
            self.skip(f"more than {MAX_SIBLING_BYTES // (1024 * 1024)} MiB of the project", label)
            return None
        if self.parse_seconds > MAX_PARSE_SECONDS:
            self.skip(f"parsing took over {MAX_PARSE_SECONDS:.0f} s", label)
            return None
        self.sibling_bytes += size
        start = time.monotonic()
        try:
            tree, text = parse_file(path, label)
        except InputError as exc:
            self.errors.append(f"{exc.one_line()} (imported module not scanned)")
            return None
        finally:
            self.parse_seconds += time.monotonic() - start
        return Module(dotted, path, label, tree, text.count("\n") + 1, None, is_package)

    def skip(self, reason: str, label: str) -> None:
        labels = self.skipped.setdefault(reason, [])
        if label not in labels:
            labels.append(label)


def _folders(package: Module) -> list[Path]:
    return list(package.portions) if package.portions else [package.path.parent]


def _has_python(folder: Path, depth: int = 3) -> bool:
    """Python code in the folder or the folders below it (a few levels): a namespace package
    (``dschat/utils/x.py`` with no ``__init__.py`` anywhere), not a folder of run outputs that
    shares a library's name (``wandb/``)."""
    try:
        entries = list(folder.iterdir())[:200]
    except OSError:
        return False
    if any(p.suffix == ".py" for p in entries):
        return True
    return depth > 1 and any(
        p.is_dir() and p.name.isidentifier() and _has_python(p, depth - 1) for p in entries
    )


def _is_root(folder: Path) -> bool:
    return any((folder / marker).exists() for marker in PROJECT_MARKERS)


def search_paths(script: Path) -> tuple[list[Path], Path | None, str]:
    """Where the script's imports resolve (its own folder first), the project root, and the
    dotted package the script sits in ("" when its folder is no package). The package chain
    never climbs above the project root (a repository whose root holds an ``__init__.py``
    would otherwise put its parent folder, and every project beside it, on the path)."""
    folder = script.parent
    project: Path | None = None
    cur = folder
    home = Path.home()
    for _ in range(MAX_ROOT_DEPTH):
        if cur == home or cur.parent == cur:
            break
        if _is_root(cur):
            project = cur
            break
        cur = cur.parent
    base = folder
    package: list[str] = []
    while (
        (base / "__init__.py").is_file()
        and base != project
        and base.parent != base
        and len(package) < 16
    ):
        package.insert(0, base.name)
        base = base.parent
    if project is None and package:
        project = base  # the folder above the topmost package
    paths = [folder]
    if package:
        paths.append(base)
    if project is not None:
        paths += [project, project / "src"]
    out: list[Path] = []
    for p in paths:
        if p.is_dir() and p not in out:
            out.append(p)
    return out, project, ".".join(package) if all(n.isidentifier() for n in package) else ""


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


def quiet_parse(text: str, label: str) -> ast.Module:
    """``ast.parse`` without the compiler's warnings about the scanned code (an invalid escape
    in someone's string literal): they would print the file's own text on stderr, and they
    say nothing about DDP."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text, filename=label, type_comments=False)


def parse_file(path: Path, label: str) -> tuple[ast.Module, str]:
    text = read_text(path, label)
    if "\x00" in text:
        raise InputError("contains NUL bytes; is this a Python script?", label)
    try:
        tree = quiet_parse(text, label)
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
    resolved = path.resolve()
    paths, project, package = search_paths(resolved)
    main = Module("__main__", path, label, tree, text.count("\n") + 1, script_package=package)
    return SourceSet(root=resolved.parent, main=main, paths=paths, project=project)


class ExcerptSources(SourceSet):
    """A code excerpt (pasted into a description): there is no folder, so no sibling module."""

    excerpt = True

    def resolve(self, dotted: str) -> Module | None:
        return None


def load_excerpt(code: str, label: str) -> ExcerptSources:
    """Parse an excerpt's text; raises :class:`InputError` when it is not Python."""
    try:
        tree = quiet_parse(code, label)
    except SyntaxError as exc:
        raise InputError(
            f"syntax error: {exc.msg or 'invalid syntax'}", label, exc.lineno
        ) from None
    except (RecursionError, MemoryError, ValueError):
        raise InputError("cannot be parsed", label) from None
    main = Module("__main__", Path(label), label, tree, code.count("\n") + 1)
    return ExcerptSources(root=Path(label), main=main)
