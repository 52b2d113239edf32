"""FSDP with a mixed-precision policy: parameters are cast for the forward by the wrapper, with
no autocast in the loop. The policy object decides the dtype, so precision is not fp32."""
# scan-facts: precision=unknown
import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


def policy(dtype):
    return MixedPrecision(param_dtype=dtype, reduce_dtype=dtype, buffer_dtype=dtype)


def main():
    dist.init_process_group("nccl")
    model = FSDP(ToyNet().cuda(), mixed_precision=policy(torch.bfloat16))
    ds = ToyDataset(256)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=8, sampler=sampler)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for batch in loader:
            loss = model(batch["x"]).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()


main()
