"""The step runner's class is picked by a config value the scan cannot decide
(``(AmpRunner if cfg["amp"] else PlainRunner)(...)``): one side runs the forward under fp16
autocast with a GradScaler, the other in fp32 with none, so neither is stated."""
# scan-facts: precision=unknown uses_grad_scaler=unknown
import json
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from _toy import ToyDataset, ToyNet


class PlainRunner:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer

    def run_step(self, x):
        loss = self.model(x).pow(2).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()


class AmpRunner(PlainRunner):
    def __init__(self, model, optimizer):
        super().__init__(model, optimizer)
        self.scaler = torch.cuda.amp.GradScaler()

    def run_step(self, x):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = self.model(x).pow(2).mean()
        self.optimizer.zero_grad()
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()


with open("run.json") as f:
    cfg = json.load(f)
dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
model = DDP(ToyNet().cuda(), device_ids=[local_rank])
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
runner = (AmpRunner if cfg["amp"] else PlainRunner)(model, optimizer)
data = ToyDataset(512)
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=16, sampler=sampler)
for epoch in range(3):
    sampler.set_epoch(epoch)
    for batch in loader:
        runner.run_step(batch["x"].cuda())
