"""The classic: a DDP job that forgot to shard its data."""
# scan-facts: uses_distributed_sampler=false calls_set_epoch=unknown sampler_seed_rank_dependent=unknown
# scan-facts: grad_accum_steps=1 zero_grad_every_micro_step=false uses_no_sync=false per_gpu_batch_size=32
# scan-facts: optimizer_family=sgd adam_beta2=unknown warmup_steps=0 lr_scaling=unknown uses_grad_clipping=false
# scan-facts: logs_rank0_only=true clip_inside_no_sync=unknown
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset

dist.init_process_group(backend="gloo")
rank = dist.get_rank()

dataset = TensorDataset(torch.randn(1024, 10), torch.randint(0, 2, (1024,)))
loader = DataLoader(dataset, batch_size=32, shuffle=True, num_workers=2)  # expect: no-distributed-sampler

model = DistributedDataParallel(nn.Linear(10, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
criterion = nn.CrossEntropyLoss()

for epoch in range(5):
    for x, y in loader:
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        opt.step()  # expect: grad-clip-missing
    if rank == 0:
        print("epoch", epoch, "loss", loss.item())  # expect: rank0-only-loss-logging
