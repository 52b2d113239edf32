"""ImageNet-example layout: the job becomes distributed only inside `elif args.distributed:`
and `if args.gpu is not None:`, and the head is replaced right after the wrap there. The job
being diagnosed is distributed, so that side runs: the late head is a fact."""
# scan-facts: module_created_after_wrap=true
import argparse

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torchvision.models as models


def main_worker(gpu, ngpus_per_node, args):
    args.gpu = gpu
    device = torch.device(f"cuda:{gpu}")
    model = models.resnet18()
    if args.cpu:
        print("using CPU, this will be slow")
    elif args.distributed:
        dist.init_process_group("nccl", world_size=ngpus_per_node, rank=gpu)
        if args.gpu is not None:
            torch.cuda.set_device(args.gpu)
            model.cuda(device)
            model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[args.gpu])
            model.module.fc = nn.Linear(model.module.fc.in_features, 100).cuda(device)  # expect: params-added-after-ddp-wrap
        else:
            model.cuda()
            model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    criterion = nn.CrossEntropyLoss().to(device)
    for step in range(100):
        images = torch.randn(8, 3, 224, 224, device=device)
        target = torch.randint(0, 100, (8,), device=device)
        loss = criterion(model(images), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--distributed", action="store_true")
    parser.add_argument("--cpu", action="store_true")
    args = parser.parse_args()
    ngpus = torch.cuda.device_count()
    mp.spawn(main_worker, nprocs=ngpus, args=(ngpus, args))
