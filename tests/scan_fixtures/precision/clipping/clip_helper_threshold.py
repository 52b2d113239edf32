"""The optimizer step goes through a project helper the scan cannot read, handed the clipping
threshold from a config: it clips when the config sets one, which the scan cannot see."""
# scan-facts: uses_grad_clipping=unknown
import torch
import torch.distributed as dist
import torch.nn.functional as F
from omegaconf import OmegaConf
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet
from trainlib.optim import step_optimizer

cfg = OmegaConf.load("configs/train.yaml")
dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.optim.lr)
dataset = ToyDataset(1024)
sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, batch_size=64, sampler=sampler)
for epoch in range(10):
    sampler.set_epoch(epoch)
    for batch in loader:
        loss = F.mse_loss(model(batch["x"]), batch["x"])
        optimizer.zero_grad()
        loss.backward()
        step_optimizer(optimizer, model.parameters(), clip_grad=cfg.optim.clip_grad)  # ok: grad-clip-missing
