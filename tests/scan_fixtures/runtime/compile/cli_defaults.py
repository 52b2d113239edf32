"""Every knob comes from argparse: the scan reports the structure, not the defaults."""
# scan-facts: grad_accum_steps=unknown per_gpu_batch_size=unknown uses_torch_compile=unknown
# scan-facts: uses_grad_clipping=unknown scheduler_steps_per_optimizer_step=unknown adam_beta2=unknown
# scan-facts: zero_grad_every_micro_step=false loss_divided_by_accum=true uses_grad_scaler=unknown
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

p = argparse.ArgumentParser()
p.add_argument("--accum", type=int, default=4)
p.add_argument("--batch-size", type=int, default=8)
p.add_argument("--compile", action="store_true")
p.add_argument("--clip", type=float, default=0.0)
p.add_argument("--beta2", type=float, default=0.999)
p.add_argument("--amp", action="store_true")
args = p.parse_args()

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
if args.compile:
    model = torch.compile(model)
ds = ToyDataset(1024)
sampler = DistributedSampler(ds)
loader = DataLoader(ds, batch_size=args.batch_size, sampler=sampler)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, args.beta2))
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=1000)
scaler = torch.cuda.amp.GradScaler(enabled=args.amp)
for epoch in range(3):
    sampler.set_epoch(epoch)
    for step, batch in enumerate(loader):
        loss = model(batch["x"].cuda()).pow(2).mean() / args.accum
        scaler.scale(loss).backward()
        sched.step()
        if (step + 1) % args.accum == 0:
            if args.clip > 0:
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
