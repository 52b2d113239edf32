"""Answers from the human: an answers file (YAML or JSON) and ``--set FACT=VALUE``.

Beside facts, both may say what the user declined and which fixes were verified:

- ``fact: unknown`` (or ``不知道``) declines the fact: it is never proposed again;
- ``declined: [trace, probe:env, ask:precision]`` (file) or ``--set trace=unknown`` declines a
  whole next step;
- ``without: [script, machine]`` (file) or ``--without script`` says what the user does not
  have ("I have no script here", "I cannot run jobs on that cluster"): every step that needs it
  is declined at once (``without:script`` among the declined ids);
- ``verified: {fix-id: failed}`` (file) or ``--set verified.FIX=failed`` reports the outcome of a
  fix's verify command (failed / passed), evidence about the cause the fix addresses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ddpadvisor.errors import InputError
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.kb.values import ValueProblem, is_unknown
from ddpadvisor.observation import (
    NEEDS,
    Gathered,
    Observation,
    ObsSource,
    UnknownFact,
    observe,
)

# Keys an answers file may carry beside its facts (structured form: {facts: {...}, ...}).
METADATA_KEYS = {"description", "thread", "notes", "source", "title"}
STEP_KEYS = ("trace", "scan", "attach")
EXTRA_KEYS = ("declined", "verified", "without")
VERIFY_WORDS = {
    "failed": "failed",
    "fail": "failed",
    "失败": "failed",
    "passed": "passed",
    "pass": "passed",
    "ok": "passed",
    "通过": "passed",
    "成功": "passed",
}


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


def _is_step(kb: KnowledgeBase, key: str) -> bool:
    if key in STEP_KEYS:
        return True
    kind, _, name = key.partition(":")
    return (
        (kind == "ask" and name in kb.facts)
        or (kind == "probe" and bool(name))
        or (kind == "without" and name in NEEDS)
    )


def _verified(kb: KnowledgeBase, fix: str, raw: Any, file: str, line: int | None) -> str:
    if fix not in kb.fixes:
        hint = _closest(fix, list(kb.fixes))
        raise InputError(f"verified: unknown fix id {fix!r}{hint}", file, line)
    outcome = VERIFY_WORDS.get(str(raw).strip().lower())
    if outcome is None:
        raise InputError(f"verified.{fix} expects failed or passed, got {raw!r}", file, line)
    return outcome


def read_answers(kb: KnowledgeBase, path: Path) -> tuple[list[Observation], list[str]]:
    """Observations from an answers file, plus warnings for ignored metadata keys."""
    got = read_answer_file(kb, path)
    return got.observations, got.warnings


def read_answer_file(kb: KnowledgeBase, path: Path) -> Gathered:
    """Everything an answers file says: facts, declined facts and steps, verified fixes."""
    from ddpadvisor.yamlio import LineDict, load_mapping_file  # YAML only for a file

    data = load_mapping_file(path)
    got = Gathered()
    warnings = got.warnings
    if data is None:
        return got
    if not isinstance(data, dict):
        raise InputError("an answers file must be a mapping of fact id to value", path, 1)

    def line_of(mapping: Any, key: str) -> int | None:
        return mapping.key_lines.get(key) if isinstance(mapping, LineDict) else None

    extras = {
        k: data[k] for k in ("declined", "verified", "without") if k in data and k not in kb.facts
    }
    if "facts" in data and isinstance(data["facts"], dict):
        for key in data:
            if key not in ("facts", *EXTRA_KEYS) and key not in METADATA_KEYS:
                warnings.append(f"{path}: unknown key {key!r} ignored")
        outer = data
        data = data["facts"]
    else:
        outer = None
    for key, raw in data.items():
        if key in extras and outer is None:
            continue
        line = data.key_lines.get(key) if isinstance(data, LineDict) else None
        if line is None and isinstance(outer, LineDict):
            line = outer.key_lines.get("facts")
        if _is_step(kb, str(key)) and is_unknown(raw):
            got.declined.append(str(key))
            continue
        obs = _observe(kb, str(key), raw, "answer", str(path), line)
        if obs is not None:
            got.observations.append(obs)
        elif str(key) not in got.declined:
            got.declined.append(str(key))
    top = outer if outer is not None else data
    declined = extras.get("declined")
    if declined is not None:
        line = line_of(top, "declined")
        items = [declined] if isinstance(declined, str) else declined
        if not isinstance(items, list):
            raise InputError("declined: expects a list of fact or step ids", path, line)
        for item in items:
            key = str(item)
            if key not in kb.facts and not _is_step(kb, key):
                raise InputError(f"declined: unknown fact or step id {key!r}", path, line)
            if key not in got.declined:
                got.declined.append(key)
    without = extras.get("without")
    if without is not None:
        line = line_of(top, "without")
        items = [without] if isinstance(without, str) else without
        if not isinstance(items, list) or any(str(i) not in NEEDS for i in items):
            raise InputError(f"without: expects a list of {', '.join(NEEDS)}", path, line)
        for item in items:
            if f"without:{item}" not in got.declined:
                got.declined.append(f"without:{item}")
    verified = extras.get("verified")
    if verified is not None:
        line = line_of(top, "verified")
        if not isinstance(verified, dict):
            raise InputError("verified: expects a mapping of fix id to failed/passed", path, line)
        for fix, raw in verified.items():
            got.verified[str(fix)] = _verified(kb, str(fix), raw, str(path), line)
    return got


def parse_set(kb: KnowledgeBase, items: list[str]) -> list[Observation]:
    return read_sets(kb, items).observations


def read_sets(kb: KnowledgeBase, items: list[str]) -> Gathered:
    """``--set FACT=VALUE`` items; ``FACT=unknown`` or ``STEP=unknown`` declines,
    ``verified.FIX=failed`` reports a verify outcome."""
    got = Gathered()
    for item in items:
        if "=" not in item:
            raise InputError(f"--set expects FACT=VALUE, got {item!r}", "--set")
        key, raw = item.split("=", 1)
        key = key.strip()
        if key.startswith("verified."):
            fix = key.split(".", 1)[1]
            got.verified[fix] = _verified(kb, fix, raw, "--set", None)
            continue
        if _is_step(kb, key) and key not in kb.facts:
            if not is_unknown(raw):
                raise InputError(f"--set {key}= only takes unknown (to decline the step)", "--set")
            got.declined.append(key)
            continue
        obs = _observe(kb, key, raw, "set", "--set", None)
        if obs is not None:
            got.observations.append(obs)
        elif key not in got.declined:
            got.declined.append(key)
    return got
