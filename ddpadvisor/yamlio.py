"""Safe YAML/JSON reading that remembers where every mapping and key came from.

Every mapping is loaded as a :class:`LineDict`, a ``dict`` that also knows the line of each of
its keys, so a schema error deep inside a file can be reported as ``file:line``.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import yaml

from ddpadvisor.errors import InputError


class LineDict(dict[str, Any]):
    """A mapping that remembers its own line and the line of each key (1-based)."""

    line: int = 0
    key_lines: dict[str, int]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.key_lines = {}


class LineList(list[Any]):
    line: int = 0
    item_lines: list[int]

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.item_lines = []


_Base: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _LineLoader(_Base):  # type: ignore[misc,valid-type]
    """SafeLoader (no object construction from tags) that records lines, rejects duplicate keys."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
    out = LineDict()
    out.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, (str, int, float, bool)) or key is None:
            raise yaml.constructor.ConstructorError(
                None, None, f"unsupported mapping key {key!r}", key_node.start_mark
            )
        key = str(key) if not isinstance(key, str) else key
        if key in out:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = key_node.start_mark.line + 1
    return out


def _construct_sequence(loader: _LineLoader, node: yaml.SequenceNode) -> LineList:
    out = LineList(loader.construct_object(child, deep=True) for child in node.value)
    out.line = node.start_mark.line + 1
    out.item_lines = [child.start_mark.line + 1 for child in node.value]
    return out


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)  # type: ignore[arg-type]
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)  # type: ignore[arg-type]


# Rule, answers and description files are small; anything bigger is a mistake, not input.
MAX_BYTES = 16 * 1024 * 1024


class NotARegularFile(OSError):
    """A FIFO, device, socket or folder where a file was expected: never opened or read."""


def read_regular(path: Path, limit: int) -> tuple[bytes, bool]:
    """The first ``limit`` bytes of a regular file and whether it is longer.

    The one bounded read of every reader (answers, rules, probe results, traces): a FIFO or a
    device would block or never end, so only regular files are opened, without blocking, and
    re-checked after opening in case the path was swapped.
    """
    if not stat.S_ISREG(os.stat(path).st_mode) or _kernel_view(path):
        raise NotARegularFile(f"{path} is not a regular file")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise NotARegularFile(f"{path} is not a regular file")
        data = fh.read(limit + 1)
    return data[:limit], len(data) > limit


_KERNEL = (Path("/proc"), Path("/sys"))


def _kernel_view(path: Path) -> bool:
    """A /proc or /sys entry: it looks like a regular file but reads the kernel's state, may
    block (``/proc/kmsg``) or differ on every read."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):
        return False
    return any(k in resolved.parents for k in _KERNEL)


class DuplicateKey(ValueError):
    """A JSON object that names the same key twice (the last would silently win)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key[:60]!r}")
        self.key = key


# No count, step or byte size has more digits; a longer integer is damage, and Python refuses to
# turn one of over 4,300 digits into an int at all (and float() of 400 digits overflows).
MAX_INT_DIGITS = 30


def bounded_int(text: str) -> int:
    """``parse_int`` for json.loads: an integer of at most :data:`MAX_INT_DIGITS` digits."""
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text.lstrip('-'))} digits")
    return int(text)


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for json.loads that refuses duplicate keys."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key)
        out[key] = value
    return out


def read_bounded(
    path: Path, max_bytes: int = MAX_BYTES, folder: str = "is a directory, expected a file"
) -> tuple[bytes, bool]:
    """:func:`read_regular` with its failures as one InputError line each (``folder`` says
    what a folder given as a file should be told)."""
    try:
        return read_regular(path, max_bytes)
    except FileNotFoundError:
        raise InputError("no such file", path) from None
    except IsADirectoryError:
        raise InputError(folder, path) from None
    except NotARegularFile:
        raise InputError(
            "not a regular file (a pipe, a device, a socket or a /proc entry); not read", path
        ) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path) from None


def read_text(path: Path, max_bytes: int = MAX_BYTES, errors: str = "strict") -> str:
    """A regular file's text: never opens a FIFO or a device, never reads without bound.

    ``errors="replace"`` reads text that is not all UTF-8 (a pasted description) instead of
    refusing it."""
    if path.is_dir():
        raise InputError("is a directory, expected a file", path)
    data, longer = read_bounded(path, max_bytes)
    if longer:
        raise InputError(f"too large (more than {max_bytes} bytes)", path)
    try:
        return data.decode("utf-8", errors)
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", path) from None


def check_input_file(path: Path, label: str | Path | None = None) -> None:
    """Refuse, without opening it, what a reader must not open: a missing path, a folder, a
    FIFO, a device, a socket, a /proc or /sys entry (``/proc/kmsg`` blocks for ever)."""
    where = label if label is not None else path
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError("no such file", where) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", where) from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError("is a directory, expected a file", where)
    if not stat.S_ISREG(st.st_mode) or _kernel_view(path):
        raise InputError(
            "not a regular file (a pipe, a device, a socket or a /proc entry); not read", where
        )


def read_description_text(path: Path, max_bytes: int = MAX_BYTES) -> str:
    """A description file's text (``--describe``, ``ask --describe``): a regular file of
    bounded size that says something; an empty or blank one is refused, not diagnosed."""
    if str(path) == os.devnull:
        raise InputError("the description is empty", path)
    text = read_text(path, max_bytes, errors="replace")
    if not text.strip():
        raise InputError("the description is empty", path)
    return text


# What the values of one YAML file may add up to once every alias is expanded: a rule folder's
# largest file holds a few thousand; "billion laughs" nests aliases to build 10**9 from 100.
MAX_NODES = 1_000_000


class TooManyNodes(ValueError):
    pass


def _check_expanded(data: Any, limit: int = MAX_NODES) -> None:
    """Refuse a document whose aliases expand beyond ``limit`` values, without expanding it.

    An alias makes the loader share one object, so each object's expanded size is counted once
    (memoised by identity) and the walk is linear in the file, not in the expansion."""
    sizes: dict[int, int] = {}

    def size(obj: Any, depth: int) -> int:
        if not isinstance(obj, (dict, list)):
            return 1
        key = id(obj)
        known = sizes.get(key)
        if known is not None:
            return known
        if depth > 500:
            raise RecursionError
        sizes[key] = 1  # a recursive alias counts once
        children = obj.values() if isinstance(obj, dict) else obj
        total = 1 + sum(size(child, depth + 1) for child in children)
        if total > limit:
            raise TooManyNodes(f"more than {limit} values once its aliases are expanded")
        sizes[key] = total
        return total

    size(data, 0)


def load_yaml(path: Path, text: str | None = None) -> Any:
    """Parse YAML safely; syntax errors become an :class:`InputError` with the line."""
    if text is None:
        text = read_text(path)
    try:
        data = yaml.load(text, Loader=_LineLoader)
        if "*" in text:  # only aliases share objects; a file without one is its own size
            _check_expanded(data)
        return data
    except TooManyNodes as exc:
        raise InputError(f"refused: {exc}", path) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = exc.problem or exc.context or "malformed YAML"
        raise InputError(f"malformed YAML: {problem}", path, line) from None
    except yaml.YAMLError as exc:
        raise InputError(f"malformed YAML: {exc}", path) from None
    except RecursionError:
        raise InputError("malformed YAML: nested too deeply", path) from None
    except ValueError as exc:  # e.g. an integer of thousands of digits
        raise InputError(f"malformed YAML: {exc}", path) from None


def load_json(path: Path, text: str | None = None) -> Any:
    if text is None:
        text = read_text(path)
    try:
        return json.loads(text, object_pairs_hook=unique_keys, parse_int=bounded_int)
    except RecursionError:
        raise InputError("malformed JSON: nested too deeply", path) from None
    except DuplicateKey as exc:
        raise InputError(f"malformed JSON: {exc}", path) from None
    except json.JSONDecodeError as exc:
        raise InputError(
            f"malformed JSON: {exc.msg} (column {exc.colno})", path, exc.lineno
        ) from None
    except ValueError as exc:  # e.g. an integer of thousands of digits
        raise InputError(f"malformed JSON: {exc}", path) from None


def load_mapping_file(path: Path) -> Any:
    """Load a YAML or JSON file, choosing by suffix (JSON is also valid YAML, but its errors
    read better from the JSON parser)."""
    text = read_text(path)
    if path.suffix.lower() == ".json":
        return load_json(path, text)
    return load_yaml(path, text)


def line_of(data: Any, loc: tuple[int | str, ...]) -> int | None:
    """The line of the deepest known node on a pydantic error location."""
    best: int | None = getattr(data, "line", None) or None
    node = data
    for part in loc:
        if isinstance(node, LineDict) and isinstance(part, str):
            if part in node.key_lines:
                best = node.key_lines[part]
            if part not in node:
                break
            node = node[part]
        elif isinstance(node, LineList) and isinstance(part, int):
            if part >= len(node):
                break
            best = node.item_lines[part]
            node = node[part]
        else:
            break
        inner = getattr(node, "line", None)
        if inner:
            best = inner if best is None else best
    return best
