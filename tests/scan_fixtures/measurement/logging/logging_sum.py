"""The logged loss is all-reduced with SUM and printed as is: W times too large."""
# scan-facts: logs_rank0_only=false logged_loss_reduction_wrong=true rank_seeds_identical=true
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("gloo")
torch.manual_seed(0)  # expect: augmentation-rng-identical-across-ranks
model = DDP(ToyNet())
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(100):
    loss = model(torch.randn(8, 16)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    logged = loss.detach().clone()
    dist.all_reduce(logged, op=dist.ReduceOp.SUM)
    if dist.get_rank() == 0:
        print(f"step {step} loss {logged.item():.4f}")  # expect: metric-reduction-wrong
