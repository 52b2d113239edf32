"""Options parsed into a dict: the rank is stored under a key and added to the seed a
helper module's ``set_random_seed`` gets. The scan cannot follow the dict entry, so it
must not call the seed identical on every rank."""
# scan-facts: rank_seeds_identical=unknown
import argparse
import random

import numpy as np
import torch
import torch.distributed as dist
import yaml
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet


def set_random_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # ok: augmentation-rng-identical-across-ranks


def parse_options():
    parser = argparse.ArgumentParser()
    parser.add_argument("-opt", required=True)
    args = parser.parse_args()
    with open(args.opt) as f:
        opt = yaml.safe_load(f)
    dist.init_process_group("gloo")
    opt["rank"], opt["world_size"] = dist.get_rank(), dist.get_world_size()
    seed = opt.get("manual_seed")
    if seed is None:
        seed = random.randint(1, 10000)
    set_random_seed(seed + opt["rank"])
    return opt


opt = parse_options()
model = DDP(ToyNet())
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(100):
    loss = model(torch.randn(8, 16)).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
