"""YOLO-style: the layers are listed in a YAML file and built by name (`getattr(nn, kind)`),
so the scan cannot see whether one of them is a BatchNorm."""
# scan-facts: has_batchnorm=unknown
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import yaml
from torch.nn.parallel import DistributedDataParallel as DDP


class YamlNet(nn.Module):
    def __init__(self, cfg_path):
        super().__init__()
        with open(cfg_path) as f:
            spec = yaml.safe_load(f)
        layers = []
        for kind, layer_args in spec["layers"]:
            layers.append(getattr(nn, kind)(*layer_args))
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return self.body(x)


parser = argparse.ArgumentParser()
parser.add_argument("--cfg", default="models/net.yaml")
args = parser.parse_args()

dist.init_process_group("nccl")
model = DDP(YamlNet(args.cfg).cuda())  # ok: batchnorm-without-syncbn
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
for step in range(1000):
    x = torch.randn(16, 3, 64, 64, device="cuda")
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
