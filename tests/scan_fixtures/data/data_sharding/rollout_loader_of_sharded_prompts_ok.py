"""PPO-style: each step draws prompts from an endless wrapper over a loader that accelerate
shards, generates responses on this rank, and trains on a DataLoader rebuilt from those
rollouts. The rollout loader needs no sampler of its own: its data is already this rank's."""

# scan-facts: uses_distributed_sampler=true
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

from _toy import ToyDataset, ToyNet


class Endless:
    def __init__(self, loader):
        self.loader = loader
        self.iterator = iter(loader)

    def __next__(self):
        try:
            return next(self.iterator)
        except StopIteration:
            self.iterator = iter(self.loader)
            return next(self.iterator)


accelerator = Accelerator()
policy = ToyNet()
opt = torch.optim.AdamW(policy.parameters(), lr=1e-5)
prompts = DataLoader(ToyDataset(4096), batch_size=32, shuffle=True)
policy, opt, prompts = accelerator.prepare(policy, opt, prompts)
queries = Endless(prompts)
for step in range(500):
    batch = next(queries)
    with torch.no_grad():
        actions = policy(batch["x"])
        rewards = actions.square().sum(-1)
    rollouts = TensorDataset(batch["x"], rewards)
    rollout_loader = DataLoader(rollouts, batch_size=4, shuffle=True)  # ok: no-distributed-sampler
    for x, r in rollout_loader:
        loss = -(policy(x).sum(-1) * r).mean()
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
