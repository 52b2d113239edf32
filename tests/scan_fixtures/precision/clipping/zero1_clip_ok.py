"""ZeroRedundancyOptimizer shards only the optimizer state: DDP still all-reduces whole
gradients, so torch.nn.utils.clip_grad_norm_ on the model's parameters sees the global norm."""
# scan-facts: clip_inside_no_sync=false uses_grad_clipping=true uses_fsdp_or_zero=true
import os

import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(ToyNet().cuda())
optimizer = ZeroRedundancyOptimizer(
    model.parameters(), optimizer_class=torch.optim.AdamW, lr=3e-4
)
for step in range(100):
    x = torch.randn(8, 16, device="cuda")
    loss = model(x).pow(2).mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
