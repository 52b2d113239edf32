"""The experiment object is loaded by name through importlib, which the scan cannot follow;
the entry function's annotation names the project's experiment class, whose ``trainer()``
builds the trainer that holds the loop. Its epoch loop never sets the sampler's epoch."""
# scan-facts: calls_set_epoch=false uses_distributed_sampler=true hand_written_loop=true
import argparse
import importlib

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


class Runner:
    def __init__(self, exp, opts):
        self.exp = exp
        self.epochs = opts.epochs

    def run(self):
        dist.init_process_group("nccl")
        data = ToyDataset(4096)
        self.sampler = DistributedSampler(data)
        self.loader = DataLoader(data, batch_size=32, sampler=self.sampler)
        self.net = DDP(ToyNet().cuda())
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.01, momentum=0.9)
        for self.epoch in range(self.epochs):  # expect: sampler-set-epoch-missing
            self.one_epoch()

    def one_epoch(self):
        for batch in self.loader:
            loss = self.net(batch["x"].cuda()).pow(2).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()


class Experiment:
    def trainer(self, opts):
        return Runner(self, opts)


def main(exp: Experiment, opts):
    exp.trainer(opts).run()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="small")
    parser.add_argument("--epochs", type=int, default=50)
    opts = parser.parse_args()
    exp = importlib.import_module("experiments." + opts.name).Exp()
    main(exp, opts)
