"""Training logs read into :class:`~ddpadvisor.evidence.files.curve.Curve` objects.

Formats, recognised by content: the HF Trainer's ``trainer_state.json`` (``log_history``) and
the dicts its loop prints (``{'loss': 2.1, 'grad_norm': ..., 'learning_rate': ..., 'epoch':
...}``); CSV metrics with a loss column (Lightning's ``CSVLogger`` ``metrics.csv``, a W&B
history export); JSON-lines metrics with a step and a loss (detectron2 ``metrics.json``,
mmengine ``scalars.json``); plain text logs with a loss per step in the common shapes (nanoGPT
``iter N: loss X``, ``step N ... loss X``, ``Epoch [e][i/n] ... loss: X``, ``loss=X``,
``损失: X``), with ``[rankR]:`` prefixes read as per-rank logs. Loss-scale messages of
DeepSpeed (``OVERFLOW! Rank 0 Skipping step. Attempted loss scale: ...``, ``Current loss scale
already at minimum``) and apex (``Gradient overflow.  Skipping step``) are collected with the
step they follow; torch.amp's GradScaler prints none.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import re
from typing import Any

from ddpadvisor.evidence.files.curve import Curve, Point
from ddpadvisor.evidence.files.text import Text

NUM = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|NaN|inf|Infinity|-inf)"
MAX_POINTS = 1_000_000


def _float(raw: Any) -> float | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, (int, float)):
        return float(raw)
    if isinstance(raw, str):
        text = raw.strip().lower().replace("infinity", "inf")
        try:
            return float(text)
        except ValueError:
            return None
    return None


# -- trainer_state.json ----------------------------------------------------------------------


def is_trainer_state(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("log_history"), list)


def trainer_state(doc: Text, data: dict[str, Any]) -> Curve:
    """The Trainer's ``log_history``: one entry per logging step (loss, grad_norm,
    learning_rate, epoch, step), eval entries and a final summary entry."""
    curve = Curve(doc.name)
    step_lines = [i for i, line in enumerate(doc.text.splitlines(), 1) if '"step":' in line]
    entries = [e for e in data["log_history"] if isinstance(e, dict)]
    for k, entry in enumerate(entries):
        step = _float(entry.get("step"))
        if step is None:
            continue
        line = step_lines[k] if k < len(step_lines) else None
        for key, series in (
            ("loss", curve.loss),
            ("learning_rate", curve.lr),
            ("grad_norm", curve.grad_norm),
        ):
            value = _float(entry.get(key))
            if value is not None and "eval_loss" not in entry:
                series.append(Point(step, value, line))
        if (ev := _float(entry.get("eval_loss"))) is not None:
            curve.eval_loss.append(Point(step, ev, line))
        epoch = _float(entry.get("epoch"))
        if epoch is not None and "loss" in entry:
            curve.epoch.append(Point(step, epoch, line))
    max_steps = _float(data.get("max_steps"))
    epochs = _float(data.get("num_train_epochs"))
    if max_steps and epochs and epochs >= 1:
        curve.steps_per_epoch = max_steps / epochs
    elif len(curve.epoch) >= 2:
        a, b = curve.epoch[0], curve.epoch[-1]
        if b.value > a.value:
            curve.steps_per_epoch = (b.step - a.step) / (b.value - a.value)
    curve.last_step = _float(data.get("global_step"))
    return curve


# -- CSV: Lightning metrics.csv, W&B history export ---------------------------------------------

_STEP_COLUMNS = ("step", "_step", "Step", "global_step", "trainer/global_step", "iteration")


def _column(names: list[str], *wanted: str, contains: str | None = None) -> str | None:
    for w in wanted:
        if w in names:
            return w
    if contains:
        for name in names:
            low = name.lower()
            if (
                contains in low
                and not low.endswith(("__min", "__max", "_epoch"))
                and "val" not in low
                and "eval" not in low
                and "test" not in low
            ):
                return name
    return None


def csv_header(text: str) -> list[str] | None:
    first = text.lstrip("\ufeff").split("\n", 1)[0]
    if first.count(",") < 1:
        return None
    try:
        names = next(csv.reader([first.rstrip("\r")]))
    except (csv.Error, StopIteration):
        return None
    steps = ("step", "_step", "epoch", "global_step", "iteration")
    if any(n.lower() in steps for n in names) and any("loss" in n.lower() for n in names):
        return names
    return None


def metrics_csv(doc: Text) -> Curve:
    curve = Curve(doc.name)
    reader = csv.DictReader(io.StringIO(doc.text.lstrip("\ufeff"), newline=""))
    try:
        names = list(reader.fieldnames or [])
    except csv.Error:
        return curve
    step_col = _column(names, *_STEP_COLUMNS)
    loss_col = _column(
        names,
        "train_loss_step",
        "train_loss",
        "train/loss",
        "loss",
        "train/train_loss",
        contains="loss",
    )
    lr_col = _column(names, "lr", "learning_rate", "train/learning_rate", contains="lr-")
    if lr_col is None:
        lr_col = next(
            (n for n in names if n.lower().startswith("lr") or "learning_rate" in n.lower()), None
        )
    gn_col = _column(names, "grad_norm", "train/grad_norm", contains="grad_norm")
    epoch_col = _column(names, "epoch", "train/epoch")
    eval_col = _column(
        names, "val_loss", "eval_loss", "eval/loss", "val/loss", "valid_loss", "validation_loss"
    )
    try:
        for k, row in enumerate(reader):
            line = k + 2
            step = _float(row.get(step_col)) if step_col else float(k)
            if step is None:
                continue
            for col, series in (
                (loss_col, curve.loss),
                (lr_col, curve.lr),
                (gn_col, curve.grad_norm),
                (eval_col, curve.eval_loss),
            ):
                if col is not None:
                    value = _float(row.get(col))
                    if value is not None:
                        series.append(Point(step, value, line))
            if epoch_col and loss_col and _float(row.get(loss_col)) is not None:
                epoch = _float(row.get(epoch_col))
                if epoch is not None:
                    curve.epoch.append(Point(step, epoch, line))
            if len(curve.loss) > MAX_POINTS:
                break
    except csv.Error:  # a damaged row: the rows before it are kept
        pass
    _epoch_steps(curve)
    return curve


def _epoch_steps(curve: Curve) -> None:
    """Steps per epoch from integer epochs logged beside steps: the steps of the first
    complete epoch."""
    if curve.steps_per_epoch is not None or len(curve.epoch) < 2:
        return
    firsts: dict[int, float] = {}
    for p in curve.epoch:
        if float(p.value).is_integer():
            firsts.setdefault(int(p.value), p.step)
    keys = sorted(firsts)
    pairs = [(a, b) for a, b in itertools.pairwise(keys) if b == a + 1]
    if pairs:  # the first whole epoch between two logged epoch starts
        a, b = pairs[0]
        curve.steps_per_epoch = firsts[b] - firsts[a]


# -- JSON lines: detectron2 metrics.json, mmengine scalars.json ----------------------------------

_JL_STEP = ("iteration", "step", "iter", "global_step")
_JL_LOSS = ("total_loss", "loss", "train_loss")
_JL_LR = ("lr", "learning_rate")
_JL_GN = ("grad_norm",)


def jsonl_records(text: str) -> list[tuple[int, dict[str, Any]]] | None:
    out: list[tuple[int, dict[str, Any]]] = []
    bad = 0
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(rec, dict):
            out.append((number, rec))
    if len(out) < 2 or bad > len(out):
        return None
    if not any(
        any(k in rec for k in _JL_LOSS) and any(k in rec for k in _JL_STEP) for _, rec in out[:50]
    ):
        return None
    return out


def metrics_jsonl(doc: Text, records: list[tuple[int, dict[str, Any]]]) -> Curve:
    curve = Curve(doc.name)
    for line, rec in records:
        step = next((_float(rec[k]) for k in _JL_STEP if k in rec), None)
        if step is None:
            continue
        for keys, series in ((_JL_LOSS, curve.loss), (_JL_LR, curve.lr), (_JL_GN, curve.grad_norm)):
            value = next((_float(rec[k]) for k in keys if k in rec), None)
            if value is not None:
                series.append(Point(step, value, line))
    return curve


# -- plain text logs ------------------------------------------------------------------------------

_RANK = re.compile(r"^\s*\[(?:rank|RANK)\s*(\d{1,6})\]\s*:?|^\s*(?:rank|RANK)\s*(\d{1,6})\s*[:|]")
_HF_DICT = re.compile(r"\{'loss':[^{}]*\}")
_HF_ITEM = re.compile(rf"'(\w+)':\s*(?:tensor\()?'?({NUM})")
_STEP = re.compile(
    r"(?:\biter(?:ation)?s?|\bstep|\bStep|\bITER|\bSTEP|\bit)\s*[:=#]?\s*\[?(\d{1,12})(?:\s*/\s*(\d{1,12}))?"
)
_EPOCH_ITER = re.compile(
    r"Epoch\s*\[?\(?(\d{1,7})\]?\)?\s*\[\s*(\d{1,9})\s*/\s*(\d{1,9})\s*\]", re.I
)
_LOSS = re.compile(
    rf"(?<![\w/])(?:train[_ ]|training[_ ])?(?:loss|Loss|LOSS|损失(?:值|函数)?)(?!_?(?:scale|scaler))\s*(?:[:=]|is)?\s*({NUM})\b"
)
_VAL = re.compile(r"(?:val|eval|valid|validation|test)[_ ]?(?:loss|Loss)|验证", re.I)
_LR = re.compile(rf"(?<![\w])(?:lr|LR|learning[_ ]rate|学习率)\s*[:=]?\s*({NUM})\b")
_GN = re.compile(rf"(?:grad[_ ]?norm|gnorm|梯度范数)\s*[:=]?\s*({NUM})\b", re.I)
OVERFLOW = re.compile(
    r"OVERFLOW!.{0,40}Skipping step|Overflow detected\. Skipping step|"
    r"Gradient overflow\.\s+Skipping step|Grad overflow on iteration|"
    r"loss scale overflow|Skipping step, loss scaler \d+ reducing loss scale",
    re.I,
)
# Where a log says which step it is at without a loss: a tqdm bar ("378/2724 [") or
# DeepSpeed's "step=510, skipped=8".
_AT_STEP = re.compile(r"(?:\|\s*|^\s*)(\d{1,12})/\d{1,12} \[|\bstep=(\d{1,12}), skipped=")
_STEP_ZH = re.compile(r"第\s*(\d{1,12})\s*(?:/\s*(\d{1,12}))?\s*(?:步|次迭代)")
AT_MINIMUM = re.compile(r"Current loss scale already at minimum|minimum loss scale reached", re.I)


def text_log(doc: Text) -> list[Curve]:
    """One curve per rank prefix found (or one for the whole file)."""
    curves: dict[int | None, Curve] = {}
    counters: dict[int | None, int] = {}
    last_step: dict[int | None, float | None] = {}
    bar: dict[int | None, float] = {}
    first_epoch: dict[int | None, int] = {}
    points = 0
    for number, raw in enumerate(doc.text.splitlines(), 1):
        if len(raw) > 100_000:
            continue
        m = _RANK.match(raw) if raw[:8].lstrip()[:1] in ("[", "r", "R") else None
        rank = int(m.group(1) or m.group(2)) if m else None
        line = raw[m.end() :] if m else raw
        curve = curves.get(rank)
        if curve is None:
            curve = curves[rank] = Curve(doc.name, rank)
        at = _AT_STEP.search(line) if ("/" in line or "step=" in line) else None
        if at:
            bar[rank] = last_step[rank] = float(at.group(1) or at.group(2))
            curve.last_step = max(curve.last_step or 0.0, bar[rank])
        low = line.lower()
        if ("overflow" in low or "skipping step" in low) and OVERFLOW.search(line):
            curve.overflows.append((number, last_step.get(rank)))
        if "minimum" in low and AT_MINIMUM.search(line):
            curve.at_minimum.append((number, last_step.get(rank)))
        hf = _HF_DICT.search(line) if "'loss'" in line else None
        if hf:
            items = {k: _float(v) for k, v in _HF_ITEM.findall(hf.group(0))}
            if rank in bar:  # the progress bar numbers the optimizer steps
                step = bar[rank]
            else:
                counters[rank] = counters.get(rank, 0) + 1
                step = float(counters[rank])
                curve.unit = "entry"
            if items.get("loss") is not None:
                curve.loss.append(Point(step, items["loss"], number))  # type: ignore[arg-type]
            if items.get("learning_rate") is not None:
                curve.lr.append(Point(step, items["learning_rate"], number))  # type: ignore[arg-type]
            if items.get("grad_norm") is not None:
                curve.grad_norm.append(Point(step, items["grad_norm"], number))  # type: ignore[arg-type]
            if items.get("epoch") is not None:
                curve.epoch.append(Point(step, items["epoch"], number))  # type: ignore[arg-type]
            last_step[rank] = step
            continue
        loss_m = _LOSS.search(line) if ("loss" in low or "损失" in line) else None
        if loss_m is None:
            continue
        head = low[: loss_m.start() + 12]
        if ("val" in head or "test" in head or "验证" in head) and _VAL.search(head):
            continue
        value = _float(loss_m.group(1))
        if value is None:
            continue
        ep = _EPOCH_ITER.search(line) if "poch" in low else None
        st = _STEP.search(line) or _STEP_ZH.search(line)
        if ep:
            e, i, n = int(ep.group(1)), int(ep.group(2)), int(ep.group(3))
            first_epoch.setdefault(rank, e)  # epochs count from 0 or 1: from the first seen
            step = float((e - first_epoch[rank]) * n + i)
            curve.steps_per_epoch = float(n)
        elif st and st.start() < loss_m.start():
            step = float(st.group(1))
            if st.group(2):
                curve.last_step = float(st.group(2))
        else:
            counters[rank] = counters.get(rank, 0) + 1
            step = float(counters[rank])
            curve.unit = "entry"
        curve.loss.append(Point(step, value, number))
        last_step[rank] = step
        lr_m = _LR.search(line) if ("lr" in low or "learning" in low or "学习率" in line) else None
        if lr_m and (lr := _float(lr_m.group(1))) is not None:
            curve.lr.append(Point(step, lr, number))
        gn_m = _GN.search(line) if ("norm" in low or "梯度范数" in line) else None
        if gn_m and (gn := _float(gn_m.group(1))) is not None:
            curve.grad_norm.append(Point(step, gn, number))
        points += 1
        if points > MAX_POINTS:
            break
    found = [c for c in curves.values() if c.loss or c.overflows or c.at_minimum]
    for c in found:
        _dedupe_steps(c)
    return found


def _dedupe_steps(curve: Curve) -> None:
    """A step logged twice (a progress bar redrawn, an eval line) keeps its first value."""
    for name in ("loss", "lr", "grad_norm"):
        seen: set[float] = set()
        kept = []
        for p in getattr(curve, name):
            if p.step not in seen:
                seen.add(p.step)
                kept.append(p)
        setattr(curve, name, kept)


def finite_share(curve: Curve) -> float:
    if not curve.loss:
        return 0.0
    return sum(math.isfinite(p.value) for p in curve.loss) / len(curve.loss)
