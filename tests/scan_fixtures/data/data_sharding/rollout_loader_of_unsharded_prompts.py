"""The same rollout loop, but the prompt loader is never prepared: every rank draws the same
prompts in the same order, so the rollouts built from them repeat on every rank."""

# scan-facts: uses_distributed_sampler=unknown
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

from _toy import ToyDataset, ToyNet

accelerator = Accelerator()
policy = ToyNet()
opt = torch.optim.AdamW(policy.parameters(), lr=1e-5)
prompts = DataLoader(ToyDataset(4096), batch_size=32, shuffle=True)
policy, opt = accelerator.prepare(policy, opt)
queries = iter(prompts)
for step in range(500):
    batch = next(queries)
    with torch.no_grad():
        rewards = policy(batch["x"]).square().sum(-1)
    rollout_loader = DataLoader(TensorDataset(batch["x"], rewards), batch_size=4, shuffle=True)
    for x, r in rollout_loader:
        loss = -(policy(x).sum(-1) * r).mean()
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
