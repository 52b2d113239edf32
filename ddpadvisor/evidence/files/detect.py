"""Which reader a file's content calls for, and the reading of one attached file.

Detection looks at the content, never the name: TensorBoard's TFRecord framing with an
``Event`` naming its ``file_version`` first (in an attached folder, event files are found by
the ``tfevents`` in their names, as TensorBoard finds them; a folder without any that holds a
``metrics.csv`` is Lightning's CSVLogger folder, read as that CSV), JSON (a ``log_history`` is the
Trainer's state; DeepSpeed's keys; TrainingArguments' keys), JSON lines of metrics, YAML
(accelerate's keys; TrainingArguments' keys), CSV with a step and a loss column, and text: a
launch command, environment dumps and a training log may share one pasted file, so each is
looked for. ``KIND:FILE`` names the kind instead (see :data:`KINDS`).

Every problem with the content is one warning naming the file (and line), and the rest of
the evidence is kept; a file that cannot be opened at all, and an event file (or log folder)
of which not one event can be read, is an InputError (exit 2).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ddpadvisor.errors import InputError
from ddpadvisor.evidence.files import configs, envdump, logs, text
from ddpadvisor.evidence.files.found import Read
from ddpadvisor.evidence.files.text import Binary, Text, read

KINDS: dict[str, str] = {
    "log": "a plain text training log (printed losses, overflow messages)",
    "trainer-state": "the HF Trainer's trainer_state.json",
    "csv": "a metrics CSV (Lightning metrics.csv, W&B history export)",
    "jsonl": "JSON-lines metrics (detectron2 metrics.json, mmengine scalars.json)",
    "deepspeed": "a DeepSpeed JSON config",
    "accelerate": "an accelerate config YAML",
    "training-args": "TrainingArguments as JSON or YAML",
    "launch": "the torchrun / accelerate launch / deepspeed command line",
    "env": "an environment dump (collect_env, pip list, nvidia-smi, accelerate env, NCCL_*)",
    "tensorboard": "a TensorBoard event file, or a log folder holding them (one run per folder)",
}


LOGGER_CSV = "metrics.csv"  # what Lightning's CSVLogger writes in its version_N folder


def split_kind(value: str) -> tuple[str | None, Path]:
    """``KIND:FILE`` -> (KIND, FILE) when KIND is one of :data:`KINDS`, else (None, value)."""
    head, sep, rest = value.partition(":")
    if sep and head in KINDS and rest:
        return head, Path(rest)
    return None, Path(value)


def _tensorboard(path: Path) -> bool:
    """A folder (a TensorBoard log directory is the one folder attached as a whole), or a file
    whose first bytes are an event file's first record; a binary or empty file named like an
    event file is read as one too, so that its damage is named."""
    if path.is_dir():
        return True
    from ddpadvisor.evidence.files.tensorboard import is_event_head
    from ddpadvisor.yamlio import read_bounded

    head, _ = read_bounded(path, 4096)
    if is_event_head(head):
        return True
    return "tfevents" in path.name and (not head or b"\x00" in head)


def _logger_csv(path: Path) -> Path | None:
    """The ``metrics.csv`` of a Lightning ``CSVLogger`` folder (``lightning_logs/version_N``)
    attached as a whole: a folder that holds one and no event file (a ``TensorBoardLogger``
    folder is read as TensorBoard's)."""
    if not path.is_dir():
        return None
    csv = path / LOGGER_CSV
    if not csv.is_file():
        return None
    from ddpadvisor.evidence.files.tensorboard import find_event_files

    return None if find_event_files(path)[0] else csv


def read_attached(path: Path, kind: str | None = None) -> Read:
    if kind in (None, "csv"):
        csv = _logger_csv(path)
        if csv is not None:
            return read_attached(csv, kind)
    if kind == "tensorboard" or (kind is None and _tensorboard(path)):
        from ddpadvisor.evidence.files import tensorboard

        return tensorboard.read(path)
    try:
        doc = read(path)
    except Binary as exc:
        why = f"a binary file ({exc}), not a log, config or dump; not read"
        if "tfevents" in path.name:
            why = f"a TensorBoard event file, not a {kind}; attach it without a KIND"
        return Read("binary", warnings=[f"{path}: {why}"])
    out = Read(kind or "unknown")
    if doc.truncated:
        out.warnings.append(f"{path}: longer than {text.MAX_BYTES} bytes; only its start is read")
    if not doc.text.strip():
        out.warnings.append(f"{path}: empty; nothing read")
        return out
    if kind is None:
        got = _detect(doc)
    else:
        got = _as_kind(doc, kind)
    got.warnings = out.warnings + got.warnings
    return got


def _json(doc: Text) -> tuple[Any, InputError | None]:
    try:
        return json.loads(doc.text), None
    except RecursionError:
        return None, InputError("malformed JSON: nested too deeply", doc.path)
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        msg = getattr(exc, "msg", str(exc)[:60])
        return None, InputError(f"malformed JSON: {msg}", doc.path, line)


def _yaml(doc: Text) -> Any:
    from ddpadvisor.yamlio import load_yaml

    try:
        return load_yaml(doc.path, doc.text)
    except InputError:
        return None


def _detect(doc: Text) -> Read:
    head = doc.text.lstrip("\ufeff \t\r\n")[:1]
    if head in "{[":
        data, problem = _json(doc)
        if problem is None:
            return _json_kind(doc, data)
        records = logs.jsonl_records(doc.text)
        if records is not None:
            return _curves("jsonl", [logs.metrics_jsonl(doc, records)], doc)
        if '"log_history"' in doc.text:
            return _salvage(doc, problem)
        got = _text(doc)  # printed Trainer dicts and "[rank0]: ..." lines are not JSON
        if got.kind == "unknown":
            got.warnings = [f"{problem.one_line()}; nothing read"]
        return got
    if logs.csv_header(doc.text) is not None:
        return _curves("csv", [logs.metrics_csv(doc)], doc)
    if re.match(r"^(?:#[^\n]*\n|\s*\n)*[A-Za-z_][\w-]*:\s", doc.text):
        data = _yaml(doc)
        if configs.is_accelerate(data):
            return configs.accelerate(doc, data)
        if configs.is_training_args(data):
            return configs.training_args(doc, data)
    return _text(doc)


def _json_kind(doc: Text, data: Any) -> Read:
    if logs.is_trainer_state(data):
        return _curves("trainer-state", [logs.trainer_state(doc, data)], doc)
    if configs.is_deepspeed(data):
        return configs.deepspeed(doc, data)
    if configs.is_training_args(data):
        return configs.training_args(doc, data)
    if configs.is_accelerate(data):
        return configs.accelerate(doc, data)
    return Read(
        "unknown",
        warnings=[
            f"{doc.path}: JSON, but not a trainer_state.json, DeepSpeed config or TrainingArguments; nothing read"
        ],
    )


def _salvage(doc: Text, problem: InputError) -> Read:
    """A truncated or damaged JSON file: a trainer_state.json's complete log entries before
    the damage are still read."""
    note = f"{problem.one_line()}"
    if '"log_history"' not in doc.text:
        return Read("unknown", warnings=[f"{note}; nothing read"])
    entries = []
    for m in re.finditer(r"\{[^{}\[\]]*\"step\"[^{}\[\]]*\}", doc.text):
        try:
            entry = json.loads(m.group(0))
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    got = _curves("trainer-state", [logs.trainer_state(doc, {"log_history": entries})], doc)
    got.warnings.insert(
        0, f"{note}; the {len(entries)} complete log_history entries before it are read"
    )
    return got


def _curves(kind: str, curves: list[Any], doc: Text) -> Read:
    kept = [c for c in curves if c.loss or c.lr or c.grad_norm or c.overflows or c.at_minimum]
    out = Read(kind, curves=kept)
    if not kept:
        out.warnings.append(
            f"{doc.path}: read as {kind}, but it holds no loss, learning rate or grad norm values"
        )
    return out


def _text(doc: Text) -> Read:
    out = Read("text")
    kinds: list[str] = []
    launch = configs.launch_line(doc.text)
    if launch is not None:
        out.extend(configs.launch_command(doc, *launch))
        kinds.append("launch")
    dumps = envdump.markers(doc.text)
    if dumps:
        out.extend(envdump.environment(doc))
        kinds.extend(dumps)
    curves = logs.text_log(doc)
    if curves:
        out.curves.extend(curves)
        kinds.append("log")
    if not kinds:
        out.warnings.append(
            f"{doc.path}: no per-step loss, loss-scale message, launch command or environment "
            "dump found (a log of another shape? name its kind: --attach KIND:FILE)"
        )
    out.kind = "+".join(kinds) or "unknown"
    return out


def _as_kind(doc: Text, kind: str) -> Read:
    if kind in ("trainer-state", "deepspeed", "training-args", "accelerate"):
        data: Any = None
        if doc.text.lstrip()[:1] in "{[":
            data, problem = _json(doc)
            if problem is not None:
                return (
                    _salvage(doc, problem)
                    if kind == "trainer-state"
                    else Read(kind, warnings=[f"{problem.one_line()}; nothing read"])
                )
        else:
            data = _yaml(doc)
        if not isinstance(data, dict):
            return Read(kind, warnings=[f"{doc.path}: not a mapping; nothing read as {kind}"])
        if kind == "trainer-state":
            if not logs.is_trainer_state(data):
                return Read(kind, warnings=[f"{doc.path}: no log_history list; nothing read"])
            return _curves(kind, [logs.trainer_state(doc, data)], doc)
        reader = {
            "deepspeed": configs.deepspeed,
            "training-args": configs.training_args,
            "accelerate": configs.accelerate,
        }[kind]
        return reader(doc, data)
    if kind == "csv":
        return _curves(kind, [logs.metrics_csv(doc)], doc)
    if kind == "jsonl":
        records = logs.jsonl_records(doc.text)
        if records is None:
            return Read(
                kind, warnings=[f"{doc.path}: no JSON lines with a step and a loss; nothing read"]
            )
        return _curves(kind, [logs.metrics_jsonl(doc, records)], doc)
    if kind == "launch":
        launch = configs.launch_line(doc.text)
        if launch is None:
            return Read(
                kind,
                warnings=[f"{doc.path}: no torchrun / accelerate launch / deepspeed command found"],
            )
        return configs.launch_command(doc, *launch)
    if kind == "env":
        return envdump.environment(doc)
    return _curves("log", logs.text_log(doc), doc)
