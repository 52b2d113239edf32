"""Two stages in one job: pretrain an MLP encoder as a denoising autoencoder, save it, then
fine-tune encoder + classification head starting from the saved encoder.

    torchrun --nproc_per_node 2 pretrain_finetune.py --workdir /tmp/pf_run
"""

import argparse
import gc
import os
import shutil
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

D_IN, D_HID, N_CLASSES = 24, 64, 3


def make_encoder():
    return nn.Sequential(nn.Linear(D_IN, D_HID), nn.ReLU(), nn.Linear(D_HID, D_HID), nn.ReLU())


class Autoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = make_encoder()
        self.decoder = nn.Linear(D_HID, D_IN)

    def forward(self, x):
        return self.decoder(self.encoder(x))


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = make_encoder()
        self.head = nn.Linear(D_HID, N_CLASSES)

    def forward(self, x):
        return self.head(self.encoder(x))


def synthetic(n, seed):
    g = torch.Generator().manual_seed(seed)
    mix = torch.randn(8, D_IN, generator=torch.Generator().manual_seed(99))
    z = torch.randn(n, 8, generator=g)
    x = torch.tanh(z @ mix) + 0.05 * torch.randn(n, D_IN, generator=g)
    y = (z[:, 0] > 0.5).long() + (z[:, 1] > 0).long()
    return TensorDataset(x, y)


def loader_for(ds, batch_size, seed):
    sampler = DistributedSampler(ds, shuffle=True, seed=seed)
    return sampler, DataLoader(ds, batch_size=batch_size, sampler=sampler, drop_last=True)


def pretrain(args, rank, ckpt_path):
    ds = synthetic(256, seed=1)
    sampler, loader = loader_for(ds, 32, seed=1)
    model = DDP(Autoencoder())
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    step = 0
    for epoch in range(args.pretrain_epochs):
        sampler.set_epoch(epoch)
        for x, _ in loader:
            recon = model(x + 0.3 * torch.randn_like(x))
            loss = F.mse_loss(recon, x)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if rank == 0 and step % 2 == 0:
                print(f"[pretrain] step {step} recon_loss {loss.item():.4f}")
    if rank == 0:
        torch.save(model.module.encoder.state_dict(), ckpt_path)
        print(f"[pretrain] saved encoder to {ckpt_path}")
    del model
    gc.collect()


def finetune(args, rank, world_size, ckpt_path):
    ds = synthetic(256, seed=2)
    sampler, loader = loader_for(ds, 16, seed=2)
    torch.manual_seed(1000 + rank)
    model = Classifier()
    state = torch.load(ckpt_path, map_location="cpu", weights_only=True)
    model.encoder.load_state_dict(state)  # fault finetune_rank0_load: -
    model = DDP(model)  # fault finetune_rank0_load: = || if rank == 0: || >model.module.encoder.load_state_dict(state)
    opt = torch.optim.AdamW(
        [
            {"params": model.module.encoder.parameters(), "lr": args.lr * 0.1},
            {"params": model.module.head.parameters(), "lr": args.lr},
        ],
        weight_decay=0.01,
    )
    step = 0
    for epoch in range(args.finetune_epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            acc = (logits.argmax(1) == y).float().mean()
            stats = torch.stack([loss.detach(), acc])
            dist.all_reduce(stats)
            stats /= world_size
            if rank == 0 and step % 2 == 0:
                print(
                    f"[finetune] epoch {epoch} step {step} loss {stats[0]:.4f} acc {stats[1]:.3f}"
                )
    return model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--pretrain_epochs", type=int, default=1)
    parser.add_argument("--finetune_epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=2e-3)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    workdir = [args.workdir or (tempfile.mkdtemp(prefix="pf_") if rank == 0 else None)]
    dist.broadcast_object_list(workdir, src=0)
    os.makedirs(workdir[0], exist_ok=True)
    ckpt_path = os.path.join(workdir[0], "encoder.pt")

    pretrain(args, rank, ckpt_path)
    dist.barrier()
    model = finetune(args, rank, world_size, ckpt_path)

    del model
    gc.collect()
    dist.barrier()
    if rank == 0 and args.workdir is None:
        shutil.rmtree(workdir[0], ignore_errors=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
