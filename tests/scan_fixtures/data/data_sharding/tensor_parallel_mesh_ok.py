"""PyTorch tensor parallelism on a 2-D device mesh: the DataLoader is unsharded, which is right
for ranks of one tensor-parallel group; the scan does not call it a missing sampler."""
# scan-facts: uses_distributed_sampler=unknown
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module
from torch.utils.data import DataLoader, TensorDataset

dist.init_process_group("nccl")
mesh = init_device_mesh("cuda", (2, 4), mesh_dim_names=("dp", "tp"))
model = parallelize_module(nn.Linear(16, 16), mesh["tp"], ColwiseParallel())
data = TensorDataset(torch.randn(256, 16))
loader = DataLoader(data, batch_size=8, shuffle=True)  # ok: no-distributed-sampler
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for (x,) in loader:
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()
