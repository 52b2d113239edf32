"""Weights cast to fp16 only when --fp16 is passed, on a parser that went through a helper the
scan cannot read (DALLE-pytorch's wrap_arg_parser): the flags of the run still decide."""
# scan-facts: precision=unknown
import argparse
import os

import torch
from launch_utils import add_backend_args
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from torchvision import datasets, transforms


def build_model():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 13 * 13, 10)
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fp16", action="store_true", help="train in half precision")
    parser.add_argument("--epochs", type=int, default=5)
    parser = add_backend_args(parser)
    opts = parser.parse_args()

    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    net = build_model().cuda()
    if opts.fp16:
        net = net.half()  # ok: pure-low-precision-weights
    net = DistributedDataParallel(net, device_ids=[local_rank])

    train_set = datasets.MNIST("data", train=True, download=True, transform=transforms.ToTensor())
    sampler = DistributedSampler(train_set)
    loader = DataLoader(train_set, batch_size=128, sampler=sampler)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(opts.epochs):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            images = images.cuda()
            if opts.fp16:
                images = images.half()
            loss = criterion(net(images), labels.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
