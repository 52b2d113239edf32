"""Pretrained weights read on rank 0 only (to save host memory), then the model is sharded
with FSDP, whose ``sync_module_states`` defaults to False: rank 0's weights are never sent to
the other ranks, which train from their own random initialisation."""
# scan-facts: rank_conditional_state_change=true
import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

from _toy import ToyNet

dist.init_process_group("nccl")
torch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())
net = ToyNet()
if dist.get_rank() == 0:
    net.load_state_dict(torch.load("pretrained.pt", map_location="cpu"))  # expect: checkpoint-loaded-on-rank0-only
model = FSDP(net, device_id=torch.cuda.current_device())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(1000):
    loss = model(torch.randn(8, 16, device="cuda")).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
