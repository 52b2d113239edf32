"""Entry script outside the package: the loop lives in detlib.engine, imported by package name.
It never reshuffles per epoch: set_epoch is missing in the package's loop."""
# scan-facts: calls_set_epoch=false uses_distributed_sampler=true variable_length_sequences=false
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

import detlib.util.misc as misc
from detlib.engine import train_one_epoch
from detlib.models import build_model


def main(args):
    misc.init_distributed_mode(args)
    model = build_model(args)
    model = DistributedDataParallel(model, device_ids=[args.gpu])
    dataset = misc.RandomBoxes(1024)
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=8, sampler=sampler)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for epoch in range(args.epochs):  # expect: sampler-set-epoch-missing
        train_one_epoch(model, loader, optimizer, epoch)
        if misc.is_main_process():
            torch.save(model.module.state_dict(), "ckpt.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=12)
    main(parser.parse_args())
