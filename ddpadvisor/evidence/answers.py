"""Answers from the human: an answers file (YAML or JSON) and ``--set FACT=VALUE``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ddpadvisor.errors import InputError
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.kb.values import ValueProblem
from ddpadvisor.observation import Observation, ObsSource, UnknownFact, observe
from ddpadvisor.yamlio import LineDict, load_mapping_file

# Keys an answers file may carry beside its facts (structured form: {facts: {...}, ...}).
METADATA_KEYS = {"description", "thread", "notes", "source", "title"}


def _observe(
    kb: KnowledgeBase, fact_id: str, raw: Any, source: ObsSource, file: str, line: int | None
) -> Observation | None:
    where = f"{Path(file).name}:{line}" if line else Path(file).name
    try:
        return observe(kb, fact_id, raw, source, where if source == "answer" else "--set")
    except UnknownFact:
        hint = _closest(fact_id, list(kb.facts))
        raise InputError(f"unknown fact id {fact_id!r}{hint}", file, line) from None
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
        obs = _observe(kb, str(key), raw, "answer", str(path), line)
        if obs is not None:
            out.append(obs)
    return out, warnings


def parse_set(kb: KnowledgeBase, items: list[str]) -> list[Observation]:
    out = []
    for item in items:
        if "=" not in item:
            raise InputError(f"--set expects FACT=VALUE, got {item!r}", "--set")
        key, raw = item.split("=", 1)
        obs = _observe(kb, key.strip(), raw, "set", "--set", None)
        if obs is not None:
            out.append(obs)
    return out
