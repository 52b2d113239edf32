"""Adapter fine-tuning of a small pretrained encoder with LoRA on the attention projections."""

import gc
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, r=4, alpha=8):
        super().__init__()
        self.base = base
        self.lora_A = nn.Parameter(torch.empty(r, base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.scaling = alpha / r

    def forward(self, x):
        return self.base(x) + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scaling


class Encoder(nn.Module):
    def __init__(self, dim=32, classes=3):
        super().__init__()
        self.q_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.ffn = nn.Sequential(nn.Linear(dim, 64), nn.GELU(), nn.Linear(64, dim))
        self.classifier = nn.Linear(dim, classes)

    def forward(self, x):
        attn = torch.softmax(self.q_proj(x) @ x.transpose(1, 2) / math.sqrt(x.size(-1)), -1)
        h = x + attn @ self.v_proj(x)
        h = h + self.ffn(h)
        return self.classifier(h.mean(1))


def add_adapters(model: nn.Module, targets=("q_proj", "v_proj")):
    for name in targets:
        setattr(model, name, LoRALinear(getattr(model, name)))
    for n, p in model.named_parameters():
        p.requires_grad = "lora_" in n or n.startswith("classifier")


def main():
    dist.init_process_group("gloo")
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(12)
    x = torch.randn(360, 6, 32, generator=g)
    y = (x[:, :, 0].sum(1) > 0).long() + (x[:, :, 1].sum(1) > 1).long()
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=12, sampler=sampler)

    encoder = Encoder()
    for p in encoder.parameters():
        p.requires_grad = False
    encoder.classifier.weight.requires_grad = True
    encoder.classifier.bias.requires_grad = True  # fix: = || add_adapters(encoder)
    model = DDP(encoder)
    add_adapters(model.module)  # fix: -

    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=5e-3)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if local_rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
