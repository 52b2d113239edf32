"""Multi-task tabular model: listing price (regression) and market segment (classification)
from one shared trunk, trained with the epoch loop of mt_engine.py."""

import argparse
import gc
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
from mt_engine import evaluate, train_one_epoch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def get_args_parser():
    parser = argparse.ArgumentParser(description="multi-task tabular training", add_help=True)
    parser.add_argument("--epochs", default=3, type=int)
    parser.add_argument("-b", "--batch-size", default=32, type=int, help="per process")
    parser.add_argument("--lr", default=0.1, type=float)
    parser.add_argument("--momentum", default=0.9, type=float)
    parser.add_argument("--wd", "--weight-decay", default=1e-4, type=float, dest="weight_decay")
    parser.add_argument("--price-weight", default=0.5, type=float)
    parser.add_argument("--num-segments", default=4, type=int)
    parser.add_argument("--clip-grad-norm", default=None, type=float)
    parser.add_argument("--print-freq", default=4, type=int)
    parser.add_argument("--output-dir", default=None, type=str)
    parser.add_argument("--resume", default="", type=str)
    parser.add_argument("--seed", default=17, type=int)
    return parser


def make_listings(n, n_regions, n_segments, seed):
    g = torch.Generator().manual_seed(seed)
    region = torch.randint(n_regions, (n,), generator=g)
    numeric = torch.randn(n, 7, generator=g)
    region_price = torch.linspace(-1, 1, n_regions)
    price = numeric[:, :3].sum(1) * 0.4 + region_price[region] + 0.1 * torch.randn(n, generator=g)
    segment = torch.bucketize(numeric[:, 3] + 0.5 * numeric[:, 4], torch.tensor([-0.8, 0.0, 0.8]))
    segment = segment.clamp(max=n_segments - 1)
    x = torch.cat([region[:, None].float(), numeric], 1)
    return TensorDataset(x, price, segment)


class MultiTaskNet(nn.Module):
    def __init__(self, n_regions=16, n_numeric=7, hidden=64):
        super().__init__()
        self.region = nn.Embedding(n_regions, 8)
        self.trunk = nn.Sequential(
            nn.Linear(8 + n_numeric, hidden), nn.LayerNorm(hidden), nn.SiLU(),
            nn.Linear(hidden, hidden), nn.SiLU(),
        )
        self.heads = nn.ModuleDict()
        self.hidden = hidden

    def add_head(self, name, out_features):
        self.heads[name] = nn.Sequential(nn.Linear(self.hidden, self.hidden // 2), nn.SiLU(), nn.Linear(self.hidden // 2, out_features))

    def forward(self, x):
        h = self.trunk(torch.cat([self.region(x[:, 0].long()), x[:, 1:]], 1))
        return {name: head(h) for name, head in self.heads.items()}


def main(args):
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(args.seed)

    dataset = make_listings(512, 16, args.num_segments, seed=args.seed)
    dataset_test = make_listings(128, 16, args.num_segments, seed=args.seed + 1)
    train_sampler = DistributedSampler(dataset)
    test_sampler = DistributedSampler(dataset_test, shuffle=False)
    data_loader = DataLoader(dataset, batch_size=args.batch_size, sampler=train_sampler, drop_last=True)
    data_loader_test = DataLoader(dataset_test, batch_size=64, sampler=test_sampler)

    model = MultiTaskNet()
    model.add_head("price", 1)
    model.add_head("segment", args.num_segments)  # fault mt_head_after_wrap: -
    model = nn.parallel.DistributedDataParallel(model)  # fault mt_head_after_wrap: = || model.module.add_head("segment", args.num_segments)
    model_without_ddp = model.module

    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
    lr_scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs, eta_min=1e-4)

    start_epoch = 0
    if args.resume:
        checkpoint = torch.load(args.resume, map_location="cpu")
        model_without_ddp.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        lr_scheduler.load_state_dict(checkpoint["lr_scheduler"])
        start_epoch = checkpoint["epoch"] + 1

    output_dir = args.output_dir or (tempfile.mkdtemp(prefix="mt-") if rank == 0 else None)
    for epoch in range(start_epoch, args.epochs):
        train_sampler.set_epoch(epoch)  # fault mt_no_set_epoch: -
        train_one_epoch(model, optimizer, data_loader, epoch, args)  # fault mt_sched_per_iter: train_one_epoch(model, optimizer, data_loader, epoch, args, lr_scheduler=lr_scheduler)
        lr_scheduler.step()  # fault mt_sched_per_iter: -
        evaluate(model, data_loader_test, args)
        if rank == 0:
            checkpoint = {
                "model": model_without_ddp.state_dict(),
                "optimizer": optimizer.state_dict(),
                "lr_scheduler": lr_scheduler.state_dict(),
                "epoch": epoch,
            }
            torch.save(checkpoint, os.path.join(output_dir, "checkpoint.pth"))

    dist.barrier()
    if rank == 0 and not args.output_dir:
        os.remove(os.path.join(output_dir, "checkpoint.pth"))
        os.rmdir(output_dir)
    del model, model_without_ddp
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(get_args_parser().parse_args())
