"""TensorBoard event files (``events.out.tfevents.*``) read into :class:`Curve` objects.

Where HF Trainer (``report_to="tensorboard"``), Lightning's ``TensorBoardLogger``, accelerate's
trackers and plain ``torch.utils.tensorboard.SummaryWriter`` jobs put their loss curves. Read
without TensorBoard, TensorFlow or protobuf installed (``--json`` starts fast, and no extra is
needed): a bounded TFRecord reader and a minimal protobuf wire-format decoder for the few
fields a scalar needs.

The framing (TensorBoard's ``record_writer.py``): each record is a little-endian u64 length,
the masked CRC32C of those 8 bytes, the data, and the masked CRC32C of the data; a masked CRC
is ``((crc >> 15 | crc << 17) + 0xA282EAD8) mod 2**32``.
https://github.com/tensorflow/tensorboard/blob/master/tensorboard/summary/writer/record_writer.py

The messages, field numbers from TensorBoard's copies of the protos:
``Event`` {1 wall_time double, 2 step int64, 3 file_version string ("brain.Event:2"),
5 summary} https://github.com/tensorflow/tensorboard/blob/master/tensorboard/compat/proto/event.proto
``Summary`` {1 repeated Value}; ``Value`` {1 tag, 2 simple_value float, 8 tensor, 9 metadata}
https://github.com/tensorflow/tensorboard/blob/master/tensorboard/compat/proto/summary.proto
``TensorProto`` {1 dtype, 2 tensor_shape, 4 tensor_content, 5 float_val, 6 double_val,
7 int_val, 10 int64_val, 13 half_val}
https://github.com/tensorflow/tensorboard/blob/master/tensorboard/compat/proto/tensor.proto
with DT_FLOAT 1, DT_DOUBLE 2, DT_INT32 3, DT_INT64 9, DT_BFLOAT16 14, DT_HALF 19
https://github.com/tensorflow/tensorboard/blob/master/tensorboard/compat/proto/types.proto
``SummaryWriter.add_scalar`` writes ``simple_value`` (``new_style=True``: a rank-0 float
tensor); TensorFlow 2's ``tf.summary.scalar`` a rank-0 tensor in ``tensor_content``.

A folder is a TensorBoard log directory: every file whose name holds ``tfevents`` (the test
TensorBoard itself applies, ``io_wrapper.IsTensorFlowEventsFile``) is an event file, and the
files of one folder are one run. Runs in folders named like ``rank3`` are per-rank curves.
Reads are bounded in files, bytes and records; a damaged record ends its file's read with one
warning naming the file and the byte offset, and the events before it are kept. An argument
from which not one event can be read is bad input (:class:`InputError`, exit 2).
"""

from __future__ import annotations

import itertools
import math
import os
import re
import stat
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ddpadvisor.errors import InputError
from ddpadvisor.evidence.files import text
from ddpadvisor.evidence.files.curve import Curve, Point
from ddpadvisor.evidence.files.found import Read
from ddpadvisor.yamlio import read_bounded

MAX_FILES = 64  # event files read from one folder
MAX_ENTRIES = 20_000  # folder entries looked at while searching for event files
MAX_DEPTH = 4  # folder levels below the attached one
MAX_RECORDS = 2_000_000  # records read over all files of one argument
MAX_DECODED = 1 << 16  # a larger record (an image, a graph, a histogram): skipped unread
HEADER = 12  # u64 length + u32 masked CRC of it
SPENT = "not read: the byte bound was spent on the files before it"
FILE_VERSION = b"brain.Event:"

# -- CRC32C (Castagnoli), slicing by 8 ------------------------------------------------------------

_POLY = 0x82F63B78


def _tables() -> list[list[int]]:
    first = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        first.append(c)
    out = [first]
    for _ in range(7):
        prev = out[-1]
        out.append([(prev[i] >> 8) ^ first[prev[i] & 0xFF] for i in range(256)])
    return out


_T = _tables()
_PAIRS = struct.Struct("<II")


def crc32c(data: bytes | memoryview) -> int:
    t0, t1, t2, t3, t4, t5, t6, t7 = _T
    c = 0xFFFFFFFF
    n = len(data) - len(data) % 8
    for a, b in _PAIRS.iter_unpack(data[:n]):
        a ^= c
        c = (
            t7[a & 0xFF]
            ^ t6[(a >> 8) & 0xFF]
            ^ t5[(a >> 16) & 0xFF]
            ^ t4[a >> 24]
            ^ t3[b & 0xFF]
            ^ t2[(b >> 8) & 0xFF]
            ^ t1[(b >> 16) & 0xFF]
            ^ t0[b >> 24]
        )
    for x in bytes(data[n:]):
        c = t0[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data: bytes | memoryview) -> int:
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# -- TFRecord framing -----------------------------------------------------------------------------


class Damaged(Exception):
    """A record that cannot be read; its byte offset is in the message."""


def records(raw: bytes, offset: int = 0) -> Iterator[tuple[int, memoryview, int]]:
    """``(offset, data, stored data CRC)`` of each record from ``offset``; :class:`Damaged`
    at the first record whose length CRC fails or that runs past the end. The data CRC is
    checked by the caller, only for the records it decodes."""
    view = memoryview(raw)
    end = len(raw)
    while offset < end:
        if end - offset < HEADER:
            raise Damaged(f"truncated record at byte {offset} ({end - offset} bytes left)")
        head = view[offset : offset + 8]
        (length,) = struct.unpack_from("<Q", raw, offset)
        (crc,) = struct.unpack_from("<I", raw, offset + 8)
        if masked_crc(head) != crc:
            raise Damaged(f"bad length checksum at byte {offset}")
        start = offset + HEADER
        if length > end - start - 4:
            raise Damaged(
                f"truncated record at byte {offset} ({length} bytes announced, "
                f"{max(0, end - start - 4)} left)"
            )
        (data_crc,) = struct.unpack_from("<I", raw, start + length)
        yield offset, view[start : start + length], data_crc
        offset = start + length + 4


def is_event_head(head: bytes) -> bool:
    """The start of a TensorBoard event file: TFRecord framing whose first record is an
    ``Event`` naming its ``file_version`` ("brain.Event:...")."""
    try:
        for _, data, crc in records(head):
            if masked_crc(data) != crc:
                return False
            return decode_event(data).version.startswith(FILE_VERSION)
    except (Damaged, Malformed, ValueError, OverflowError, struct.error):
        return False
    return False


# -- protobuf wire format -------------------------------------------------------------------------


class Malformed(Exception):
    """Bytes that are not the protobuf message expected."""


def _varint(buf: memoryview, i: int) -> tuple[int, int]:
    if i < len(buf) and buf[i] < 0x80:  # most keys and lengths are one byte
        return buf[i], i + 1
    out = 0
    for shift in range(0, 70, 7):
        if i >= len(buf):
            raise Malformed("varint runs past the end")
        b = buf[i]
        i += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out, i
    raise Malformed("varint longer than 10 bytes")


def fields(buf: memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """``(field number, wire type, value)``: an int for varint, fixed64 and fixed32 (their raw
    bits), a memoryview for length-delimited fields."""
    i = 0
    n = len(buf)
    while i < n:
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise Malformed("field number 0")
        if wire == 0:
            value, i = _varint(buf, i)
            yield number, wire, value
        elif wire == 1:
            if i + 8 > n:
                raise Malformed("fixed64 runs past the end")
            yield number, wire, int.from_bytes(buf[i : i + 8], "little")
            i += 8
        elif wire == 5:
            if i + 4 > n:
                raise Malformed("fixed32 runs past the end")
            yield number, wire, int.from_bytes(buf[i : i + 4], "little")
            i += 4
        elif wire == 2:
            size, i = _varint(buf, i)
            if size > n - i:
                raise Malformed("length-delimited field runs past the end")
            yield number, wire, buf[i : i + size]
            i += size
        else:  # groups (3, 4) and 6, 7: no TensorBoard message uses them
            raise Malformed(f"wire type {wire}")


def _f32(bits: int) -> float:
    return float(struct.unpack("<f", bits.to_bytes(4, "little"))[0])


def _f64(bits: int) -> float:
    return float(struct.unpack("<d", bits.to_bytes(8, "little"))[0])


def _half(bits: int) -> float:
    return float(struct.unpack("<e", (bits & 0xFFFF).to_bytes(2, "little"))[0])


def _bf16(bits: int) -> float:
    return _f32((bits & 0xFFFF) << 16)


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_BFLOAT16, DT_HALF = 1, 2, 3, 9, 14, 19


def _packed(number: int, wire: int, value: int | memoryview, width: int) -> list[int]:
    """A repeated fixed-width or varint field, packed (one length-delimited run) or not."""
    if isinstance(value, int):
        if wire != {0: 0, 4: 5, 8: 1}[width]:
            raise Malformed(f"field {number} has wire type {wire}")
        return [value]
    if width == 0:
        out, i = [], 0
        while i < len(value):
            v, i = _varint(value, i)
            out.append(v)
        return out
    if len(value) % width:
        raise Malformed(f"packed field {number} is not a multiple of {width} bytes")
    return [int.from_bytes(value[i : i + width], "little") for i in range(0, len(value), width)]


def tensor_scalar(buf: memoryview) -> float | None:
    """The value of a one-element numeric ``TensorProto``, or None (a string, a histogram,
    several elements)."""
    dtype = 0
    values: list[float] = []
    content: memoryview | None = None
    for number, wire, value in fields(buf):
        if number == 1 and wire == 0 and isinstance(value, int):
            dtype = value
        elif number == 2 and isinstance(value, memoryview):
            for dn, _, dim in fields(value):  # TensorShapeProto: 2 dim {1 size}
                if dn == 2 and isinstance(dim, memoryview):
                    for sn, _, size in fields(dim):
                        if sn == 1 and size != 1:
                            return None
        elif number == 4 and isinstance(value, memoryview):
            content = value
        elif number == 5:
            values += [_f32(v) for v in _packed(number, wire, value, 4)]
        elif number == 6:
            values += [_f64(v) for v in _packed(number, wire, value, 8)]
        elif number == 7:
            values += [
                float(_int64(v) if v >= 1 << 31 else v) for v in _packed(number, wire, value, 0)
            ]
        elif number == 10:
            values += [float(_int64(v)) for v in _packed(number, wire, value, 0)]
        elif number == 13:
            conv = _bf16 if dtype == DT_BFLOAT16 else _half
            values += [conv(v) for v in _packed(number, wire, value, 0)]
        elif number == 8:
            return None  # string_val: text, not a number
    if content is not None:
        width = {DT_FLOAT: 4, DT_DOUBLE: 8, DT_INT32: 4, DT_INT64: 8, DT_HALF: 2, DT_BFLOAT16: 2}
        w = width.get(dtype)
        if w is None or len(content) != w:
            return None
        bits = int.from_bytes(content, "little")
        return {
            DT_FLOAT: _f32,
            DT_DOUBLE: _f64,
            DT_HALF: _half,
            DT_BFLOAT16: _bf16,
            DT_INT32: lambda b: float(b - (1 << 32) if b >= 1 << 31 else b),
            DT_INT64: lambda b: float(_int64(b)),
        }[dtype](bits)
    if len(values) == 1:
        return values[0]
    return None


@dataclass
class Event:
    wall_time: float | None = None
    step: int = 0
    version: bytes = b""
    scalars: list[tuple[str, float]] = field(default_factory=list)


def decode_event(data: memoryview) -> Event:
    out = Event()
    for number, wire, value in fields(data):
        if number == 1 and wire == 1 and isinstance(value, int):
            out.wall_time = _f64(value)
        elif number == 2 and wire == 0 and isinstance(value, int):
            out.step = _int64(value)
        elif number == 3 and isinstance(value, memoryview):
            out.version = bytes(value[:64])
        elif number == 5 and isinstance(value, memoryview):
            for vn, _, entry in fields(value):
                if vn == 1 and isinstance(entry, memoryview):
                    got = _value(entry)
                    if got is not None:
                        out.scalars.append(got)
    return out


def _value(buf: memoryview) -> tuple[str, float] | None:
    tag = None
    number_value: float | None = None
    for number, wire, value in fields(buf):
        if number == 1 and isinstance(value, memoryview):
            tag = bytes(value[:200]).decode("utf-8", "replace")
        elif number == 2 and wire == 5 and isinstance(value, int):
            number_value = _f32(value)
        elif number == 8 and isinstance(value, memoryview):
            number_value = tensor_scalar(value)
    if tag is None or number_value is None:
        return None
    return tag, number_value


# -- reading files --------------------------------------------------------------------------------


@dataclass
class Scalar:
    step: float
    value: float
    record: int  # its record's number in its file (the file_version record is 0)


@dataclass
class EventFile:
    path: Path
    label: str  # the path shown in warnings and citations (relative to the attached folder)
    tags: dict[str, list[Scalar]] = field(default_factory=dict)
    events: int = 0
    first_time: float | None = None
    last_time: float | None = None
    problem: str | None = None  # why the read ended early, or why nothing was read


def read_event_file(path: Path, label: str, budget: list[int]) -> EventFile:
    """The scalars of one event file; ``budget`` is [bytes, records] left, spent here. An
    unreadable file (special, missing) raises InputError."""
    out = EventFile(path, label)
    raw, longer = read_bounded(path, max(0, budget[0]))
    budget[0] -= len(raw)
    if not raw:
        out.problem = "empty (no record)" if not longer else SPENT
        return out
    bad_data = 0
    malformed = 0
    damage = stopped = None
    try:
        for k, (offset, data, crc) in enumerate(records(raw)):
            budget[1] -= 1
            if budget[1] < 0:
                stopped = f"more than {MAX_RECORDS} records: the read stopped at byte {offset}"
                break
            if len(data) > MAX_DECODED:
                continue
            if masked_crc(data) != crc:
                if k == 0:
                    raise Damaged(f"bad data checksum in the record at byte {offset}")
                bad_data += 1
                continue
            try:
                event = decode_event(data)
            except (Malformed, ValueError, OverflowError, struct.error) as exc:
                if k == 0:
                    raise Damaged(f"the record at byte {offset} is not an Event ({exc})") from None
                malformed += 1
                continue
            if k == 0 and not event.version.startswith(FILE_VERSION):
                raise Damaged("its first record is not an Event naming a file_version")
            out.events += 1
            if event.wall_time is not None and math.isfinite(event.wall_time):
                out.first_time = out.first_time if out.first_time is not None else event.wall_time
                out.last_time = event.wall_time
            for tag, value in event.scalars:
                out.tags.setdefault(tag, []).append(Scalar(float(event.step), value, k))
    except Damaged as exc:
        damage = str(exc)
    parts = []
    if longer:
        parts.append(
            f"only its first {len(raw)} bytes are read (at most {text.MAX_BYTES} bytes per "
            "attached file or folder)"
        )
    elif damage:
        kept = f"; the {out.events} events before it are read" if out.events else ""
        parts.append(damage + kept)
    if stopped:
        parts.append(stopped)
    if bad_data or malformed:
        parts.append(
            f"{bad_data + malformed} record(s) skipped (bad data checksum or not an Event)"
        )
    out.problem = "; ".join(parts) or None
    return out


_RANK_DIR = re.compile(r"(?:^|[^a-z0-9])rank[_-]?(\d{1,6})$", re.I)


def find_event_files(folder: Path) -> tuple[list[Path], list[str]]:
    """Event files under ``folder`` (``tfevents`` in the name, regular files, symlinked folders
    not followed), sorted by folder then name; and notes on the bounds hit."""
    found: list[Path] = []
    notes: list[str] = []
    seen = 0
    stack: list[tuple[Path, int]] = [(folder, 0)]
    while stack:
        here, depth = stack.pop()
        try:
            with os.scandir(here) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if seen > MAX_ENTRIES:
                notes.append(f"more than {MAX_ENTRIES} entries; the search stopped there")
                stack.clear()
                break
            try:
                if entry.is_dir(follow_symlinks=False):
                    if depth < MAX_DEPTH:
                        stack.append((Path(entry.path), depth + 1))
                elif "tfevents" in entry.name and not entry.name.endswith(".profile-empty"):
                    found.append(Path(entry.path))
            except OSError:
                continue
    found.sort(key=lambda p: (str(p.parent), _started(p), p.name))
    if len(found) > MAX_FILES:  # the files that hold something first, in that order
        kept = set(sorted(found, key=lambda p: _size(p) == 0)[:MAX_FILES])
        notes.append(f"{len(found)} event files; {MAX_FILES} are read, empty ones last")
        found = [p for p in found if p in kept]
    return found, notes


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _started(path: Path) -> int:
    """The time stamp SummaryWriter puts in the name (``events.out.tfevents.<time>.<host>``)."""
    m = re.search(r"tfevents\.(\d{1,12})", path.name)
    return int(m.group(1)) if m else 0


# -- which tag is which series --------------------------------------------------------------------


def _norm(tag: str) -> str:
    return re.sub(r"[\s\-.]+", "_", tag.strip().lower())


_EVALISH = re.compile(r"(?:^|[/_])(?:eval|val|valid|validation|test|dev)(?:[/_]|$)")

# in order of preference: the exact tags HF Trainer, Lightning, DeepSpeed's monitor and the
# SummaryWriter tutorials write
_LOSS = (
    "train/loss",
    "loss",
    "train_loss",
    "train_loss_step",
    "loss/train",
    "train/train_loss",
    "training_loss",
    "train/samples/train_loss",
    "train_loss/step",
    "losses/train",
)
_EVAL = (
    "eval/loss",
    "val_loss",
    "val/loss",
    "loss/val",
    "loss/validation",
    "loss/test",
    "eval_loss",
    "validation_loss",
    "valid/loss",
    "test/loss",
    "test_loss",
    "val_loss_epoch",
)
_LR = ("train/learning_rate", "learning_rate", "lr", "train/lr", "train/samples/lr", "lr/train")
_GN = ("train/grad_norm", "grad_norm", "gradient_norm", "train/gradient_norm", "grad_norm/total")
_SCALE = (
    "train/samples/loss_scale",
    "loss_scale",
    "train/loss_scale",
    "scaler/scale",
    "grad_scale",
    "amp/loss_scale",
)
_EPOCH = ("train/epoch", "epoch")


def pick(tags: dict[str, list[Scalar]]) -> dict[str, str]:
    """Series name (loss, eval_loss, lr, grad_norm, loss_scale, epoch) -> the tag read for it."""
    by_norm: dict[str, str] = {}
    for tag in tags:
        by_norm.setdefault(_norm(tag), tag)
    out: dict[str, str] = {}
    for name, wanted in (
        ("loss", _LOSS),
        ("eval_loss", _EVAL),
        ("lr", _LR),
        ("grad_norm", _GN),
        ("loss_scale", _SCALE),
        ("epoch", _EPOCH),
    ):
        for w in wanted:
            if _norm(w) in by_norm:
                out[name] = by_norm[_norm(w)]
                break
    rest = sorted(tags, key=lambda t: -len(tags[t]))
    if "loss" not in out:
        for tag in rest:
            n = _norm(tag)
            if (
                "loss" in n
                and "scale" not in n
                and not _EVALISH.search(n)
                and not n.endswith(("_epoch", "/epoch"))
            ):
                out["loss"] = tag
                break
    if "eval_loss" not in out:
        for tag in rest:
            n = _norm(tag)
            if "loss" in n and "scale" not in n and _EVALISH.search(n):
                out["eval_loss"] = tag
                break
    if "lr" not in out:  # Lightning's LearningRateMonitor: "lr-AdamW", "lr-SGD/pg1"
        for tag in sorted(tags):
            n = _norm(tag)
            if n.startswith(("lr_", "lr/")) or n.endswith(("/lr", "/learning_rate")):
                out["lr"] = tag
                break
    if "grad_norm" not in out:
        for tag in rest:
            n = _norm(tag)
            if ("grad_norm" in n or "gradient_norm" in n) and not _EVALISH.search(n):
                out["grad_norm"] = tag
                break
    return out


# -- runs -----------------------------------------------------------------------------------------


@dataclass
class Run:
    label: str  # the run's folder (or file) as shown
    rank: int | None
    files: list[EventFile]


def _merge(files: list[EventFile], tag: str) -> list[Scalar]:
    """One tag over a run's files in the order written: a step at or below one already seen
    (a restart from a checkpoint) drops the points it replaces, as TensorBoard dropped
    "orphaned" events after a crash and restart."""
    out: list[Scalar] = []
    for f in files:
        for s in f.tags.get(tag, []):
            if out and s.step <= out[-1].step:
                while out and out[-1].step >= s.step:
                    out.pop()
            out.append(s)
    return out


def _reset(files: list[EventFile], tag: str) -> bool:
    """The tag's step goes back within one file: a counter restarted by hand (the batch index
    of each epoch), not a restart of the job, which opens a new file."""
    return any(b.step < a.step for f in files for a, b in itertools.pairwise(f.tags.get(tag, [])))


def _overlap(a: EventFile, b: EventFile) -> bool:
    """Two files written at the same time (several processes into one folder)."""
    a0, a1, b0, b1 = a.first_time, a.last_time, b.first_time, b.last_time
    if a0 is None or a1 is None or b0 is None or b1 is None:
        return False
    short = min(a1 - a0, b1 - b0)
    return min(a1, b1) - max(a0, b0) > 0.5 * short > 0


def curve_of(run: Run) -> Curve:
    one = len(run.files) == 1
    curve = Curve(run.files[0].label if one else run.label, run.rank)
    if one:
        curve.at = " record "
    counts: dict[str, list[Scalar]] = {}
    for f in run.files:
        for tag, values in f.tags.items():
            counts.setdefault(tag, []).extend(values)
    chosen = pick(counts)
    reset = "loss" in chosen and _reset(run.files, chosen["loss"])
    for name, tag in chosen.items():
        if reset:  # every value in the order written, numbered as entries
            written = [s for f in run.files for s in f.tags.get(tag, [])]
            merged = [Scalar(float(i), s.value, s.record) for i, s in enumerate(written, 1)]
        else:
            merged = _merge(run.files, tag)
        points = [Point(s.step, s.value, s.record if one else None) for s in merged]
        if name == "loss_scale":
            curve.loss_scale = points
        else:
            getattr(curve, name).extend(points)
    if reset:
        curve.unit = "entry"
    elif "loss" in chosen and "samples" in _norm(chosen["loss"]):
        curve.unit = "sample"  # DeepSpeed's monitor puts samples seen on the x axis
    curve.tags = dict(chosen)
    _epoch_steps(curve)
    _scale_drops(curve)
    if curve.loss:
        curve.last_step = max(p.step for p in curve.loss)
    return curve


def _epoch_steps(curve: Curve) -> None:
    from ddpadvisor.evidence.files.logs import _epoch_steps as whole_epochs

    eps = [p for p in curve.epoch if math.isfinite(p.value)]
    if len(eps) < 2:
        return
    if any(not float(p.value).is_integer() for p in eps):  # HF: a fractional epoch per log
        a, b = eps[0], eps[-1]
        if b.value > a.value and b.step > a.step:
            curve.steps_per_epoch = round((b.step - a.step) / (b.value - a.value), 3)
        return
    whole_epochs(curve)


def _scale_drops(curve: Curve) -> None:
    """Each fall of the logged loss scale follows at least one overflow (GradScaler halves it
    on every step whose gradients hold inf or NaN, DeepSpeed's dynamic scaler after its
    hysteresis): counted as overflows at the step it is first seen lower."""
    pts = [p for p in curve.loss_scale if math.isfinite(p.value) and p.value > 0]
    for a, b in itertools.pairwise(pts):
        if b.value < a.value:
            curve.overflows.append((b.line or 0, b.step))
    if curve.overflows:
        curve.overflow_from = "scale"


def _scalars_split(f: EventFile) -> bool:
    """A file ``SummaryWriter.add_scalars(main, {key: value})`` wrote: it sits in a folder
    named ``<main>_<key>`` (a "/" in ``main`` written as "_") and holds the tag ``main``. Its
    tags are renamed to the folder's name, so that ``Loss_train`` and ``Loss_val`` are told
    apart. https://github.com/pytorch/pytorch/blob/main/torch/utils/tensorboard/writer.py"""
    folder = f.path.parent.name
    renamed = {}
    for tag, values in f.tags.items():
        prefix = tag.replace("/", "_") + "_"
        if not (folder.startswith(prefix) and len(folder) > len(prefix)):
            return False
        renamed[folder] = values
    if not renamed:
        return False
    f.tags = renamed
    return True


def runs_of(files: list[EventFile], root: Path | None) -> tuple[list[Run], list[str]]:
    """Event files grouped into runs: one per folder (the ``add_scalars`` folders with the
    folder above them), or one per file where several files of one folder were written at
    the same time (one per process)."""
    groups: dict[Path, list[EventFile]] = {}
    split: set[int] = set()
    for f in files:
        if not f.events:
            continue
        folder = f.path.parent
        if _scalars_split(f):
            split.add(id(f))
            if root is not None and folder != root:
                folder = folder.parent
        groups.setdefault(folder, []).append(f)
    out: list[Run] = []
    notes: list[str] = []
    for folder, members in groups.items():
        label = _label(folder, root)
        m = _RANK_DIR.search(folder.name)
        rank = int(m.group(1)) if m and root is not None and folder != root else None
        own = [f for f in members if id(f) not in split]  # add_scalars files run alongside
        if len(own) > 1 and any(_overlap(a, b) for i, a in enumerate(own) for b in own[i + 1 :]):
            notes.append(
                f"{label}: {len(own)} event files written at the same time (one per "
                "process?); each is read as its own run"
            )
            out.extend(Run(f.label, None, [f]) for f in own)
            out.extend(Run(f.label, None, [f]) for f in members if id(f) in split)
        else:
            out.append(Run(label, rank, members))
    return out, notes


def _label(path: Path, root: Path | None) -> str:
    if root is None:
        return path.name
    try:
        rel = path.relative_to(root)
    except ValueError:
        return str(path)
    return str(Path(root.name) / rel) if str(rel) != "." else root.name


def read(path: Path) -> Read:
    """An event file or a TensorBoard log folder; InputError (exit 2) when not one event can
    be read from it."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError("no such file or folder", path) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path) from None
    budget = [text.MAX_BYTES, MAX_RECORDS]
    out = Read("tensorboard")
    if stat.S_ISDIR(st.st_mode):
        root: Path | None = path
        found, notes = find_event_files(path)
        out.warnings.extend(f"{path}: {n}" for n in notes)
        if not found:
            raise InputError(
                "a folder with no TensorBoard event file (events.out.tfevents.*) and no "
                "Lightning metrics.csv in it; attach the files in it one by one",
                path,
            )
        files = []
        for p in found:
            label = _label(p, path)
            try:
                files.append(read_event_file(p, label, budget))
            except InputError as exc:  # a FIFO or a vanished file among them: skipped
                out.warnings.append(f"{label}: {exc.message}; skipped")
    else:
        root = None
        files = [read_event_file(path, str(path), budget)]
    readable = [f for f in files if f.events]
    if not readable:
        first = next((f for f in files if f.problem), None)
        why = first.problem if first else "nothing readable"
        if root is None:
            raise InputError(f"not a readable TensorBoard event file: {why}", path)
        raise InputError(
            f"none of its {len(files)} event file(s) holds a readable event (first: "
            f"{first.label if first else path}: {why})",
            path,
        )
    empty = [f for f in files if f.problem and f.problem.startswith("empty")]
    spent = [f for f in files if f.problem == SPENT]
    for f in files:
        if f.problem and f not in empty and f not in spent:
            out.warnings.append(f"{f.label}: {f.problem}")
    if spent:
        out.warnings.append(
            f"{path}: {len(spent)} event file(s) not read, the {text.MAX_BYTES} bytes read "
            f"from one argument spent on the files before them (first: {spent[0].label})"
        )
    if empty:
        out.warnings.append(
            f"{path}: {len(empty)} of its event files are empty (first: {empty[0].label})"
        )
    runs, notes = runs_of(readable, root)
    out.notes.extend(notes)
    for run in runs:
        curve = curve_of(run)
        if curve.loss or curve.lr or curve.grad_norm or curve.eval_loss or curve.overflows:
            out.curves.append(curve)
    if not out.curves:
        shown = sorted({t for f in readable for t in f.tags})[:8]
        out.warnings.append(
            f"{path}: TensorBoard events read, but no loss, learning rate or grad norm "
            f"scalar among their tags ({', '.join(shown) or 'no scalars'}); nothing read"
        )
    else:
        same: dict[str, list[Curve]] = {}
        for c in out.curves:
            same.setdefault(", ".join(f"{k} <- {v}" for k, v in c.tags.items()), []).append(c)
        for named, group in same.items():
            more = f" (the same in {len(group) - 1} more runs)" if len(group) > 1 else ""
            out.notes.append(f"{group[0].file}: TensorBoard scalars read: {named}{more}")
        for c in out.curves:
            if c.unit == "entry":
                out.notes.append(
                    f"{c.file}: the step of {c.tags['loss']} goes back within one file (a "
                    "counter restarted each epoch?): its values are read in the order written, "
                    "and no step count is read from them"
                )
        unranked = [c for c in out.curves if c.rank is None and c.loss]
        if len(unranked) > 1:  # the run facts.main_curve reads: the longest
            main = max(unranked, key=lambda c: len(c.loss))
            out.notes.append(
                f"{path}: {len(unranked)} runs with a loss; the loss pattern and the "
                f"schedule are read from the longest, {main.file}"
            )
    return out
