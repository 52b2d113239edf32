"""CLIP-style dual encoder trained with DDP on synthetic paired data.

Image-like vectors and short token captions share a hidden latent. Each rank embeds its
shard, the features of all ranks are gathered with autograd (functional collectives) and the
local rows are scored against the global batch. The temperature is learnable and clamped.

Launch: torchrun --nproc_per_node 2 clip_dual.py
"""

from __future__ import annotations

import gc
import math

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

VOCAB = 48
CAPTION_LEN = 6
IMG_DIM = 24
LATENT = 6
EMBED = 32


def make_pairs(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, LATENT, generator=g)
    to_img = torch.randn(LATENT, IMG_DIM, generator=g)
    to_txt = torch.randn(LATENT, CAPTION_LEN, generator=g)
    images = z @ to_img + 0.1 * torch.randn(n, IMG_DIM, generator=g)
    # captions: each position quantises one projection of the latent into the vocabulary
    proj = torch.tanh(z @ to_txt)
    tokens = ((proj + 1) / 2 * (VOCAB - 1)).round().long().clamp(0, VOCAB - 1)
    return TensorDataset(images, tokens)


class DualEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.image = nn.Sequential(nn.Linear(IMG_DIM, 64), nn.GELU(), nn.Linear(64, EMBED))
        self.tok = nn.Embedding(VOCAB, 16)
        self.text = nn.Sequential(
            nn.Flatten(), nn.Linear(CAPTION_LEN * 16, 64), nn.GELU(), nn.Linear(64, EMBED)
        )
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    def forward(self, images: torch.Tensor, tokens: torch.Tensor):
        img = F.normalize(self.image(images), dim=-1)
        txt = self.text(self.tok(tokens))
        return img, F.normalize(txt, dim=-1), self.logit_scale.exp()


def contrastive_loss(img, txt, scale, rank: int) -> torch.Tensor:
    # gathered with autograd: the gradient of every rank's rows flows back to their owner
    all_img = funcol.all_gather_single_autograd(img, 0, dist.group.WORLD)
    all_txt = funcol.all_gather_single_autograd(txt, 0, dist.group.WORLD)
    labels = torch.arange(img.shape[0]) + rank * img.shape[0]
    logits_i = scale * img @ all_txt.t()
    logits_t = scale * txt @ all_img.t()
    return (F.cross_entropy(logits_i, labels) + F.cross_entropy(logits_t, labels)) / 2


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    torch.manual_seed(0)

    pairs = make_pairs(896, seed=11)
    train = TensorDataset(*(t[:768] for t in pairs.tensors))
    val = TensorDataset(*(t[768:] for t in pairs.tensors))
    sampler = DistributedSampler(
        train, num_replicas=world, rank=rank, shuffle=True, seed=3, drop_last=True
    )
    loader = DataLoader(train, batch_size=32, sampler=sampler, drop_last=True)

    model = DDP(DualEncoder())
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}],
        lr=3e-3,
    )
    epochs = 3
    total = epochs * len(loader)
    warm = 3
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: (
            (s + 1) / warm
            if s < warm
            else 0.5 * (1 + math.cos(math.pi * (s - warm) / (total - warm)))
        ),
    )

    # image-side augmentation: jitter drawn from a generator of this rank's own
    aug = torch.Generator().manual_seed(1000 + rank)  # fmt: skip  # fault clip_same_aug: aug = torch.Generator().manual_seed(1000)

    step = 0
    for epoch in range(epochs):
        sampler.set_epoch(epoch)  # fault clip_no_set_epoch: -
        model.train()
        for images, tokens in loader:
            images = images + 0.05 * torch.randn(images.shape, generator=aug)
            img, txt, scale = model(images, tokens)
            loss = contrastive_loss(img, txt, scale, rank)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            with torch.no_grad():
                model.module.logit_scale.clamp_(0, math.log(100))
            step += 1
            if step % 4 == 0:
                shown = loss.detach().clone()
                dist.all_reduce(shown, op=dist.ReduceOp.AVG)
                if rank == 0:
                    print(
                        f"epoch {epoch} step {step} loss {shown.item():.4f} "
                        f"temp {1 / scale.item():.4f} lr {sched.get_last_lr()[0]:.2e}",
                        flush=True,
                    )

    # retrieval accuracy on a held-out set, every rank scoring its own slice of the queries
    model.eval()
    with torch.no_grad():
        img, txt, _ = model.module(*val.tensors)
        mine = torch.arange(rank, len(val), world)
        hits = (img[mine] @ txt.t()).argmax(dim=1).eq(mine).sum().float()
        counts = torch.tensor([hits.item(), float(len(mine))])
        dist.all_reduce(counts)
    if rank == 0:
        print(f"image->text top-1 {counts[0].item() / counts[1].item():.3f}", flush=True)

    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
