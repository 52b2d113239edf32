"""Answers from the human: an answers file (YAML or JSON) and ``--set FACT=VALUE``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ddpadvisor.errors import InputError
from ddpadvisor.evidence.observation import Observation
from ddpadvisor.kb.load import KnowledgeBase
from ddpadvisor.kb.values import ValueProblem, parse_value
from ddpadvisor.yamlio import LineDict, load_mapping_file

# Keys an answers file may carry beside its facts (structured form: {facts: {...}, ...}).
METADATA_KEYS = {"description", "thread", "notes", "source", "title"}


def _typed(kb: KnowledgeBase, fact_id: str, raw: Any, file: str, line: int | None) -> Any:
    fact = kb.facts.get(fact_id)
    if fact is None:
        hint = _closest(fact_id, list(kb.facts))
        raise InputError(f"unknown fact id {fact_id!r}{hint}", file, line)
    try:
        return parse_value(fact, raw)
    except ValueProblem as exc:
        raise InputError(str(exc), file, line) from None


def _closest(word: str, options: list[str]) -> str:
    import difflib

    match = difflib.get_close_matches(word, options, n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


def read_answers(kb: KnowledgeBase, path: Path) -> tuple[list[Observation], list[str]]:
    """Observations from an answers file, plus warnings for ignored metadata keys."""
    data = load_mapping_file(path)
    warnings: list[str] = []
    if data is None:
        return [], warnings
    if not isinstance(data, dict):
        raise InputError("an answers file must be a mapping of fact id to value", path, 1)
    if "facts" in data and isinstance(data["facts"], dict):
        for key in data:
            if key != "facts" and key not in METADATA_KEYS:
                warnings.append(f"{path}: unknown key {key!r} ignored")
        outer = data
        data = data["facts"]
    else:
        outer = None
    out = []
    for key, raw in data.items():
        line = data.key_lines.get(key) if isinstance(data, LineDict) else None
        if line is None and isinstance(outer, LineDict):
            line = outer.key_lines.get("facts")
        value = _typed(kb, str(key), raw, str(path), line)
        if value is None:
            continue
        where = f"{path.name}:{line}" if line else path.name
        out.append(Observation(fact=str(key), value=value, source="answer", where=where))
    return out, warnings


def parse_set(kb: KnowledgeBase, items: list[str]) -> list[Observation]:
    out = []
    for item in items:
        if "=" not in item:
            raise InputError(f"--set expects FACT=VALUE, got {item!r}", "--set")
        key, raw = item.split("=", 1)
        value = _typed(kb, key.strip(), raw, "--set", None)
        if value is not None:
            out.append(Observation(fact=key.strip(), value=value, source="set", where="--set"))
    return out
