"""Load KB folders (bundled first, then user folders) into one validated :class:`KnowledgeBase`.

Loading never executes anything from a KB file: YAML is read with a SafeLoader subclass.
Problems are collected with file and line so that ``kb validate`` can list them all, while
diagnosis stops at the first one.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ddpadvisor.errors import InputError
from ddpadvisor.kb.files import default_dirs, kb_files, user_config_dir
from ddpadvisor.kb.model import KnowledgeBase, Origin, Problem
from ddpadvisor.kb.schema import Cause, KBFile
from ddpadvisor.yamlio import LineDict, LineList, line_of, load_yaml

__all__ = ["default_dirs", "describe_validation_error", "kb_files", "load_kb", "user_config_dir"]

KINDS = ("facts", "mechanisms", "causes", "fixes", "claims")


def load_kb(dirs: list[Path]) -> KnowledgeBase:
    """Load and merge folders in order; later folders override earlier ones explicitly."""
    kb = KnowledgeBase(dirs=[str(d) for d in dirs])
    for folder in dirs:
        if not folder.exists():
            raise InputError("KB folder does not exist", folder)
        if not folder.is_dir():
            raise InputError("KB path is not a folder", folder)
        files = kb_files(folder)
        if not files and folder != user_config_dir():
            # A folder named by --kb that holds no rule is a wrong path, not an empty rule set
            # (the config folder may well be empty).
            raise InputError("KB folder holds no rule file (*.yaml, *.yml)", folder)
        for path in files:
            _load_file(kb, path)
    _duplicate_tests(kb)
    from ddpadvisor.kb.check import check_references

    check_references(kb)
    return kb


def _load_file(kb: KnowledgeBase, path: Path) -> None:
    try:
        raw = load_yaml(path)
    except InputError as exc:
        kb.problems.append(Problem(Origin(str(path), exc.line), exc.message))
        return
    if raw is None:
        return
    if not isinstance(raw, dict):
        kb.problems.append(Problem(Origin(str(path), 1), "top level must be a mapping"))
        return
    # Validate entry by entry so that one bad entry does not hide the rest of the file.
    for key in raw:
        if key not in KBFile.model_fields:
            line = raw.key_lines.get(key) if isinstance(raw, LineDict) else None
            allowed = ", ".join(KBFile.model_fields)
            # Name the key only when it looks like one: a rule "file" may be a link to some
            # other file, whose lines must not be echoed.
            shown = f" {key!r}" if _IDENTIFIER.fullmatch(str(key)) else ""
            kb.problems.append(
                Problem(Origin(str(path), line), f"unknown section{shown} (allowed: {allowed})")
            )
    for kind in (*KINDS, "tests"):
        entries = raw.get(kind)
        if entries is None:
            continue
        if not isinstance(entries, list):
            line = raw.key_lines.get(kind) if isinstance(raw, LineDict) else None
            kb.problems.append(Problem(Origin(str(path), line), f"'{kind}' must be a list"))
            continue
        model = KBFile.model_fields[kind].annotation.__args__[0]  # type: ignore[union-attr]
        for index, entry in enumerate(entries):
            line = entries.item_lines[index] if isinstance(entries, LineList) else None
            origin = Origin(str(path), line)
            patch_mode = entry.get("override") if isinstance(entry, dict) else None
            entry_id = entry.get("id") if isinstance(entry, dict) else None
            if entry_id is not None and not isinstance(entry_id, str):
                msg = f"{kind[:-1]} #{index + 1}: field 'id': must be a string"
                kb.problems.append(Problem(origin, msg))
                continue
            candidate = entry
            if patch_mode is not None and kind != "tests":
                base = getattr(kb, kind).get(entry.get("id"))
                if base is None:
                    msg = f"override of unknown {kind[:-1]} id {entry.get('id')!r}: nothing to override"
                    kb.problems.append(Problem(origin, msg))
                    continue
                if patch_mode not in ("replace", "append"):
                    msg = f"{kind[:-1]} {entry.get('id')!r}: field 'override': must be 'replace' or 'append'"
                    kb.problems.append(Problem(origin, msg))
                    continue
                candidate = _patched(base, entry, patch_mode)
            try:
                obj = model.model_validate(candidate)
            except ValidationError as exc:
                field_loc, msg = describe_validation_error(exc)
                loc = (kind, index, *field_loc)
                where = Origin(str(path), line_of(raw, loc) or line)
                field_name = ".".join(str(p) for p in field_loc) or "entry"
                entry_id = entry.get("id") if isinstance(entry, dict) else None
                label = f"{kind[:-1]} {entry_id!r}" if entry_id else f"{kind[:-1]} #{index + 1}"
                kb.problems.append(Problem(where, f"{label}: field '{field_name}': {msg}"))
                continue
            if kind == "tests":
                kb.tests.append(obj)
                kb.test_origins.append(origin)
            else:
                _merge(kb, kind, obj, origin, patched=patch_mode is not None)


def _duplicate_tests(kb: KnowledgeBase) -> None:
    """Rule tests are run and reported by id: two of one id hide each other's outcome."""
    first: dict[str, Origin] = {}
    for test, origin in zip(kb.tests, kb.test_origins):
        if test.id in first:
            kb.problems.append(
                Problem(origin, f"duplicate rule test id {test.id!r} (first at {first[test.id]})")
            )
        else:
            first[test.id] = origin


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,40}")

_TYPE_TAGS = {"float", "int", "str", "bool", "list", "dict", "none", "tuple"}


def _is_tag(part: object) -> bool:
    """pydantic puts union member names (``literal[...]``, ``float``) into error locations."""
    if not isinstance(part, str):
        return False
    return part in _TYPE_TAGS or any(c in part for c in "[(") or part.startswith("constrained")


def describe_validation_error(exc: ValidationError) -> tuple[tuple[int | str, ...], str]:
    """The first error's field location and message, merging the alternatives of a union."""
    errors = exc.errors()
    loc = tuple(p for p in errors[0]["loc"] if not _is_tag(p))
    msgs: list[str] = []
    for err in errors:
        if tuple(p for p in err["loc"] if not _is_tag(p)) == loc:
            msg = err["msg"].removeprefix("Value error, ")
            if msg not in msgs:
                msgs.append(msg)
    return loc, "; or ".join(msgs)


def _merge(kb: KnowledgeBase, kind: str, obj: Any, origin: Origin, *, patched: bool) -> None:
    table: dict[str, Any] = getattr(kb, kind)
    if not patched and obj.id in table:
        first = kb.origin(kind, obj.id)
        kb.problems.append(
            Problem(
                origin,
                f"duplicate {kind[:-1]} id {obj.id!r} (first defined at {first}); "
                "use 'override: replace' or 'override: append' to change it",
            )
        )
        return
    table[obj.id] = obj
    if not patched:
        kb.origins[(kind, obj.id)] = origin
    if isinstance(obj, Cause):
        for old in obj.related:
            kb.aliases[old] = obj.id


def _patched(base: BaseModel, patch: dict[str, Any], mode: str) -> dict[str, Any]:
    """Falco-style explicit override: 'replace' swaps the given fields, 'append' extends lists."""
    data = base.model_dump(by_alias=True, exclude_none=True)
    for key, value in patch.items():
        if key in ("id", "override"):
            continue
        if mode == "append" and isinstance(data.get(key), list) and isinstance(value, list):
            data[key] = [*data[key], *value]
        elif mode == "append" and isinstance(data.get(key), dict) and isinstance(value, dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return data
