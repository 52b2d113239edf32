"""A small CNN image classifier on a DeepSpeed engine, ZeRO stage 1, in the style of DeepSpeed's
CIFAR-10 tutorial: the DeepSpeed config is a dict in the script (DeepSpeed's Adam and WarmupLR
scheduler, two micro-batches per optimizer step, clipping at 1.0), the loop calls
model_engine(inputs), model_engine.backward(loss) and model_engine.step() on every micro-batch.
Synthetic 16x16 images (noisy copies of a prototype per class); the loader is the script's own, with
a DistributedSampler.

    DS_ACCELERATOR=cpu torchrun --nproc_per_node 2 cnn_zero1.py --epochs 2
"""

import argparse

import deepspeed
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

ds_config = {
    "train_micro_batch_size_per_gpu": 8,
    "gradient_accumulation_steps": 2,
    "steps_per_print": 1000,
    "optimizer": {
        "type": "Adam",
        "params": {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 3e-7},
    },
    "scheduler": {
        "type": "WarmupLR",
        "params": {"warmup_min_lr": 0, "warmup_max_lr": 1e-3, "warmup_num_steps": 4},
    },
    "gradient_clipping": 1.0,
    "zero_optimization": {"stage": 1},
}


class Net(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc2(F.relu(self.fc1(x)))


def synthetic_images(n=256, num_classes=10):
    """Noisy copies of one smooth random prototype image per class."""
    g = torch.Generator().manual_seed(1234)
    prototypes = F.interpolate(torch.randn(num_classes, 3, 4, 4, generator=g), size=(16, 16))
    labels = torch.randint(0, num_classes, (n,), generator=g)
    images = prototypes[labels] + 1.5 * torch.randn(n, 3, 16, 16, generator=g)
    return TensorDataset(images, labels)


def main():
    parser = argparse.ArgumentParser(description="CNN on DeepSpeed ZeRO-1")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--local_rank", type=int, default=-1, help="set by the deepspeed launcher")
    args = parser.parse_args()

    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(42)
    trainset = synthetic_images()
    net = Net()
    parameters = filter(lambda p: p.requires_grad, net.parameters())
    model_engine, _, _, lr_scheduler = deepspeed.initialize(
        model=net, model_parameters=parameters, config=ds_config
    )

    sampler = DistributedSampler(trainset, shuffle=True, seed=42)  # fault cnn_zero1_nosampler: -
    trainloader = DataLoader(trainset, batch_size=model_engine.train_micro_batch_size_per_gpu(), sampler=sampler)  # fault cnn_zero1_nosampler: trainloader = DataLoader(trainset, batch_size=model_engine.train_micro_batch_size_per_gpu(), shuffle=True)
    criterion = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # fault cnn_zero1_nosampler: -
        running = torch.zeros(2)
        for inputs, labels in trainloader:  # fault cnn_zero1_window: for i, (inputs, labels) in enumerate(trainloader):
            outputs = model_engine(inputs)
            loss = criterion(outputs, labels)
            model_engine.backward(loss)
            model_engine.step()  # fault cnn_zero1_window: if (i + 1) % ds_config["gradient_accumulation_steps"] == 0: || >model_engine.step()
            running += torch.tensor([loss.item() * labels.size(0), labels.size(0)])
        dist.all_reduce(running)
        if model_engine.global_rank == 0:
            print(
                f"epoch {epoch + 1}: loss {running[0] / running[1]:.4f}, "
                f"lr {lr_scheduler.get_last_lr()[0]:.2e}, optimizer steps {model_engine.global_steps}"
            )


if __name__ == "__main__":
    main()
