"""The training script takes a decode helper from the sampling script beside it. That
script's own ``if __name__ == "__main__":`` seeds a fixed value, but it never runs on
import, so it says nothing about the training ranks' seeds."""
# scan-facts: rank_seeds_identical=unknown
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _sample import decode
from _toy import ToyNet

dist.init_process_group("gloo")
model = DDP(ToyNet())
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(100):
    x = torch.randn(8, 16)
    loss = model(x).pow(2).mean()
    loss.backward()  # ok: augmentation-rng-identical-across-ranks
    optimizer.step()
    optimizer.zero_grad()
    if step % 50 == 0:
        with torch.no_grad():
            decode(model.module, x[:1])
