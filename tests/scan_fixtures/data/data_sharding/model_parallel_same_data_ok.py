"""Tensor parallelism over every rank (Megatron-style parallel state): the ranks of one
tensor-parallel group must read the same batches, so the unsharded DataLoader is no finding."""
# scan-facts: uses_distributed_sampler=unknown
import torch
import torch.distributed as dist
from megatron.core import parallel_state
from megatron.core.models.gpt import GPTModel
from torch.utils.data import DataLoader, TensorDataset

dist.init_process_group("nccl")
parallel_state.initialize_model_parallel(tensor_model_parallel_size=2)

tokens = TensorDataset(torch.randint(0, 1000, (512, 64)))
loader = DataLoader(tokens, batch_size=8, shuffle=True)  # ok: no-distributed-sampler
model = GPTModel()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
for (batch,) in loader:
    optimizer.zero_grad()
    model(batch).mean().backward()
    optimizer.step()
