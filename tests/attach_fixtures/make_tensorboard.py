"""Writes the TensorBoard event files the attach tests read, with the real writer, on the CPU.

    python tests/attach_fixtures/make_tensorboard.py OUT_DIR

``torch.utils.tensorboard.SummaryWriter`` needs the ``tensorboard`` package, which the project
does not depend on: run this from a throwaway environment that has torch and tensorboard
(the committed files under tensorboard/ were made with torch 2.13 and tensorboard 2.21). The
curves are computed, not trained, so that each shows one pattern for certain:

- ``hf_falls``: HF Trainer tag names (``train/loss``, ``train/learning_rate`` with 20 warmup
  steps then a linear decay, ``train/grad_norm``, ``train/epoch``, ``eval/loss``), a loss that
  falls with batch noise, logged every 2 steps;
- ``oscillates``: tutorial tag names (``Loss/train``, ``Loss/test``, ``lr``), a loss that
  swings for runs of several steps around a level, and an eval loss that rises;
- ``nan``: Lightning-style ``train_loss`` and ``grad_norm`` that turn NaN at step 60;
- ``ranks/rank0``, ``ranks/rank1``: one writer per rank, a spike on rank 1 alone at step 70;
- ``new_style``: ``add_scalar(..., new_style=True)`` (a float tensor, not ``simple_value``),
  and a GradScaler-like ``loss_scale`` halved at overflows that keep coming;
- ``add_scalars``: ``add_scalars("Loss", {"train": ..., "valid": ...})``, one folder per key;
- ``hf_trainer``: the real HF Trainer (``report_to=["tensorboard"]``) on make_hf.py's tiny
  GPT-2 job, with an evaluation every 16 steps, and the same run's ``trainer_state.json``;
- ``lightning_spikes``: make_lightning.py's ``spikes`` job with Lightning's
  ``TensorBoardLogger`` instead of its ``CSVLogger``.
"""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

from torch.utils.tensorboard import SummaryWriter


def hf_falls(out: Path) -> None:
    rnd = random.Random(0)
    w = SummaryWriter(str(out / "hf_falls"))
    for step in range(2, 122, 2):
        lr = 1e-3 * (step / 20 if step <= 20 else (120 - step) / 100)
        w.add_scalar("train/loss", 3.9 * math.exp(-step / 80) + 1.2 + rnd.gauss(0, 0.03), step)
        w.add_scalar("train/learning_rate", lr, step)
        w.add_scalar("train/grad_norm", 1.5 + rnd.gauss(0, 0.1), step)
        w.add_scalar("train/epoch", step / 40, step)
        if step % 24 == 0:
            w.add_scalar("eval/loss", 3.9 * math.exp(-step / 80) + 1.3, step)
    w.close()


def oscillates(out: Path) -> None:
    rnd = random.Random(1)
    w = SummaryWriter(str(out / "oscillates"))
    for step in range(1, 101):
        swing = 0.5 * math.sin(step * 2 * math.pi / 8)  # a swing lasts about 4 steps
        w.add_scalar("Loss/train", 2.5 + swing + rnd.gauss(0, 0.02), step)
        w.add_scalar("lr", 3e-4, step)
        if step % 20 == 0:
            w.add_scalar("Loss/test", 2.4 + step / 200, step)
    w.close()


def nan(out: Path) -> None:
    rnd = random.Random(2)
    w = SummaryWriter(str(out / "nan"))
    for step in range(1, 81):
        bad = step >= 60
        w.add_scalar("train_loss", math.nan if bad else 2.0 - step / 100 + rnd.gauss(0, 0.02), step)
        w.add_scalar("grad_norm", math.nan if bad else 1.0 + rnd.gauss(0, 0.05), step)
    w.close()


def ranks(out: Path) -> None:
    for rank in (0, 1):
        rnd = random.Random(10 + rank)
        w = SummaryWriter(str(out / "ranks" / f"rank{rank}"))
        for step in range(1, 121):
            loss = 2.0 - step / 150 + rnd.gauss(0, 0.01)
            if rank == 1 and step == 70:
                loss = 6.0
            w.add_scalar("train/loss", loss, step)
        w.close()


def new_style(out: Path) -> None:
    rnd = random.Random(3)
    w = SummaryWriter(str(out / "new_style"))
    scale = 65536.0
    for step in range(10, 1210, 10):
        if step % 40 == 0:  # an overflow every 40 steps: the scale is halved and stays low
            scale /= 2
        w.add_scalar(
            "train/loss", 2.0 * math.exp(-step / 900) + 1 + rnd.gauss(0, 0.01), step, new_style=True
        )
        w.add_scalar("loss_scale", max(scale, 1.0), step, new_style=True)
    w.close()


def add_scalars(out: Path) -> None:
    """The forum idiom ``add_scalars("Loss", {"train": ..., "valid": ...})``: SummaryWriter
    writes each key to its own folder (``Loss_train``, ``Loss_valid``) under the tag ``Loss``."""
    rnd = random.Random(4)
    w = SummaryWriter(str(out / "add_scalars"))
    for step in range(1, 101):
        train = 2.0 * math.exp(-step / 60) + 0.5 + rnd.gauss(0, 0.01)
        w.add_scalar("lr", 1e-3, step)
        payload = {"train": train}
        if step % 10 == 0:  # the validation loss falls until step 40, then rises
            payload["valid"] = 2.0 * math.exp(-step / 60) + 0.6 + step / 60
        w.add_scalars("Loss", payload, step)
    w.close()


def hf_trainer(out: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import torch
    from make_hf import Counting
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    args = TrainingArguments(
        output_dir=str(out / "hf_trainer"),
        use_cpu=True,
        per_device_train_batch_size=8,
        num_train_epochs=4,
        learning_rate=1e-3,
        warmup_steps=20,
        max_grad_norm=1.0,
        logging_steps=2,
        eval_strategy="steps",
        eval_steps=16,
        save_strategy="no",
        report_to=["tensorboard"],
        disable_tqdm=True,
        seed=0,
    )
    config = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=16)
    trainer = Trainer(
        model=GPT2LMHeadModel(config),
        args=args,
        train_dataset=Counting(),
        eval_dataset=Counting(n=64),
    )
    trainer.train()
    trainer.state.save_to_json(str(out / "hf_trainer.trainer_state.json"))


def lightning_spikes(out: Path) -> None:
    """make_lightning.py's ``spikes`` job, logged by Lightning's TensorBoardLogger."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import lightning as L
    import torch
    from lightning.pytorch.loggers import TensorBoardLogger
    from make_lightning import Regression, data
    from torch.utils.data import DataLoader

    torch.manual_seed(0)
    loader = DataLoader(data(True), batch_size=8, shuffle=False)
    trainer = L.Trainer(
        logger=TensorBoardLogger(str(out), name="lightning_spikes", version=0),
        log_every_n_steps=1,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        max_epochs=1,
        accelerator="cpu",
        devices=1,
    )
    trainer.fit(Regression(0.05), loader)


def main() -> int:
    out = Path(sys.argv[1])
    for make in (
        hf_falls,
        oscillates,
        nan,
        ranks,
        new_style,
        add_scalars,
        hf_trainer,
        lightning_spikes,
    ):
        make(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
