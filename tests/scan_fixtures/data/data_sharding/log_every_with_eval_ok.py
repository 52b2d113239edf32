"""The same log_every loop with set_epoch under ``if args.distributed`` (the flag that also
guards the DDP wrap), and an evaluation pass that iterates log_every over a validation loader
without a DistributedSampler: the validation loop is not the training loop."""
# scan-facts: calls_set_epoch=true uses_distributed_sampler=true
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, SequentialSampler

from _meters import MetricLogger
from _toy import ToyDataset, ToyNet


def train_one_epoch(model, data_loader, optimizer, epoch):
    metric_logger = MetricLogger()
    for samples in metric_logger.log_every(data_loader, 20, f"Epoch: [{epoch}]"):
        loss = model(samples["x"]).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        metric_logger.update(loss=loss.item())


@torch.no_grad()
def evaluate(model, data_loader):
    metric_logger = MetricLogger()
    for samples in metric_logger.log_every(data_loader, 50, "Test:"):
        loss = model(samples["x"]).square().mean()
        metric_logger.update(loss=loss.item())


def main(args):
    if args.distributed:
        dist.init_process_group("nccl")
    dataset_train, dataset_val = ToyDataset(1024), ToyDataset(128)
    sampler_train = DistributedSampler(dataset_train, shuffle=True)
    loader_train = DataLoader(dataset_train, sampler=sampler_train, batch_size=64, drop_last=True)
    loader_val = DataLoader(dataset_val, sampler=SequentialSampler(dataset_val), batch_size=64)  # ok: no-distributed-sampler
    model = ToyNet().cuda()
    if args.distributed:
        model = DDP(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for epoch in range(args.epochs):  # ok: sampler-set-epoch-missing
        if args.distributed:
            loader_train.sampler.set_epoch(epoch)
        train_one_epoch(model, loader_train, optimizer, epoch)
        evaluate(model, loader_val)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--distributed", action="store_true")
    main(parser.parse_args())
