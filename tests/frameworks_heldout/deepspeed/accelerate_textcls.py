"""Fine-tuning a small bag-of-embeddings text classifier with accelerate on DeepSpeed ZeRO-2,
the way accelerate's `deepspeed_with_config_support` example does it: the DeepSpeed config is a
JSON file (DeepSpeedPlugin(hf_ds_config=...)) that names the optimizer and the scheduler, so
the script builds DummyOptim and DummyScheduler and prepare() builds the engine. The model
starts from a warm-start checkpoint (a short pretraining run the main process makes first, on
the same task) loaded before prepare(). Synthetic token sequences whose label is carried by
which half of the vocabulary dominates them.

    DS_ACCELERATOR=cpu torchrun --nproc_per_node 2 accelerate_textcls.py
"""

import argparse
import os
import tempfile
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator, DeepSpeedPlugin
from accelerate.utils import DummyOptim, DummyScheduler, InitProcessGroupKwargs, set_seed
from torch.utils.data import DataLoader, Dataset

VOCAB = 300


class Reviews(Dataset):
    def __init__(self, n=384, seq_len=20, seed=5):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 2, (n,), generator=g)
        low = torch.randint(0, VOCAB // 2, (n, seq_len), generator=g)
        high = torch.randint(VOCAB // 2, VOCAB, (n, seq_len), generator=g)
        pick_high = torch.rand(n, seq_len, generator=g) < (0.35 + 0.3 * self.labels[:, None])
        self.ids = torch.where(pick_high, high, low)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


class TextClassifier(nn.Module):
    def __init__(self, dim=48, hidden=64):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, 2))

    def forward(self, input_ids):
        return self.mlp(self.embed(input_ids).mean(dim=1))


def pretrain(path):
    """The warm start: a few hundred plain Adam steps on the task, one process."""
    torch.manual_seed(99)
    model = TextClassifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    data = Reviews(n=4096, seed=6)
    for _ in range(300):
        i = torch.randint(0, len(data), (32,))
        loss = F.cross_entropy(model(data.ids[i]), data.labels[i])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.save(model.state_dict(), path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--num_train_epochs", type=int, default=2)
    parser.add_argument("--per_device_train_batch_size", type=int, default=8)
    parser.add_argument("--learning_rate", type=float, default=5e-4)
    parser.add_argument("--num_warmup_steps", type=int, default=2)
    args = parser.parse_args()

    ds_plugin = DeepSpeedPlugin(hf_ds_config=str(Path(__file__).resolve().with_name("ds_accelerate_zero2.json")))
    accelerator = Accelerator(
        deepspeed_plugin=ds_plugin,
        kwargs_handlers=[InitProcessGroupKwargs(backend="gloo")],  # CPU-only machine
    )
    set_seed(0)
    run = f"{os.environ.get('TORCHELASTIC_RUN_ID', 'local')}-{os.environ.get('MASTER_PORT', '')}"
    warm_start = os.path.join(tempfile.gettempdir(), f"textcls-warm-{Path(__file__).stem}-{run}.pt")
    with accelerator.main_process_first():
        if accelerator.is_main_process:
            pretrain(warm_start)

    model = TextClassifier()
    model.load_state_dict(torch.load(warm_start, map_location="cpu"))  # fault accelerate_textcls_late_load: -
    train_loader = DataLoader(Reviews(), batch_size=args.per_device_train_batch_size, shuffle=True)
    gas = accelerator.state.deepspeed_plugin.deepspeed_config["gradient_accumulation_steps"]
    max_train_steps = args.num_train_epochs * len(train_loader) // gas

    optimizer = DummyOptim(model.parameters(), lr=args.learning_rate, weight_decay=0.01)
    lr_scheduler = DummyScheduler(
        optimizer, total_num_steps=max_train_steps, warmup_num_steps=args.num_warmup_steps
    )
    model, optimizer, train_loader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_loader, lr_scheduler
    )  # fault accelerate_textcls_late_load: = || accelerator.unwrap_model(model).load_state_dict(torch.load(warm_start, map_location="cpu"))

    completed_steps = 0
    for epoch in range(args.num_train_epochs):
        model.train()
        window_loss = torch.zeros(1)
        for batch in train_loader:
            with accelerator.accumulate(model):
                logits = model(batch["input_ids"])
                loss = F.cross_entropy(logits, batch["labels"])
                window_loss += loss.detach() / gas
                accelerator.backward(loss)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
            if accelerator.sync_gradients:
                completed_steps += 1
                step_loss = accelerator.gather(window_loss).mean()  # fault accelerate_textcls_sum_loss: step_loss = accelerator.reduce(window_loss)
                accelerator.print(
                    f"epoch {epoch} step {completed_steps}: loss {step_loss.item():.4f}, "
                    f"lr {lr_scheduler.get_last_lr()[0]:.2e}"
                )
                window_loss.zero_()

    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        os.remove(warm_start)


if __name__ == "__main__":
    main()
