"""One model type (picked in the config) backpropagates each augmented view inside a helper,
the others once per step in the loop itself. The per-view loop is not the run's accumulation
unless that model is chosen, so neither the count nor the loss's division is decided."""
# scan-facts: grad_accum_steps=unknown loss_divided_by_accum=unknown
# scan-facts: zero_grad_every_micro_step=false
import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


def views_backward(net, views):
    total = 0.0
    for view in views:
        out = net(view)
        part = out.pow(2).mean()
        part.backward()  # ok: grad-accum-loss-not-scaled
        total += part.detach()
    return total, False


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="plain", choices=["plain", "multiview"])
    opts = parser.parse_args()
    dist.init_process_group("nccl")
    data = ToyDataset(4096)
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    net = DDP(ToyNet().cuda())
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(30):
        sampler.set_epoch(epoch)
        for batch in loader:
            x = batch["x"].cuda()
            opt.zero_grad()
            needs_backward = True
            if opts.model == "multiview":
                loss, needs_backward = views_backward(net, [x, x.flip(0)])
            else:
                loss = F.mse_loss(net(x), x)
            if needs_backward:
                loss.backward()
            opt.step()


if __name__ == "__main__":
    main()
