"""Advantage actor-critic on a batched toy corridor, data-parallel over the ranks.

Every rank steps its own batch of corridors (resets, slips and sampled actions drawn from
generators seeded per rank) and collects a short rollout without gradients; then one forward
through the DDP model recomputes logits and values for the whole rollout, and n-step returns
are bootstrapped from the critic. One Adam update per rollout, the gradient norm clipped;
DDP averages the actor-critic gradients.

    python -m torch.distributed.run --nproc_per_node 2 a2c_corridor.py
"""

from __future__ import annotations

import argparse
import gc

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

MOVES = torch.tensor([-1, 1, 0])  # left, right, stay


class Corridors:
    """``n`` corridors of ``length`` cells: reward 1 on reaching the right end (then a reset
    to a random cell of the left half), -0.01 per step; an action slips to a random one with
    probability ``slip``."""

    def __init__(self, n: int, length: int, gen: torch.Generator, slip: float = 0.2) -> None:
        self.n, self.length, self.gen, self.slip = n, length, gen, slip
        self.pos = self._fresh()

    def _fresh(self) -> torch.Tensor:
        return torch.randint(0, self.length // 2, (self.n,), generator=self.gen)

    def obs(self) -> torch.Tensor:
        one_hot = F.one_hot(self.pos, self.length).float()
        return torch.cat([one_hot, (self.pos.float() / (self.length - 1)).unsqueeze(1)], 1)

    def step(self, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        slipped = torch.rand(self.n, generator=self.gen) < self.slip
        random_action = torch.randint(0, 3, (self.n,), generator=self.gen)
        action = torch.where(slipped, random_action, action)
        self.pos = (self.pos + MOVES[action]).clamp(0, self.length - 1)
        done = self.pos == self.length - 1
        reward = torch.where(done, torch.tensor(1.0), torch.tensor(-0.01))
        self.pos = torch.where(done, self._fresh(), self.pos)
        return reward, done.float()


class ActorCritic(nn.Module):
    def __init__(self, obs_dim: int, hidden: int = 64, actions: int = 3) -> None:
        super().__init__()
        self.trunk = nn.Sequential(
            nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh()
        )
        self.pi = nn.Linear(hidden, actions)
        self.v = nn.Linear(hidden, 1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(obs)
        return self.pi(h), self.v(h).squeeze(-1)


def n_step_returns(
    rewards: torch.Tensor, dones: torch.Tensor, bootstrap: torch.Tensor, gamma: float
) -> torch.Tensor:
    out = torch.zeros_like(rewards)
    running = bootstrap
    for t in reversed(range(rewards.shape[0])):
        running = rewards[t] + gamma * running * (1.0 - dones[t])
        out[t] = running
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--envs", type=int, default=16)
    parser.add_argument("--horizon", type=int, default=8)
    parser.add_argument("--length", type=int, default=8)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--gamma", type=float, default=0.95)
    parser.add_argument("--seed", type=int, default=7)  # fault a2c_local_rank_arg: = || parser.add_argument("--local_rank", type=int, default=-1)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)  # the same initial weights everywhere

    rollout_seed = args.seed + 1000 * rank  # fault a2c_same_env_seed: rollout_seed = args.seed
    env_gen = torch.Generator().manual_seed(rollout_seed)
    envs = Corridors(args.envs, args.length, env_gen)
    act_gen = torch.Generator().manual_seed(rollout_seed + 17)

    net = ActorCritic(args.length + 1)
    model = DDP(net)  # fault a2c_local_rank_arg: model = DDP(net) if args.local_rank != -1 else net
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    for update in range(args.updates):
        obs_buf, act_buf, rew_buf, done_buf = [], [], [], []
        with torch.no_grad():
            for _ in range(args.horizon):
                obs = envs.obs()
                logits, _ = model(obs)
                action = torch.multinomial(F.softmax(logits, -1), 1, generator=act_gen).squeeze(1)
                reward, done = envs.step(action)
                obs_buf.append(obs)
                act_buf.append(action)
                rew_buf.append(reward)
                done_buf.append(done)
        last_obs = envs.obs()

        flat_obs = torch.cat([*obs_buf, last_obs])
        logits, values = model(flat_obs)
        steps = args.horizon * args.envs
        logits, values, bootstrap = logits[:steps], values[:steps], values[steps:].detach()
        rewards, dones = torch.stack(rew_buf), torch.stack(done_buf)
        returns = n_step_returns(rewards, dones, bootstrap, args.gamma).reshape(-1)
        advantage = returns - values.detach()
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-6)

        logp = F.log_softmax(logits, -1)
        chosen = logp.gather(1, torch.cat(act_buf).unsqueeze(1)).squeeze(1)
        entropy = -(logp.exp() * logp).sum(-1).mean()
        policy_loss = -(chosen * advantage).mean()
        value_loss = F.mse_loss(values, returns)
        loss = policy_loss + 0.5 * value_loss - 0.01 * entropy  # fault a2c_loss_times_world: loss = (policy_loss + 0.5 * value_loss - 0.01 * entropy) * world_size

        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()

        stats = torch.stack([rewards.sum(), dones.sum(), loss.detach()])
        dist.all_reduce(stats)
        if rank == 0 and update % 5 == 0:
            print(
                f"update {update} reward/env {stats[0].item() / (args.envs * world_size):.3f} "
                f"episodes {int(stats[1].item())} loss {stats[2].item() / world_size:.4f}",
                flush=True,
            )

    del model, net, optimizer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
