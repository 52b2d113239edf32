"""Small ResNet on synthetic 16x16 images, DeepSpeed engine at ZeRO-1 in fp32.

A classic image-classification loop moved onto DeepSpeed: SGD with Nesterov momentum and a
OneCycle schedule handed to ``deepspeed.initialize``, the dataset augments on the fly
(random crop and flip), a DistributedSampler shards it, two epochs.
"""

import argparse
import gc

import deepspeed
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.skip = nn.Sequential()
        if stride != 1 or cin != cout:
            self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.skip(x))


class ResNet(nn.Module):
    def __init__(self, num_classes=10, width=16):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.layer1 = Block(width, width, 1)
        self.layer2 = Block(width, 2 * width, 2)
        self.head = nn.Linear(2 * width, num_classes)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


class NoisyShapes(Dataset):
    """Class-dependent blobs plus noise, padded to 20x20 and cropped back to 16x16."""

    def __init__(self, n=384, num_classes=10):
        g = torch.Generator().manual_seed(0)
        self.labels = torch.randint(0, num_classes, (n,), generator=g)
        centres = torch.rand(num_classes, 3, 1, 1, generator=g)
        self.images = centres[self.labels] + 0.3 * torch.randn(n, 3, 16, 16, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        img = F.pad(self.images[i], (2, 2, 2, 2), mode="reflect")
        top, left = torch.randint(0, 5, (2,)).tolist()
        img = img[:, top : top + 16, left : left + 16]
        if torch.rand(()) < 0.5:
            img = img.flip(-1)
        return img, self.labels[i]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=24)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--local_rank", type=int, default=-1)
    args = parser.parse_args()

    deepspeed.init_distributed(dist_backend="gloo")
    rank = dist.get_rank()
    world_size = dist.get_world_size()
    torch.manual_seed(args.seed + rank)  # fault resnet_zero1_same_seed: torch.manual_seed(args.seed)

    dataset = NoisyShapes()
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True)

    model = ResNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=args.lr, total_steps=args.epochs * len(loader), pct_start=0.25
    )
    ds_config = {
        "train_micro_batch_size_per_gpu": args.batch_size,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": 5.0,
        "zero_optimization": {"stage": 1},
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 1000,
    }
    engine, optimizer, _, scheduler = deepspeed.initialize(
        model=model, optimizer=optimizer, lr_scheduler=scheduler, config=ds_config
    )

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # fault resnet_zero1_no_set_epoch: -
        engine.train()
        running = torch.zeros(2)
        for images, labels in loader:
            images = images.to(engine.device)
            labels = labels.to(engine.device)
            logits = engine(images)
            loss = F.cross_entropy(logits, labels)  # fault resnet_zero1_loss_over_world: loss = F.cross_entropy(logits, labels) / world_size
            engine.backward(loss)
            engine.step()
            running += torch.tensor([loss.item(), 1.0])
        dist.all_reduce(running)
        if rank == 0:
            print(
                f"epoch {epoch} loss {running[0] / running[1]:.4f} "
                f"lr {scheduler.get_last_lr()[0]:.4f} steps {engine.global_steps}",
                flush=True,
            )

    del engine, optimizer, scheduler, model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
