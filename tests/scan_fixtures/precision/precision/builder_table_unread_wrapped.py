"""The model comes from a table of builders in a package the scan does not have, picked by an
option, and is first seen at its DDP wrap: its builder may set a half default dtype or cast
some layers, so no autocast in the loop does not make the run fp32."""
# scan-facts: precision=unknown uses_grad_scaler=true
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

import model_zoo
from _toy import ToyDataset

parser = argparse.ArgumentParser()
parser.add_argument("--arch", default="small_adapter")
args = parser.parse_args()
dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
model = model_zoo.__dict__[args.arch](args)
model.to("cuda")
model = DDP(model, device_ids=[local_rank])
scaler = torch.cuda.amp.GradScaler()
data = ToyDataset(512)
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=16, sampler=sampler)
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
for epoch in range(3):
    sampler.set_epoch(epoch)
    for batch in loader:
        loss = model(batch["x"].cuda()).pow(2).mean()
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
