"""Pretrained weights read on rank 0 only, then sharded by FSDP with
``sync_module_states=True``: FSDP broadcasts rank 0's weights to every rank as it wraps."""
# scan-facts: uses_fsdp_or_zero=true
import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

from _toy import ToyNet

dist.init_process_group("nccl")
torch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())
net = ToyNet()
if dist.get_rank() == 0:
    net.load_state_dict(torch.load("pretrained.pt", map_location="cpu"))  # ok: checkpoint-loaded-on-rank0-only
model = FSDP(net, device_id=torch.cuda.current_device(), sync_module_states=True)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(1000):
    loss = model(torch.randn(8, 16, device="cuda")).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
