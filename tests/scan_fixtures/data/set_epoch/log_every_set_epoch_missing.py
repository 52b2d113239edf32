"""MAE/DeiT-style: the step loop iterates ``metric_logger.log_every(data_loader, …)``, a
generator over the loader; the epoch loop around it never calls set_epoch."""
# scan-facts: calls_set_epoch=false uses_distributed_sampler=true
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _meters import MetricLogger
from _toy import ToyDataset, ToyNet


def train_one_epoch(model, data_loader, optimizer, epoch):
    model.train()
    metric_logger = MetricLogger()
    header = f"Epoch: [{epoch}]"
    for samples in metric_logger.log_every(data_loader, 20, header):
        loss = model(samples["x"]).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        metric_logger.update(loss=loss.item())


def main(args):
    dist.init_process_group("nccl")
    dataset = ToyDataset(1024)
    sampler = DistributedSampler(dataset, shuffle=True)
    data_loader = DataLoader(dataset, sampler=sampler, batch_size=args.batch_size, drop_last=True)
    model = DDP(ToyNet().cuda())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for epoch in range(args.epochs):  # expect: sampler-set-epoch-missing
        train_one_epoch(model, data_loader, optimizer, epoch)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--batch_size", type=int, default=64)
    main(parser.parse_args())
