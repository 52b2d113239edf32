"""Safe YAML/JSON reading that remembers where every mapping and key came from.

Every mapping is loaded as a :class:`LineDict`, a ``dict`` that also knows the line of each of
its keys, so a schema error deep inside a file can be reported as ``file:line``.
"""

from __future__ import annotations

import json
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


def read_text(path: Path, max_bytes: int = MAX_BYTES) -> str:
    """A regular file's text: never opens a FIFO or a device, never reads without bound."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InputError("no such file", path) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path) from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError("is a directory, expected a file", path)
    if not stat.S_ISREG(st.st_mode):
        raise InputError("not a regular file (a pipe or a device?)", path)
    if st.st_size > max_bytes:
        raise InputError(f"too large ({st.st_size} bytes; at most {max_bytes})", path)
    try:
        with path.open("rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path) from None
    if len(data) > max_bytes:
        raise InputError(f"too large (more than {max_bytes} bytes)", path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", path) from None


def load_yaml(path: Path, text: str | None = None) -> Any:
    """Parse YAML safely; syntax errors become an :class:`InputError` with the line."""
    if text is None:
        text = read_text(path)
    try:
        return yaml.load(text, Loader=_LineLoader)
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


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def load_json(path: Path, text: str | None = None) -> Any:
    if text is None:
        text = read_text(path)
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise InputError("malformed JSON: nested too deeply", path) from None
    except _DuplicateKey as exc:
        raise InputError(f"malformed JSON: duplicate key {exc.args[0]!r}", path) from None
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
