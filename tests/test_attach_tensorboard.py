"""--attach of TensorBoard event files and log folders, read without TensorBoard installed.

The files under attach_fixtures/tensorboard/ were written by the real writer
(``torch.utils.tensorboard.SummaryWriter``, and the HF Trainer with ``report_to=tensorboard``;
see attach_fixtures/make_tensorboard.py). CI has no ``tensorboard`` package, so the other cases
are written here by :func:`event_file`, a writer of our own that the first test checks byte for
byte against the real writer's files.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddpadvisor.errors import InputError
from ddpadvisor.evidence.files import tensorboard as tb
from ddpadvisor.evidence.files.detect import read_attached, split_kind
from ddpadvisor.evidence.gather import Sources, gather
from ddpadvisor.observation import Observation
from ddpadvisor.report.present import diagnose

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TB = HERE / "attach_fixtures" / "tensorboard"
WRITER = b"tensorboard.summary.writer.event_file_writer"


# -- a writer of our own: TFRecord framing and the protobuf encoding of Event ---------------------


def _crc32c(data: bytes) -> int:  # bit by bit: independent of the reader's table
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def _masked(data: bytes) -> int:
    c = _crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(number: int, wire: int, payload: bytes) -> bytes:
    key = _varint(number << 3 | wire)
    return key + (_varint(len(payload)) + payload if wire == 2 else payload)


def record(data: bytes) -> bytes:
    head = struct.pack("<Q", len(data))
    return head + struct.pack("<I", _masked(head)) + data + struct.pack("<I", _masked(data))


def event(
    wall: float,
    step: int = 0,
    *,
    version: str | None = None,
    scalars: Any = (),
    tensor: bool = False,
) -> bytes:
    """An Event as SummaryWriter serialises it: fields in number order, step left out at 0."""
    out = _field(1, 1, struct.pack("<d", wall))
    if step:
        out += _field(2, 0, _varint(step))
    if version is not None:  # with the SourceMetadata SummaryWriter adds to the first event
        out += _field(3, 2, version.encode())
        out += _field(10, 2, _field(1, 2, WRITER))
    if scalars:
        values = b""
        for tag, value in scalars:
            if tensor:  # TensorProto {dtype DT_FLOAT, tensor_shape {}, float_val [value]}
                proto = _field(1, 0, _varint(1)) + _field(2, 2, b"")
                proto += _field(5, 2, struct.pack("<f", value))
                body = _field(1, 2, tag.encode()) + _field(8, 2, proto)
            else:
                body = _field(1, 2, tag.encode()) + _field(2, 5, struct.pack("<f", value))
            values += _field(1, 2, body)
        out += _field(5, 2, values)
    return out


def event_file(
    path: Path, series: dict[str, list[tuple[int, float]]], t0: float = 1.7e9, **kw: Any
) -> Path:
    """An event file holding ``series`` (tag -> [(step, value)]), one event per value."""
    path.parent.mkdir(parents=True, exist_ok=True)
    blob = record(event(t0, version="brain.Event:2"))
    points = sorted((s, tag, v) for tag, pts in series.items() for s, v in pts)
    for i, (step, tag, value) in enumerate(points):
        blob += record(event(t0 + 1 + i, step, scalars=[(tag, value)], **kw))
    path.write_bytes(blob)
    return path


def falling(n: int = 60, start: int = 1) -> list[tuple[int, float]]:
    return [
        (s, 3.0 * math.exp(-s / 40) + 1.0 + 0.01 * math.sin(s * 7.1))
        for s in range(start, start + n)
    ]


def facts(engine: Any, *args: str | Path) -> dict[str, Observation]:
    got = gather(engine.kb, Sources(attach=[str(a) for a in args]))
    return {o.fact: o for o in got.observations}


def warnings(engine: Any, *args: str | Path) -> list[str]:
    return gather(engine.kb, Sources(attach=[str(a) for a in args])).warnings


def _cli(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ddpadvisor", *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def _refused(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    for w in words:
        assert w in proc.stderr, proc.stderr


def _one(path: str | Path) -> Path:
    (found,) = Path(path).rglob("*tfevents*")
    return found


# -- the writer against the real one ------------------------------------------------------------


@pytest.mark.parametrize("run", ["hf_falls", "oscillates", "nan", "ranks/rank1"])
def test_our_writer_writes_what_summarywriter_wrote(run: str) -> None:
    """Each record of the real file, re-encoded by our writer from what the reader decoded,
    is the same bytes: the framing, the CRCs and the Event encoding agree."""
    raw = _one(TB / run).read_bytes()
    n = 0
    for k, (offset, data, _) in enumerate(tb.records(raw)):
        ev = tb.decode_event(data)
        assert ev.wall_time is not None
        ours = event(
            ev.wall_time,
            ev.step,
            version=ev.version.decode() if k == 0 else None,
            scalars=ev.scalars,
        )
        end = offset + tb.HEADER + len(data) + 4
        assert record(ours) == raw[offset:end], (run, k)
        n += 1
    assert n > 100  # every record, the file_version one included


def test_new_style_scalars_are_tensors_and_read_the_same() -> None:
    got = tb.read_event_file(_one(TB / "new_style"), "x", [1 << 26, 10**6])
    assert len(got.tags["train/loss"]) == 120 and len(got.tags["loss_scale"]) == 120
    assert got.tags["loss_scale"][0].value == 65536.0 and got.tags["loss_scale"][-1].value == 1.0
    raw = _one(TB / "new_style").read_bytes()
    assert b"simple_value" not in raw and b"scalars" in raw  # the tensor form's plugin name


def test_crc32c_check_value() -> None:
    assert tb.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value (RFC 3720)
    assert tb.crc32c(bytes(range(256)) * 3) == _crc32c(bytes(range(256)) * 3)


# -- what the real files settle -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("run", "text_log", "expect"),
    [
        (
            "hf_trainer",
            TB / "hf_trainer.trainer_state.json",
            {"warmup_steps": 22, "eval_loss_falls": True, "grad_norm_nonfinite_logged": False},
        ),
        (
            "lightning_spikes",
            HERE / "attach_fixtures" / "made" / "lightning_spikes.metrics.csv",
            {"loss_pattern": "spikes", "noise_only_early": False, "warmup_steps": 0},
        ),
    ],
)
def test_a_tensorboard_log_settles_what_the_same_runs_text_log_settles(
    engine: Any, run: str, text_log: Path, expect: dict[str, Any]
) -> None:
    """The HF Trainer's TensorBoard log against the same run's trainer_state.json, and
    Lightning's TensorBoardLogger against its CSVLogger on the same job: fact for fact, with
    the same details."""
    got = facts(engine, TB / run)
    other = facts(engine, text_log)
    assert {k: v.value for k, v in got.items()} == {k: v.value for k, v in other.items()}
    assert {k: v.detail for k, v in got.items()} == {k: v.detail for k, v in other.items()}
    assert {k: got[k].value for k in expect} == expect


def test_add_scalars_folders_are_one_run(engine: Any) -> None:
    """add_scalars("Loss", {"train", "valid"}) writes Loss_train/ and Loss_valid/ beside the
    run's own file, all under the tag "Loss": read as one run, train and eval told apart."""
    got = tb.read(TB / "add_scalars")
    (curve,) = got.curves
    assert curve.tags == {"lr": "lr", "loss": "Loss_train", "eval_loss": "Loss_valid"}
    assert len(curve.loss) == 100 and len(curve.eval_loss) == 10
    fell = facts(engine, TB / "add_scalars")["eval_loss_falls"]
    assert fell.value is False and "lowest 2.294 at step 40" in fell.detail


def test_an_eval_loss_that_fell_and_rose_again_is_left_open(tmp_path: Path, engine: Any) -> None:
    evals = [
        (s, v) for s, v in zip(range(20, 140, 20), (3.0, 2.2, 1.8, 1.7, 2.0, 2.3), strict=True)
    ]
    run = tmp_path / "run"
    event_file(run / "events.out.tfevents.1.h", {"train/loss": falling(120), "eval/loss": evals})
    assert "eval_loss_falls" not in facts(engine, run)
    assert any("whether it still falls is left to you" in w for w in warnings(engine, run))


def test_hf_trainer_run_folder_cites_records(engine: Any) -> None:
    got = facts(engine, TB / "hf_trainer")
    assert got["grad_norm_nonfinite_logged"].value is False
    assert "loss_pattern" not in got
    assert got["eval_loss_falls"].value is True and got["eval_loss_falls"].source == "log"
    assert "8 evaluations" in got["eval_loss_falls"].detail
    assert got["warmup_steps"].where.endswith(" record 50")
    notes = warnings(engine, TB / "hf_trainer")
    assert any("train/loss" in w and "train/learning_rate" in w for w in notes)
    assert any("the loss falls from 3.896" in w for w in notes)


@pytest.mark.parametrize(
    ("run", "expect"),
    [
        (
            "hf_falls",
            {"warmup_steps": 20, "eval_loss_falls": True, "grad_norm_nonfinite_logged": False},
        ),
        (
            "oscillates",
            {"loss_pattern": "oscillates", "noise_only_early": False, "eval_loss_falls": False},
        ),
        ("nan", {"loss_pattern": "nan", "grad_norm_nonfinite_logged": True}),
        ("ranks", {"loss_spike_single_rank": True}),
        ("new_style", {"loss_scale_overflow_logged": True, "loss_scale_overflow_persists": True}),
    ],
)
def test_real_runs(engine: Any, run: str, expect: dict[str, Any]) -> None:
    got = facts(engine, TB / run)
    assert {k: got[k].value for k in expect if k in got} == expect
    if run == "hf_falls":
        assert "loss_pattern" not in got
    if run == "nan":
        assert "step 60" in got["loss_pattern"].detail
    if run == "ranks":
        where = got["loss_spike_single_rank"].where
        assert where.startswith("ranks/rank1/events.out.tfevents.") and where.endswith(" record 70")


def test_no_confident_false_positive_on_a_correct_run(engine: Any) -> None:
    for run in ("hf_trainer", "hf_falls", "lightning_spikes"):
        got = gather(engine.kb, Sources(attach=[str(TB / run)]))
        lead = diagnose(engine, got.observations, warnings=got.warnings).causes[0]
        assert lead.id == "other" or lead.score < 0.30, (run, lead.id, lead.score)


def test_a_folder_on_the_command_line() -> None:
    proc = _cli("--json", "--attach", f"{TB / 'nan'}/")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    pattern = next(f for f in doc["facts"] if f["fact"] == "loss_pattern")
    assert pattern["value"] == "nan" and pattern["source"] == "log"
    proc = _cli("report", "--attach", f"tensorboard:{TB / 'oscillates'}")
    assert proc.returncode == 0 and "oscillat" in proc.stdout, proc.stderr
    # the kind named on a text file: read as an event file, and refused as one
    _refused(_cli("--json", "--attach", f"tensorboard:{TB / 'README.md'}"), "at byte 0")


# -- detection and kinds --------------------------------------------------------------------------


def test_detected_by_content_not_by_name(tmp_path: Path) -> None:
    renamed = tmp_path / "metrics.bin"
    shutil.copy(_one(TB / "oscillates"), renamed)
    got = read_attached(renamed)
    assert got.kind == "tensorboard" and got.curves[0].tags["loss"] == "Loss/train"
    assert split_kind(f"tensorboard:{renamed}") == ("tensorboard", renamed)
    assert read_attached(renamed, "tensorboard").kind == "tensorboard"
    # a text file named like an event file is still read as text
    text = tmp_path / "events.out.tfevents.notes.txt"
    text.write_text("".join(f"step {i} loss {3 - i / 50:.3f}\n" for i in range(1, 40)))
    assert read_attached(text).kind == "log"


def test_tag_names_of_the_common_writers() -> None:
    def chosen(*tags: str) -> dict[str, str]:
        return tb.pick({t: [tb.Scalar(1, 1.0, 1)] for t in tags})

    # Lightning: logged names, LearningRateMonitor's "lr-<optimizer>"
    assert chosen("train_loss_step", "train_loss_epoch", "val_loss", "lr-AdamW", "epoch") == {
        "loss": "train_loss_step",
        "eval_loss": "val_loss",
        "lr": "lr-AdamW",
        "epoch": "epoch",
    }
    # DeepSpeed's monitor: samples on the x axis
    got = chosen("Train/Samples/train_loss", "Train/Samples/lr", "Train/Samples/loss_scale")
    assert got == {
        "loss": "Train/Samples/train_loss",
        "lr": "Train/Samples/lr",
        "loss_scale": "Train/Samples/loss_scale",
    }
    # a custom name still found; an eval or scale series is never the training loss
    assert chosen("metrics/total_loss", "metrics/val_total_loss", "amp/loss_scale")["loss"] == (
        "metrics/total_loss"
    )
    assert "loss" not in chosen("valid/loss", "loss_scale")


def test_deepspeed_samples_axis_reads_no_step_facts(tmp_path: Path, engine: Any) -> None:
    run = tmp_path / "ds"
    lr = [(s * 32, 1e-4 * min(1.0, s / 10)) for s in range(1, 61)]
    event_file(
        run / "events.out.tfevents.1.host",
        {"Train/Samples/train_loss": [(s * 32, v) for s, v in falling()], "Train/Samples/lr": lr},
    )
    got = facts(engine, run)
    assert "warmup_steps" not in got  # the x axis counts samples, not optimizer steps


# -- several files: restarts, concurrent writers, ranks -------------------------------------------


def test_a_restart_replaces_the_steps_it_repeats(tmp_path: Path) -> None:
    run = tmp_path / "run"
    first = [(s, 2.0) for s in range(1, 80)]
    second = [(s, 1.0) for s in range(50, 120)]
    event_file(run / "events.out.tfevents.1000.host.1.0", {"loss": first}, t0=1000)
    event_file(run / "events.out.tfevents.2000.host.2.0", {"loss": second}, t0=2000)
    (curve,) = tb.read(run).curves
    steps = [p.step for p in curve.loss]
    assert steps == sorted(set(steps)) and steps[0] == 1 and steps[-1] == 119
    assert {p.value for p in curve.loss if p.step >= 50} == {1.0}
    assert curve.file == "run" and curve.where(None) == "run"


def test_a_step_counter_restarted_each_epoch_is_read_in_write_order(
    tmp_path: Path, engine: Any
) -> None:
    """add_scalar("loss", v, batch_idx) in every epoch: the steps go back within one file.
    The values are read in the order written (entries), not cut to the last epoch."""
    path = tmp_path / "run" / "events.out.tfevents.1.h"
    blob = record(event(1.0, version="brain.Event:2"))
    k = 0
    for _epoch in range(3):
        for batch in range(40):
            k += 1
            loss = 3.0 * math.exp(-k / 40) + 1.0
            blob += record(event(1.0 + k, batch, scalars=[("loss", loss), ("lr", 1e-3 * k)]))
    path.parent.mkdir()
    path.write_bytes(blob)
    (curve,) = tb.read(path.parent).curves
    assert curve.unit == "entry" and len(curve.loss) == 120
    assert [p.step for p in curve.loss[:3]] == [1.0, 2.0, 3.0] and curve.loss[0].value > 3.9
    assert "warmup_steps" not in facts(engine, path.parent)  # no step count from entries
    assert any("goes back within one file" in w for w in warnings(engine, path.parent))


def test_files_written_at_once_are_separate_runs(tmp_path: Path) -> None:
    run = tmp_path / "run"
    event_file(run / "events.out.tfevents.1000.host.11.0", {"loss": falling()}, t0=1000)
    event_file(run / "events.out.tfevents.1000.host.12.0", {"loss": falling()}, t0=1000.5)
    got = tb.read(run)
    assert len(got.curves) == 2 and all(c.rank is None for c in got.curves)
    assert any("written at the same time" in n for n in got.notes)


def test_several_runs_in_one_folder_name_the_one_read(tmp_path: Path, engine: Any) -> None:
    logs = tmp_path / "lightning_logs"
    event_file(logs / "version_0" / "events.out.tfevents.1.h", {"train_loss": falling(30)})
    event_file(logs / "version_1" / "events.out.tfevents.2.h", {"train_loss": falling(90)})
    note = [w for w in warnings(engine, logs) if "2 runs with a loss" in w]
    assert len(note) == 1 and "lightning_logs/version_1" in note[0]
    from ddpadvisor.evidence.sources.attach import series

    plotted = series(logs).series["loss"]
    assert list(plotted) == [0] and len(plotted[0]) == 90  # the run read, not the other one


def test_rank_folders_are_ranks(tmp_path: Path) -> None:
    for r in (0, 1, 2):
        event_file(tmp_path / "logs" / f"rank_{r}" / "events.out.tfevents.5.h", {"loss": falling()})
    got = tb.read(tmp_path / "logs")
    assert sorted(c.rank for c in got.curves) == [0, 1, 2]
    assert [n for n in got.notes if "scalars read" in n] == [
        "logs/rank_0/events.out.tfevents.5.h: TensorBoard scalars read: loss <- loss "
        "(the same in 2 more runs)"
    ]


# -- bad inputs -----------------------------------------------------------------------------------


def test_truncated_file_keeps_the_events_before_the_cut(engine: Any, tmp_path: Path) -> None:
    raw = _one(TB / "nan").read_bytes()
    cut = tmp_path / "events.out.tfevents.1.cut"
    cut.write_bytes(raw[: len(raw) * 3 // 4 + 5])
    ws = warnings(engine, cut)
    hits = [w for w in ws if "truncated record at byte" in w]
    assert len(hits) == 1 and "events before it are read" in hits[0] and "\n" not in hits[0]
    assert facts(engine, cut)["loss_pattern"].value == "nan"


def test_bad_data_checksum_mid_file_skips_that_record(tmp_path: Path) -> None:
    raw = bytearray(_one(TB / "hf_falls").read_bytes())
    offsets = [o for o, _, _ in tb.records(bytes(raw))]
    raw[offsets[10] + tb.HEADER + 3] ^= 0xFF  # a byte inside the 11th record's data
    bad = tmp_path / "events.out.tfevents.1.bad"
    bad.write_bytes(bytes(raw))
    got = read_attached(bad)
    assert got.warnings == [f"{bad}: 1 record(s) skipped (bad data checksum or not an Event)"]
    assert got.curves and len(got.curves[0].loss) + len(got.curves[0].lr) >= 119


@pytest.mark.parametrize(
    "damage", ["length crc", "huge length", "first data crc", "empty", "short"]
)
def test_nothing_readable_is_exit_2_with_one_line(tmp_path: Path, damage: str) -> None:
    good = _one(TB / "hf_falls").read_bytes()
    path = tmp_path / "events.out.tfevents.1700000000.host"
    if damage == "length crc":
        blob = good[:8] + b"\x00\x00\x00\x00" + good[12:]
    elif damage == "huge length":  # a length of 2**62 with a valid checksum of it
        head = struct.pack("<Q", 1 << 62)
        blob = head + struct.pack("<I", _masked(head)) + good[12:]
    elif damage == "first data crc":
        blob = good[:14] + bytes([good[14] ^ 1]) + good[15:]
    elif damage == "empty":
        blob = b""
    else:
        blob = good[:7]
    path.write_bytes(blob)
    with pytest.raises(InputError) as info:
        read_attached(path)
    assert str(path) in info.value.one_line()
    proc = _cli("--json", "--attach", str(path))
    _refused(proc, "events.out.tfevents.1700000000.host")
    if damage != "empty":
        assert "at byte 0" in proc.stderr, proc.stderr
    if damage == "huge length":
        assert str(1 << 62) in proc.stderr


def test_a_fifo_is_refused_alone_and_skipped_in_a_folder(engine: Any, tmp_path: Path) -> None:
    fifo = tmp_path / "run" / "events.out.tfevents.9.fifo"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    _refused(_cli("--json", "--attach", str(fifo), timeout=30), "not a regular file")
    shutil.copy(_one(TB / "nan"), tmp_path / "run")
    ws = warnings(engine, tmp_path / "run")
    assert any("events.out.tfevents.9.fifo" in w and "skipped" in w for w in ws)
    assert facts(engine, tmp_path / "run")["loss_pattern"].value == "nan"


def test_a_folder_of_10k_empty_files_is_one_line(tmp_path: Path) -> None:
    many = tmp_path / "many"
    many.mkdir()
    for i in range(10_000):
        (many / f"events.out.tfevents.{i}.h").touch()
    proc = _cli("--json", "--attach", str(many), timeout=60)
    _refused(proc, "none of its 64 event file(s)", "empty")
    shutil.copy(_one(TB / "nan"), many / "events.out.tfevents.99999.real")
    found, notes = tb.find_event_files(many)  # the one with events is among those read
    assert len(found) == 64 and many / "events.out.tfevents.99999.real" in found
    assert notes == ["10001 event files; 64 are read, empty ones last"]
    plain = tmp_path / "plain"
    plain.mkdir()
    for i in range(10_000):
        (plain / f"{i}.txt").touch()
    _refused(_cli("--json", "--attach", str(plain), timeout=60), "no TensorBoard event file")


def test_a_folder_deeper_than_the_bound_and_a_symlink_loop(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b" / "c" / "d" / "e" / "f"
    event_file(deep / "events.out.tfevents.1.h", {"loss": falling()})
    (tmp_path / "a" / "loop").symlink_to(tmp_path / "a")
    with pytest.raises(InputError, match="no TensorBoard event file"):
        tb.read(tmp_path / "a")
    assert tb.read(tmp_path / "a" / "b" / "c").curves  # within MAX_DEPTH of the folder


def test_reads_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ddpadvisor.evidence.files import text

    path = event_file(tmp_path / "events.out.tfevents.1.h", {"loss": falling(400)})
    monkeypatch.setattr(text, "MAX_BYTES", 4000)
    got = tb.read(path)
    assert len(got.curves[0].loss) < 100
    assert any("only its first 4000 bytes are read" in w for w in got.warnings)
    for i in range(2, 6):
        event_file(tmp_path / f"events.out.tfevents.{i}.h", {"loss": falling(400)}, t0=i * 1e4)
    got = tb.read(tmp_path)  # the bound holds for a folder: the first file spends it
    spent = [w for w in got.warnings if "not read, the 4000 bytes" in w]
    assert len(spent) == 1 and spent[0].startswith(f"{tmp_path}: 4 event file(s)")
    monkeypatch.setattr(text, "MAX_BYTES", 1 << 20)
    monkeypatch.setattr(tb, "MAX_RECORDS", 50)
    got = tb.read(path)
    assert len(got.curves[0].loss) == 49 and any("more than 50 records" in w for w in got.warnings)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_damaged_bytes_never_raise_anything_but_input_error(tmp_path: Path, data: Any) -> None:
    raw = bytearray(_one(TB / "oscillates").read_bytes())
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    raw = raw[: data.draw(st.integers(0, len(raw)))]
    path = tmp_path / "events.out.tfevents.fuzz"
    path.write_bytes(bytes(raw))
    try:
        got = read_attached(path)
    except InputError as exc:
        assert "\n" not in exc.one_line()
        return
    assert all("\n" not in w for w in got.warnings)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_the_decoder_takes_any_bytes(blob: bytes) -> None:
    for decode in (tb.decode_event, tb.tensor_scalar):
        try:
            got = decode(memoryview(blob))
        except tb.Malformed:
            continue
        assert got is None or isinstance(got, (tb.Event, float))


def test_json_startup_imports_no_tensorboard_reader() -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ddpadvisor", "--json", "--set", "world_size=8"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr[-400:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
    assert "ddpadvisor.evidence.files" not in imported
    assert "ddpadvisor.evidence.files.tensorboard" not in imported
