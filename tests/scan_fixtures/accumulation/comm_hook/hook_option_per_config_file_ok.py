"""The script runs one job per config file it is given (``--cfg a.yaml b.yaml``), each set up
and wrapped inside the loop; a config key switches a compression hook on. The config object
rebound on each pass is the run's configuration, not something that changes as training goes
on, so the hook stays the run's choice and neither fact is decided."""
# scan-facts: uses_comm_hook=unknown comm_hook_averages=unknown
import argparse

import torch
import torch.distributed as dist
import yaml
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet


def build(cfg):
    net = DDP(ToyNet().cuda())
    if cfg["half_grads"]:
        net.register_comm_hook(None, default_hooks.fp16_compress_hook)  # ok: custom-comm-hook-scaling
    return net


def fit(cfg):
    net = build(cfg)
    opt = torch.optim.SGD(net.parameters(), lr=cfg["lr"])
    for step in range(cfg["steps"]):
        loss = net(torch.randn(8, 16, device="cuda")).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cfg", nargs="+", required=True)
    opts = parser.parse_args()
    dist.init_process_group("nccl")
    for path in opts.cfg:
        with open(path) as f:
            cfg = yaml.safe_load(f)
        fit(cfg)


if __name__ == "__main__":
    main()
