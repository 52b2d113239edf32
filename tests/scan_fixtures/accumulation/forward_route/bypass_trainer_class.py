"""A trainer class that keeps the DDP model on self and calls the inner module for the step."""
# scan-facts: forward_bypasses_ddp=true
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class MLP(nn.Module):
    def __init__(self, d_in=32, d_hidden=128, n_out=10):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, d_hidden), nn.GELU(), nn.Linear(d_hidden, n_out))

    def forward(self, x):
        return self.net(x)


class Trainer:
    def __init__(self, model, loader, sampler, lr=1e-3):
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.model = DistributedDataParallel(model)
        self.loader = loader
        self.sampler = sampler
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr)

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model.module(source)  # expect: ddp-wrapper-bypassed
        loss = F.cross_entropy(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()

    def _save_checkpoint(self, epoch):
        ckp = self.model.module.state_dict()  # ok: ddp-wrapper-bypassed
        torch.save({"epoch": epoch, "model": ckp}, "checkpoint.pt")

    def train(self, max_epochs):
        for epoch in range(max_epochs):
            self.sampler.set_epoch(epoch)
            for source, targets in self.loader:
                self._run_batch(source, targets)
            if self.local_rank == 0:
                self._save_checkpoint(epoch)


def main():
    dist.init_process_group(backend="gloo")
    ds = TensorDataset(torch.randn(2048, 32), torch.randint(0, 10, (2048,)))
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=32, sampler=sampler, shuffle=False)
    Trainer(MLP(), loader, sampler).train(5)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
