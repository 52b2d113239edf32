"""The trace format, shared by the agent that writes it and ddpadvisor's reader.

Each rank writes ``rank<R>.jsonl``: one JSON object per line, its record kind in ``"k"``. The
first record of a run is ``start``, carrying the format version ``"v"``. This module lists the
record kinds with the type of each field the reader relies on, and :func:`problem` says what
is wrong with one record. Fields not listed are free (a newer agent may add some).

Standard library only: the agent folder is copied to clusters on its own, and the reader
imports this module from the agent folder (never the other way round).
"""

from __future__ import annotations

import math
from typing import Any

# 2: no cross-rank all_gather in checks; `restart` records. 3: step records count every large
# collective (`bigcol`), with or without a DDP wrapper
FORMAT_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)

MAX_WORLD = 1 << 20  # ranks in one job
MAX_INT = 1 << 53  # counters, steps, indices (exact in a float64)
MAX_FILE_BYTES = 1 << 30  # a rank file is read up to this size
MAX_LINE_BYTES = 16 << 20  # a longer line is skipped unread
MAX_LIST = 1 << 22  # entries in one list field

# Field types: int (0..MAX_INT, not bool), num (int or float; NaN and inf are measurements),
# bool, str, list, dict, any; "list[T]" checks every entry; a trailing "?" allows null.
_STEP_FIELDS = {
    "s": "int",
    "loss": "list[num?]",
    "fac": "list[num?]",
    "fterms": "list[int]",
    "tdiv": "list[bool?]",
    "syn": "list[bool?]",
    "bflag": "list[bool?]",
    "fflag": "list[bool?]",
    "pre": "num?",
    "post": "num?",
    "lr": "list[any]",
    "dig": "list[list]",
    "tok": "list[num?]",
    "ce": "list[list]",
    "lowp": "list[num]",
    "byp": "int",
    "bypi": "bool",
    "zc": "int",
    "oth": "int",  # steps of other optimizers since the counted one's last step
    "zb": "bool",
    "sch": "int",
    "clip": "list[any]",
    # per clip: [gradients unsynced, before GradScaler.unscale_, a backward followed it in the
    # window, backwards before it in the window]
    "cctx": "list[list]",
    "lread": "int",
    "red": "int",
    "bigred": "int",
    "bigcol": "int",
    "rng": "list[list]",
    "bs": "int",
    "skip": "bool",
    "scale": "any",  # GradScaler state as the agent copied it (a one-element list)
    "growth": "any",
    "finf": "num?",
    "ds": "dict",  # a DeepSpeed engine's calls in the step: steps, bwd, bnd, scale, overflow
}

KINDS: dict[str, dict[str, str]] = {
    "start": {
        "v": "int",
        "rank": "int",
        "world": "int",
        "local_rank": "any",
        "backend": "str?",
        "torch": "str?",
        "every": "int?",
        "max_steps": "int?",
        "argv": "list[str]",
        "cwd": "str?",
    },
    "step": _STEP_FIELDS,
    "chk": {
        "s": "int",
        "final": "bool",
        "params": "list[list]",
        "params_names": "list[str]",
        "grads": "list[list]",
        "grads_names": "list[str]",
        "optim": "list[list]",
        "optim_names": "list[str]",
        "scaler": "list[any]",
        "unreduced": "list[str]",
        "n_unreduced": "int",
        # the counted optimizer's parameters no DDP wrapper holds, of all it steps
        "outside": "list[int]",
        # models the loop runs beside the wrapped one, neither wrapped nor stepped
        "aux": "list[list]",
        "aux_names": "list[str]",
    },
    "bufchk": {"s": "int?", "buffers": "list[list]", "buffers_names": "list[str]"},
    "epoch": {
        "it": "int",
        "sampler": "int",
        "cls": "str?",
        "bs": "int?",
        "s": "int",
        "dataset_len": "int?",
        "set_epoch_calls": "list[int]",
        "shuffle": "any",
        "shard": "str",
        "shards": "int",
    },
    "idx": {"it": "int", "part": "int", "idx": "list[int]", "mod": "int", "end": "bool"},
    "wrap": {
        "ddp": "int",
        "step": "int",
        "n_params": "int",
        "n_buffers": "int",
        "batchnorm": "list[str]",
        "dtypes": "list[str]",
        "seeds": "dict",
        "forward_sync_buffers": "bool",
        "ignored": "list[str]",
    },
    "cfg": {"autocast": "str", "comm_hook": "str", "scaler": "bool", "compile": "bool"},
    # a DeepSpeed engine, as built (hooks/deepspeed.py)
    "ds": {
        "engine": "int",
        "step": "int",
        "stage": "int",
        "gas": "int?",
        "micro": "int?",
        "clip": "num?",
        "fp16": "bool",
        "bf16": "bool",
        "dynamic": "bool",
        "min_scale": "num?",
        "scale": "num?",
        "managed": "bool",
        "opt": "str?",
        "basic": "str?",
        "n_params": "int",
        "dtypes": "list[str]",
    },
    "opt": {"cls": "str", "hp": "dict", "groups": "int", "n_params": "int", "inner": "str?"},
    "sched": {"cls": "str", "primary": "bool", "by": "str"},
    "load": {"kind": "str", "cls": "str", "after_wrap": "bool", "wrapped": "bool", "s": "int"},
    "reg": {"kind": "str", "name": "str", "cls": "str", "s": "int"},
    "set_epoch": {"epoch": "any", "s": "int"},
    "iter": {"workers": "int", "s": "int"},
    # rank<R>.workers.jsonl (hooks/workers.py): a DataLoader worker's generators around a fetch
    "wfetch": {"it": "int", "w": "int", "n": "int", "b": "list[str]", "a": "list[str]"},
    "exception": {"type": "str", "msg": "str", "where": "str?", "s": "int"},
    "agent_error": {"part": "str", "error": "str", "at": "str"},
    "final": {"why": "str", "s": "int"},
    "end": {
        "why": "str",
        "s": "int",
        "fwd": "int",
        "bwd": "int",
        "sched": "int",
        "opt_steps": "list[int]",
        # schedulers with a planned end: [class, planned steps, steps taken, optimizer step
        # count at the last of them, whether it schedules the counted optimizer]
        "plans": "list[list]",
        "dsmod": "bool",
    },
    "destroy": {"s": "int"},
    "restart": {"why": "str", "s": "int", "cls": "str"},
    # a printed or logged line's numbers (hooks/output.py): [value, decimals after the point]
    "out": {"s": "int", "b": "int", "n": "list[list]"},
}

REQUIRED: dict[str, tuple[str, ...]] = {
    "start": ("rank", "world"),
    "step": ("s",),
    "chk": ("s",),
    "epoch": ("it",),
    "idx": ("it", "idx"),
    "out": ("s", "n"),
}


def _is(value: Any, kind: str) -> bool:
    if kind.endswith("?"):
        return value is None or _is(value, kind[:-1])
    if kind == "any":
        return True
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_INT
    if kind == "num":
        return (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and (not isinstance(value, int) or abs(value) <= MAX_INT)
        )
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    if kind == "dict":
        return isinstance(value, dict)
    if kind == "list":
        return isinstance(value, list) and len(value) <= MAX_LIST
    if kind.startswith("list[") and kind.endswith("]"):
        inner = kind[5:-1]
        return _is(value, "list") and all(_is(v, inner) for v in value)
    raise ValueError(f"unknown field type {kind!r}")


def problem(rec: Any) -> str | None:
    """What is wrong with one record, in a few words, or None when it follows the format."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    kind = rec.get("k")
    if not isinstance(kind, str):
        return "no record kind ('k')"
    fields = KINDS.get(kind)
    if fields is None:
        return None  # a kind this reader does not know: a newer agent's; ignored
    for name in REQUIRED.get(kind, ()):
        if name not in rec:
            return f"{kind} record without '{name}'"
    for name, expected in fields.items():
        if name in rec and not _is(rec[name], expected):
            return f"{kind} record: '{name}' is not {expected.replace('?', ' or null')}"
    t = rec.get("t")
    if t is not None and not (isinstance(t, (int, float)) and math.isfinite(t)):
        return f"{kind} record: 't' is not a finite number"
    if kind == "start":
        if not 1 <= rec["world"] <= MAX_WORLD:
            return f"start record: world size {rec['world']} out of range (1..{MAX_WORLD})"
        if rec["rank"] >= rec["world"]:
            return f"start record: rank {rec['rank']} not below world size {rec['world']}"
    return None
