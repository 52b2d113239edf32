"""Small CNN on synthetic 16x16 images, SGD + OneCycleLR, random flips and shifts.

torchrun --nproc_per_node 2 cnn_onecycle.py --epochs 2
"""

import argparse
import gc
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

NUM_CLASSES = 4


def get_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=4, help="images per process")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--train-size", type=int, default=96)
    parser.add_argument("--seed", type=int, default=42)
    return parser.parse_args()


def norm_layer(channels):
    return nn.GroupNorm(4, channels)  # fault cnn_batchnorm: return nn.BatchNorm2d(channels)


class ConvBlock(nn.Sequential):
    def __init__(self, c_in, c_out):
        super().__init__(
            nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
            norm_layer(c_out),
            nn.ReLU(inplace=True),
        )


class SmallCNN(nn.Module):
    def __init__(self, num_classes=NUM_CLASSES):
        super().__init__()
        self.features = nn.Sequential(
            ConvBlock(3, 16),
            nn.MaxPool2d(2),
            ConvBlock(16, 32),
            nn.MaxPool2d(2),
            ConvBlock(32, 32),
        )
        self.head = nn.Linear(32, num_classes)

    def forward(self, x):
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.head(x)


def synthetic_images(n, seed):
    colours = torch.randn(NUM_CLASSES, 3, 1, 1, generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, NUM_CLASSES, (n,), generator=g)
    images = colours[labels] + torch.randn(n, 3, 16, 16, generator=g)
    return TensorDataset(images, labels)


def random_flip_shift(images, gen):
    flip = torch.rand(images.size(0), generator=gen) < 0.5
    images = torch.where(flip[:, None, None, None], images.flip(-1), images)
    dy, dx = torch.randint(-2, 3, (2,), generator=gen).tolist()
    return torch.roll(images, shifts=(dy, dx), dims=(-2, -1))


def main():
    args = get_args()
    dist.init_process_group(backend="gloo")
    rank = dist.get_rank()
    world_size = dist.get_world_size()
    torch.manual_seed(args.seed)

    train_set = synthetic_images(args.train_size, seed=args.seed)
    val_set = synthetic_images(32, seed=args.seed + 1)
    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed)
    train_loader = DataLoader(
        train_set, batch_size=args.batch_size, sampler=sampler, drop_last=True
    )
    val_loader = DataLoader(
        val_set, batch_size=8, sampler=DistributedSampler(val_set, shuffle=False)
    )

    model = SmallCNN()
    model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=args.lr, epochs=args.epochs, steps_per_epoch=len(train_loader)
    )
    aug_gen = torch.Generator().manual_seed(args.seed + 1000 * rank)  # fault cnn_shared_aug_seed: aug_gen = torch.Generator().manual_seed(args.seed)

    step = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # fault cnn_no_set_epoch: -
        model.train()
        t0 = time.time()
        for images, labels in train_loader:
            images = random_flip_shift(images, aug_gen)
            logits = model(images)
            loss = F.cross_entropy(logits, labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            step += 1

            reduced = loss.detach().clone()
            dist.all_reduce(reduced)
            reduced /= world_size
            if rank == 0 and step % 4 == 0:
                lr = scheduler.get_last_lr()[0]
                print(f"epoch {epoch} step {step} loss {reduced.item():.4f} lr {lr:.4f}")

        model.eval()
        correct = torch.zeros(2)
        with torch.no_grad():
            for images, labels in val_loader:
                preds = model(images).argmax(dim=1)
                correct += torch.tensor([(preds == labels).sum().item(), labels.numel()])
        dist.all_reduce(correct)
        if rank == 0:
            acc = correct[0] / correct[1]
            print(f"epoch {epoch} val_acc {acc:.3f} ({time.time() - t0:.1f}s)")

    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
