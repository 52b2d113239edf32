"""A small regression MLP trained through a DeepSpeed engine with ZeRO (stage from --stage):
DeepSpeed's AdamW, micro batch 4, two micro-batches per optimizer step and clipping at 1.0, all
set in the DeepSpeed config; the loop calls engine.backward and engine.step on every
micro-batch and leaves the accumulation boundary to the engine. Warm-started from a saved
state loaded before the engine is built."""

import argparse
import os
import tempfile

import deepspeed
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def build_model():
    return nn.Sequential(
        nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1)
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--stage", type=int, default=1)  # fault zero2_correct: parser.add_argument("--stage", type=int, default=2)  # fault zero3_correct: parser.add_argument("--stage", type=int, default=3)  # fault zero_load_after_init: parser.add_argument("--stage", type=int, default=2)  # fault zero0_rank0_load: parser.add_argument("--stage", type=int, default=0)  # fault zero2_torch_clip: parser.add_argument("--stage", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    deepspeed.init_distributed(dist_backend="gloo")
    rank = dist.get_rank()
    run = f"{os.environ.get('TORCHELASTIC_RUN_ID', 'local')}-{os.environ.get('MASTER_PORT', '')}"
    warm = os.path.join(tempfile.gettempdir(), f"ds-mlp-{run}.pt")
    if rank == 0:
        torch.manual_seed(99)
        torch.save(build_model().state_dict(), warm)  # fault zero_warm_pretrained: def pretrain(): || >net = build_model() || >pre = torch.optim.SGD(net.parameters(), lr=0.05) || >for _ in range(30): || >>xs = torch.randn(32, 16) || >>loss = ((net(xs) - xs[:, :4].sum(1, keepdim=True)) ** 2).mean() || >>pre.zero_grad() || >>loss.backward() || >>pre.step() || >torch.save(net.state_dict(), warm) || pretrain()
    dist.barrier()

    torch.manual_seed(0)
    model = build_model()
    model.load_state_dict(torch.load(warm))  # fault zero_load_after_init: -  # fault zero0_rank0_load: -
    config = {
        "train_micro_batch_size_per_gpu": 4,
        "gradient_accumulation_steps": 2,
        "gradient_clipping": 1.0,  # fault zero2_torch_clip: "gradient_clipping": 0.0,  # clipped once, in the loop
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}},
        "zero_optimization": {"stage": args.stage},
    }
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config
    )
    dist.barrier()  # fault zero_load_after_init: engine.module.load_state_dict(torch.load(warm)) || =  # fault zero0_rank0_load: if rank == 0: || >engine.module.load_state_dict(torch.load(warm)) || =
    if rank == 0:
        os.remove(warm)

    g = torch.Generator().manual_seed(7)
    x = torch.randn(256, 16, generator=g)
    y = x[:, :4].sum(dim=1, keepdim=True) + 0.1 * torch.randn(256, 1, generator=g)
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset, shuffle=True)
    loader = DataLoader(dataset, batch_size=4, sampler=sampler)
    loss_fn = nn.MSELoss()
    accum = config["gradient_accumulation_steps"]

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total = torch.zeros(2)
        for xb, yb in loader:  # fault zero_step_per_window: for i, (xb, yb) in enumerate(loader):
            loss = loss_fn(engine(xb), yb)
            engine.backward(loss)  # fault zero2_torch_clip: = || torch.nn.utils.clip_grad_norm_(engine.module.parameters(), 1.0)
            engine.step()  # fault zero_step_per_window: if (i + 1) % accum == 0: || >engine.step()
            total += torch.tensor([loss.item() * len(xb), len(xb)])
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch}: loss {total[0] / total[1]:.4f} ({accum} micro-batches per step)")


if __name__ == "__main__":
    main()
