"""The loop calls project helpers the scan cannot read: it must not claim what they skip."""
# scan-facts: uses_grad_clipping=unknown calls_set_epoch=unknown uses_distributed_sampler=unknown
# scan-facts: grad_accum_steps=unknown zero_grad_every_micro_step=unknown warmup_steps=unknown
import torch
import torch.distributed as dist
from myproject.data import make_dataset
from myproject.train_utils import prepare_epoch, step_optimizer
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyNet

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
stream = make_dataset("s3://bucket/shards")
stream_loader = DataLoader(stream, batch_size=16)  # ok: no-distributed-sampler
sampler = DistributedSampler(torch.load("index.pt"))
for epoch in range(5):
    prepare_epoch(sampler, epoch)
    for x in stream_loader:
        loss = model(x.cuda()).pow(2).mean()
        loss.backward()
        step_optimizer(model, opt)  # ok: grad-clip-missing
        opt.zero_grad()
