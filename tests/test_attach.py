"""--attach and --reference-log: files the user already has, read by content.

Artifacts under tests/attach_fixtures/made/ were written here by the real libraries
(make_hf.py: the HF Trainer's trainer_state.json and printed dicts; make_lightning.py:
Lightning's CSVLogger metrics.csv, single-process and 2-process DDP with and without the
DistributedSampler; ``accelerate config default``). Excerpts under excerpts/ are hand-written
in our words with the numbers of public threads (DeepSpeed issue 931 and
ymcui/Chinese-LLaMA-Alpaca issue 534 for the overflow logs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddpadvisor.errors import InputError
from ddpadvisor.evidence.files import text as text_mod
from ddpadvisor.evidence.gather import Sources, gather
from ddpadvisor.observation import Observation
from ddpadvisor.report.present import diagnose

HERE = Path(__file__).resolve().parent
MADE = HERE / "attach_fixtures" / "made"
EXCERPTS = HERE / "attach_fixtures" / "excerpts"
REPO = HERE.parent


def facts(engine: Any, *files: Path | str, ref: Path | None = None) -> dict[str, Observation]:
    got = gather(
        engine.kb,
        Sources(attach=[str(f) for f in files], reference_logs=[str(ref)] if ref else []),
    )
    return {o.fact: o for o in got.observations}


def warnings(engine: Any, *files: Path | str) -> list[str]:
    return gather(engine.kb, Sources(attach=[str(f) for f in files])).warnings


# -- logs written by the real libraries -----------------------------------------------------------


def test_trainer_state_of_a_correct_run(engine: Any) -> None:
    got = facts(engine, MADE / "correct.trainer_state.json")
    assert "loss_pattern" not in got  # a loss that falls steadily names no pattern
    assert got["grad_norm_nonfinite_logged"].value is False
    warm = got["warmup_steps"]
    assert warm.value == 22 and warm.source == "log"  # warmup_steps=20, logged every 2 steps
    assert warm.where == "correct.trainer_state.json:87"
    notes = warnings(engine, MADE / "correct.trainer_state.json")
    assert any("falls from 3.896 to 2.454" in w for w in notes)


def test_printed_trainer_dicts_read_like_the_state(engine: Any) -> None:
    """The dicts the Trainer prints carry no step: entries are counted, no warmup is read."""
    got = facts(engine, MADE / "correct.printed.log")
    assert got["grad_norm_nonfinite_logged"].value is False
    assert got["grad_norm_nonfinite_logged"].where == "correct.printed.log entrys 1-64"
    assert "warmup_steps" not in got


def test_training_args_against_the_logged_schedule(engine: Any) -> None:
    got = facts(engine, MADE / "correct.training_args.json", MADE / "correct.trainer_state.json")
    assert got["per_gpu_batch_size"].value == 8 and got["grad_accum_steps"].value == 1
    assert got["precision"].value == "fp32" and got["optimizer_family"].value == "adam"
    assert got["lr_follows_intended_schedule"].value is True
    # the measured warmup (attached after the config) is the one kept
    assert got["warmup_steps"].value == 22


def test_lr_times_world_size_against_the_reference(engine: Any, tmp_path: Path) -> None:
    launch = tmp_path / "launch.sh"
    launch.write_text("torchrun --nproc_per_node 8 train.py --learning_rate 8e-3\n")
    got = facts(
        engine, MADE / "lr_x8.trainer_state.json", launch, ref=MADE / "correct.trainer_state.json"
    )
    assert got["lr_scaling"].value == "linear"
    assert "8x the reference" in (got["lr_scaling"].detail or "")
    assert got["world_size"].value == 8
    # both logs cover 4 epochs in 32 steps each: on 8 GPUs that is an epoch without a sampler
    assert got["epoch_steps_unchanged"].value is True
    assert got["logged_loss_off_by_factor"].value is False


def test_lightning_ddp_without_a_sampler_keeps_the_epoch(engine: Any, tmp_path: Path) -> None:
    launch = tmp_path / "cmd.txt"
    launch.write_text("torchrun --nproc_per_node 2 train.py\n")
    ref = MADE / "lightning_two_epochs.metrics.csv"
    without = facts(engine, MADE / "lightning_no_sampler.metrics.csv", launch, ref=ref)
    assert without["epoch_steps_unchanged"].value is True
    with_sampler = facts(engine, MADE / "lightning_sampler.metrics.csv", launch, ref=ref)
    assert with_sampler["epoch_steps_unchanged"].value is False
    assert "100 steps, 2x fewer than the 200" in (
        with_sampler["epoch_steps_unchanged"].detail or ""
    )


@pytest.mark.parametrize(
    ("name", "pattern", "early"),
    [
        ("lightning_spikes", "spikes", False),  # 3 batches with 8x targets, all past 20%
        ("lightning_falls", "spikes", True),  # one early jump (step 6), then it falls
        ("lightning_plateau", "plateau", None),  # lr 1e-7: nothing learned
    ],
)
def test_lightning_curves(engine: Any, name: str, pattern: str, early: bool | None) -> None:
    got = facts(engine, MADE / f"{name}.metrics.csv")
    assert got["loss_pattern"].value == pattern
    if early is None:
        assert "noise_only_early" not in got
    else:
        assert got["noise_only_early"].value is early


def test_per_step_batch_noise_is_not_a_swing(engine: Any) -> None:
    """Lightning's 2-GPU run logs the per-step loss of 8 samples: its noise is half its level,
    uncorrelated from step to step, and the loss falls: no pattern."""
    got = facts(engine, MADE / "lightning_sampler.metrics.csv")
    assert "loss_pattern" not in got


def test_accelerate_config_default(engine: Any) -> None:
    got = facts(engine, MADE / "accelerate_default.yaml")  # JSON, as the command writes it
    assert got["precision"].value == "fp32" and got["uses_grad_scaler"].value is False
    assert "world_size" not in got  # distributed_type NO says nothing of a DDP job


# -- excerpts: logs ---------------------------------------------------------------------------------


def test_deepspeed_scale_driven_to_its_minimum(engine: Any) -> None:
    got = facts(engine, EXCERPTS / "deepspeed_scale_at_minimum.log")
    assert got["loss_scale_overflow_logged"].value is True
    assert got["loss_scale_overflow_persists"].value is True
    assert got["loss_scale_overflow_persists"].where == "deepspeed_scale_at_minimum.log:13"


def test_deepspeed_overflows_only_while_calibrating(engine: Any) -> None:
    got = facts(engine, EXCERPTS / "deepspeed_overflow_burst.log")
    assert got["loss_scale_overflow_logged"].value is True
    persists = got["loss_scale_overflow_persists"]
    assert persists.value is False
    assert "6 of 8" in (persists.detail or "") and "4700 logged steps" in (persists.detail or "")


def test_apex_overflow_lines(engine: Any) -> None:
    got = facts(engine, EXCERPTS / "apex_overflow_at_start.log")
    assert got["loss_scale_overflow_logged"].value is True
    assert got["loss_scale_overflow_persists"].value is False


def test_nanogpt_log_that_diverges(engine: Any) -> None:
    got = facts(engine, EXCERPTS / "nanogpt_diverges.log")
    assert got["loss_pattern"].value == "diverges"
    assert got["loss_pattern"].where == "nanogpt_diverges.log steps 0-590"


def test_chinese_labels_and_a_swinging_loss(engine: Any) -> None:
    """'loss一直震荡…降不下去': the curve swings around 2.3 in runs of steps; that is the
    oscillation, measured, not a plateau read from the words."""
    got = facts(engine, EXCERPTS / "zh_swings.log")
    assert got["loss_pattern"].value == "oscillates"
    assert got["noise_only_early"].value is False


def test_mmdet_epochs_and_wandb_export(engine: Any) -> None:
    mm = facts(engine, EXCERPTS / "mmdet_epochs.log")
    assert mm["grad_norm_nonfinite_logged"].value is False
    wb = facts(engine, EXCERPTS / "wandb_history.csv")
    assert wb["grad_norm_nonfinite_logged"].value is True
    assert wb["grad_norm_nonfinite_logged"].where == "wandb_history.csv:58"
    assert wb["warmup_steps"].value == 100


# -- excerpts: configs, launch, environment ----------------------------------------------------------


def test_deepspeed_config_explicit(engine: Any) -> None:
    got = facts(engine, EXCERPTS / "deepspeed_fp16.json")
    expect = {
        "precision": "fp16_amp",
        "uses_grad_scaler": True,
        "uses_fsdp_or_zero": True,
        "per_gpu_batch_size": 4,
        "grad_accum_steps": 8,
        "uses_grad_clipping": True,
        "optimizer_family": "adam",
        "warmup_steps": 100,
        "world_size": 8,
    }
    assert {k: got[k].value for k in expect} == expect


def test_deepspeed_auto_values_stay_undecided(engine: Any) -> None:
    got = facts(engine, EXCERPTS / "deepspeed_zero2_auto.json")
    assert set(got) == {"uses_fsdp_or_zero"}
    assert any('"auto"' in w for w in warnings(engine, EXCERPTS / "deepspeed_zero2_auto.json"))
    both = facts(engine, EXCERPTS / "deepspeed_zero2_auto.json", EXCERPTS / "training_args.yaml")
    assert both["precision"].value == "bf16_amp" and both["grad_accum_steps"].value == 8


def test_launch_command_and_script_flags(engine: Any) -> None:
    got = facts(engine, EXCERPTS / "launch.sh")
    assert got["world_size"].value == 8 and got["world_size"].where == "launch.sh:3"
    assert got["precision"].value == "fp16_amp" and got["per_gpu_batch_size"].value == 8


def test_accelerate_yaml(engine: Any) -> None:
    got = facts(engine, EXCERPTS / "accelerate_fp16.yaml")
    assert got["precision"].value == "fp16_amp" and got["world_size"].value == 8
    assert got["uses_fsdp_or_zero"].value is False


def test_environment_dumps(engine: Any) -> None:
    env = facts(engine, EXCERPTS / "collect_env.txt")
    assert env["torch_version"].value == "2.0.1"
    assert env["gpu_model"].value.startswith("Tesla V100")
    assert "world_size" not in env  # four GPUs on the machine bound it, never state it
    smi = facts(engine, EXCERPTS / "nvidia_smi.txt")
    assert smi["gpu_model"].value == "A100-SXM4-80GB" and "world_size" not in smi
    assert any("upper bound" in w for w in warnings(engine, EXCERPTS / "nvidia_smi.txt"))
    assert facts(engine, EXCERPTS / "pip_freeze.txt")["torch_version"].value == "2.1.2"
    nccl = facts(engine, EXCERPTS / "nccl_env.txt")
    assert nccl["nccl_algo"].value == "Tree" and nccl["nccl_env_overrides"].value is True


def test_kind_named_by_the_user(engine: Any, tmp_path: Path) -> None:
    cmd = tmp_path / "notes.txt"
    cmd.write_text("we ran it with\n  torchrun --nproc_per_node=4 train.py\n")
    assert facts(engine, f"launch:{cmd}")["world_size"].value == 4
    assert "world_size" not in facts(engine, f"env:{cmd}")


# -- bad files: one line naming the file, the rest of the evidence kept ------------------------------


def _one_line_about(ws: list[str], path: Path, words: str) -> None:
    hits = [w for w in ws if str(path.name) in w and words in w]
    assert len(hits) == 1, ws
    assert "\n" not in hits[0]


def test_bad_files_are_one_warning_each(engine: Any, tmp_path: Path) -> None:
    binary = tmp_path / "model.bin"
    binary.write_bytes(b"\x80\x04\x95" + bytes(range(256)) * 4)
    # a TensorBoard event file cut short: the events before the cut are kept
    (real,) = (HERE / "attach_fixtures" / "tensorboard" / "nan").glob("events.out.tfevents.*")
    events = tmp_path / "events.out.tfevents.1700000000.host"
    events.write_bytes(real.read_bytes()[:3000])
    empty = tmp_path / "empty.log"
    empty.write_text("")
    state = (MADE / "correct.trainer_state.json").read_text()
    cut = tmp_path / "trainer_state.json"
    cut.write_text(state[: len(state) // 2])
    other = EXCERPTS / "other_framework.log"
    good = EXCERPTS / "deepspeed_fp16.json"
    got = gather(
        engine.kb, Sources(attach=[str(p) for p in (binary, events, empty, cut, other, good)])
    )
    ws = got.warnings
    _one_line_about(ws, binary, "binary file")
    _one_line_about(ws, events, "truncated record at byte")
    _one_line_about(ws, empty, "empty")
    _one_line_about(ws, cut, "malformed JSON")
    _one_line_about(ws, other, "no per-step loss")
    kept = {o.fact for o in got.observations}
    assert {"precision", "world_size"} <= kept  # the good file still counts
    assert "grad_norm_nonfinite_logged" in kept  # the cut state's complete entries are read
    assert any("complete log_history entries" in w for w in ws)


def test_a_huge_file_is_read_up_to_the_bound(
    engine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = tmp_path / "train.log"
    big.write_text("".join(f"step {i} loss {5 - i / 1000:.4f}\n" for i in range(4000)))
    monkeypatch.setattr(text_mod, "MAX_BYTES", 20_000)
    got = gather(engine.kb, Sources(attach=[str(big)]))
    _one_line_about(got.warnings, big, "only its start is read")
    # the start is still read: about 20 kB of 4000 lines
    assert any("the loss falls" in w for w in got.warnings)


def test_a_missing_file_is_exit_2_with_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ddpadvisor", "--json", "--attach", str(tmp_path / "nope.log")],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "nope.log" in proc.stderr


def test_report_and_ask_take_attach() -> None:
    for sub in (["report"], ["ask", "loss oscillates"]):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "ddpadvisor",
                *sub,
                "--json" if sub[0] == "ask" else "--top",
                *(["1"] if sub[0] == "report" else []),
                "--attach",
                str(EXCERPTS / "zh_swings.log"),
            ],
            capture_output=True,
            text=True,
            cwd=REPO,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    pattern = next(f for f in doc["facts"] if f["fact"] == "loss_pattern")
    assert pattern["source"] == "log" and pattern["value"] == "oscillates"


def test_no_confident_false_positive_on_correct_runs(engine: Any) -> None:
    """Correct jobs' own files: nothing catalogued leads with 0.30 or more."""
    for files in (
        [MADE / "correct.trainer_state.json", MADE / "correct.training_args.json"],
        [MADE / "correct.printed.log"],
        [MADE / "lightning_falls.metrics.csv"],
        [MADE / "lightning_sampler.metrics.csv"],
        [MADE / "accelerate_default.yaml"],
    ):
        got = gather(engine.kb, Sources(attach=[str(f) for f in files]))
        d = diagnose(engine, got.observations, warnings=got.warnings)
        lead = d.causes[0]
        assert lead.id == "other" or lead.score < 0.30, (files, lead.id, lead.score)


# -- robustness: any text, any bytes -------------------------------------------------------------


_PIECES = st.sampled_from(
    [
        "{'loss': 2.5, 'grad_norm': nan, 'learning_rate': 1e-4, 'epoch': 0.1}\n",
        "iter 10: loss 3.2, time 10ms\n",
        "step 5 loss inf lr 3e-4\n",
        "Epoch [1][5/0] loss: 1.0\n",
        "[rank3]: step 7 loss=1e308\n",
        "OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1\n",
        "torchrun --nnodes 1:4 --nproc_per_node x train.py --fp16\n",
        '{"log_history": [{"step": 1, "loss": "NaN"}',
        "step,loss\n1,\n,2\n",
        "GPU 0: NVIDIA\n",
        "NCCL_ALGO=\n",
        "第 3 步 损失: -0\n",
        "\x00",
        "\ufffd\ufffd",
        "GPU 0: Tesla \x1b[31mV100\x1b[0m (UUID: x)\n",
        "NCCL_ALGO=\x1b]0;owned\x07\n",
    ]
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.one_of(_PIECES, st.text(max_size=40)), max_size=30),
    st.sampled_from([None, "log", "csv", "jsonl", "trainer-state", "deepspeed", "launch", "env"]),
)
def test_any_text_is_read_without_a_traceback(
    engine: Any, tmp_path: Path, parts: list[str], kind: str | None
) -> None:
    path = tmp_path / "pasted.txt"
    path.write_text("".join(parts), encoding="utf-8", errors="surrogatepass")
    arg = f"{kind}:{path}" if kind else str(path)
    got = gather(engine.kb, Sources(attach=[arg], reference_logs=[arg]))
    assert all("\n" not in w and "\x1b" not in w for w in got.warnings)
    for o in got.observations:
        assert o.source == "log"
        assert "\x1b" not in f"{o.value}{o.where}{o.detail}"


@pytest.mark.slow
def test_lightning_writes_what_the_fixture_holds(engine: Any, tmp_path: Path) -> None:
    """The committed Lightning artifacts are what the real library writes: rerun one job
    (about 10 s on the CPU) and read the same facts from it."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; "
        "import make_lightning as m; "
        "m.run(Path(sys.argv[2]), 'spikes', 0.05, spiky=True, accelerator='cpu', devices=1)"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(HERE / "attach_fixtures"), str(tmp_path)],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    fresh = facts(engine, tmp_path / "spikes" / "version_0" / "metrics.csv")
    kept = facts(engine, MADE / "lightning_spikes.metrics.csv")
    assert {k: v.value for k, v in fresh.items()} == {k: v.value for k, v in kept.items()}
    assert fresh["loss_pattern"].value == "spikes"
    # the CSVLogger's version_0 folder attached whole reads the same
    folder = facts(engine, tmp_path / "spikes" / "version_0")
    assert {k: v.value for k, v in folder.items()} == {k: v.value for k, v in kept.items()}


def test_a_csv_logger_folder_is_read_as_its_metrics_csv(engine: Any, tmp_path: Path) -> None:
    """lightning_logs/version_N of Lightning's CSVLogger: metrics.csv and hparams.yaml, no
    event file. Attached whole it reads as its CSV; a folder holding neither is refused."""
    folder = tmp_path / "lightning_logs" / "version_0"
    folder.mkdir(parents=True)
    (folder / "metrics.csv").write_bytes((MADE / "lightning_spikes.metrics.csv").read_bytes())
    (folder / "hparams.yaml").write_text("lr: 0.05\n")
    got = facts(engine, folder)
    assert got["loss_pattern"].value == "spikes"
    assert got["loss_pattern"].where.startswith("metrics.csv:")
    assert {k: v.value for k, v in got.items()} == {
        k: v.value for k, v in facts(engine, MADE / "lightning_spikes.metrics.csv").items()
    }
    (folder / "metrics.csv").unlink()
    with pytest.raises(InputError, match=r"no TensorBoard event file .* and no Lightning"):
        facts(engine, folder)


def test_a_spike_on_one_rank_alone(engine: Any, tmp_path: Path) -> None:
    got = facts(engine, EXCERPTS / "per_rank_spike.log")
    assert got["loss_spike_single_rank"].value is True
    assert got["loss_spike_single_rank"].where == "per_rank_spike.log:280"
    # the all-reduced loss printed on both ranks: the spike shows on both, not one alone
    both = tmp_path / "reduced.log"
    rows = []
    for step in range(1, 101):
        loss = 9.0 if step == 60 else 2.0 - step / 200
        rows += [f"[rank{r}]: step {step} loss {loss:.4f}" for r in (0, 1)]
    both.write_text("\n".join(rows) + "\n")
    shared = facts(engine, both)
    assert shared["loss_spike_single_rank"].value is False
    assert shared["loss_pattern"].value == "spikes"


def test_accelerate_env_names_versions_not_the_job(engine: Any) -> None:
    got = facts(engine, EXCERPTS / "accelerate_env.txt")
    assert got["torch_version"].value == "2.0.1"
    assert got["gpu_model"].value == "A100-SXM4-80GB"
    # its default config is the machine's, not necessarily the job's: no world size, precision
    assert "world_size" not in got and "precision" not in got


def test_a_scheduler_that_runs_ahead_of_the_configured_warmup(engine: Any, tmp_path: Path) -> None:
    args = tmp_path / "args.yaml"
    args.write_text(
        "output_dir: out\nper_device_train_batch_size: 8\ngradient_accumulation_steps: 1\n"
        "learning_rate: 0.001\nwarmup_steps: 44\n"
    )
    got = facts(engine, args, MADE / "correct.trainer_state.json")
    assert got["lr_follows_intended_schedule"].value is False
    assert got["scheduler_steps_per_optimizer_step"].value == 2.0


def _csv(path: Path, losses: list[float]) -> Path:
    path.write_text("step,train_loss\n" + "".join(f"{i},{v:.5f}\n" for i, v in enumerate(losses)))
    return path


def test_reference_a_loss_off_by_the_world_size(engine: Any, tmp_path: Path) -> None:
    """A loss summed over 4 ranks instead of averaged: 4x the single-GPU curve throughout."""
    ref = [2.0 * 0.99**i + 0.5 for i in range(200)]
    run = _csv(tmp_path / "run.csv", [4 * v for v in ref])
    cmd = tmp_path / "cmd.txt"
    cmd.write_text("torchrun --nproc_per_node 4 train.py\n")
    got = facts(engine, run, cmd, ref=_csv(tmp_path / "ref.csv", ref))
    off = got["logged_loss_off_by_factor"]
    assert off.value is True and "about the world size (4)" in (off.detail or "")


def test_reference_a_run_that_ends_worse(engine: Any, tmp_path: Path) -> None:
    ref = [2.0 * 0.98**i + 0.5 for i in range(200)]
    run = [2.0 * 0.98**i + 0.5 + 0.4 * min(1.0, i / 100) for i in range(200)]
    got = facts(engine, _csv(tmp_path / "run.csv", run), ref=_csv(tmp_path / "ref.csv", ref))
    assert got["logged_loss_off_by_factor"].value is False  # it starts where the reference does
    assert got["loss_pattern"].value == "worse_than_reference"
    # the same run without a reference names no pattern: it falls steadily
    assert "loss_pattern" not in facts(engine, tmp_path / "run.csv")


def test_eval_loss_of_a_metrics_csv(engine: Any, tmp_path: Path) -> None:
    """Lightning writes val_loss on its own rows (one per validation); a rise from the first
    validation to the last says the eval loss no longer falls."""
    rows = ["epoch,step,train_loss,val_loss"]
    for step in range(1, 121):
        rows.append(f"{step // 40},{step},{3 - step / 100:.4f},")
        if step % 40 == 0:
            rows.append(f"{step // 40},{step},,{2.0 + step / 400:.4f}")
    path = tmp_path / "metrics.csv"
    path.write_text("\n".join(rows) + "\n")
    got = facts(engine, path)
    assert got["eval_loss_falls"].value is False
    assert "over 3 evaluations" in got["eval_loss_falls"].detail


def test_reference_steps_per_epoch_give_the_global_batch_ratio(engine: Any, tmp_path: Path) -> None:
    """Two Lightning runs over the same data: an epoch takes 200 steps in the reference and 100
    on 2 ranks with a sampler, so the run's global batch is twice the reference's; without a
    sampler each rank walks the whole data set and the epoch keeps its 200 steps: that says
    nothing of the global batch."""
    launch = tmp_path / "cmd.txt"
    launch.write_text("torchrun --nproc_per_node 2 train.py\n")
    ref = MADE / "lightning_two_epochs.metrics.csv"
    sharded = facts(engine, MADE / "lightning_sampler.metrics.csv", launch, ref=ref)
    ratio = sharded["global_batch_ratio"]
    assert ratio.value == 2.0 and ratio.source == "log"
    assert "2x the reference's" in (ratio.detail or "")
    unsharded = facts(engine, MADE / "lightning_no_sampler.metrics.csv", launch, ref=ref)
    assert "global_batch_ratio" not in unsharded
    # the ratio answers what the question would ask, and the follow-up it implies
    assert "global_batch_ratio" not in facts(engine, MADE / "lightning_sampler.metrics.csv")
