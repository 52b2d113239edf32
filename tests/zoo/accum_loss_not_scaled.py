"""HF-style training loop: dict batches, a model that returns its loss, accumulation."""

import gc
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


@dataclass
class TrainingArguments:
    per_device_train_batch_size: int = 8
    gradient_accumulation_steps: int = 4
    learning_rate: float = 0.02
    num_train_epochs: int = 2
    max_grad_norm: float = 5.0
    logging_steps: int = 4


class PairDataset(Dataset):
    def __init__(self, n=512):
        g = torch.Generator().manual_seed(8)
        self.a = torch.randn(n, 16, generator=g)
        self.b = torch.randn(n, 16, generator=g)
        self.y = (self.a * self.b).sum(1)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {"input_a": self.a[i], "input_b": self.b[i], "labels": self.y[i]}


class SiameseRegressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 16))

    def forward(self, input_a, input_b, labels=None):
        score = (self.encoder(input_a) * self.encoder(input_b)).sum(-1)
        out = {"logits": score}
        if labels is not None:
            out["loss"] = F.mse_loss(score, labels)
        return out


def train(args):
    dataset = PairDataset()
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=args.per_device_train_batch_size, sampler=sampler)
    model = DDP(SiameseRegressor())
    optimizer = torch.optim.SGD(model.parameters(), lr=args.learning_rate, momentum=0.9)
    global_step = 0
    tr_loss = torch.zeros(())
    for epoch in range(args.num_train_epochs):
        sampler.set_epoch(epoch)
        for step, batch in enumerate(loader):
            outputs = model(**batch)
            loss = outputs["loss"]  # fix: loss = outputs["loss"] / args.gradient_accumulation_steps
            loss.backward()
            tr_loss += loss.detach()  # fix: tr_loss += loss.detach() * args.gradient_accumulation_steps
            if (step + 1) % args.gradient_accumulation_steps == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                optimizer.step()
                optimizer.zero_grad()
                global_step += 1
                if global_step % args.logging_steps == 0:
                    dist.all_reduce(tr_loss)
                    if dist.get_rank() == 0:
                        avg = tr_loss.item() / dist.get_world_size() / (args.logging_steps * args.gradient_accumulation_steps)
                        print({"step": global_step, "loss": round(avg, 4)})
                    tr_loss.zero_()
    return model


if __name__ == "__main__":
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    m = train(TrainingArguments())
    del m
    gc.collect()
    dist.destroy_process_group()
