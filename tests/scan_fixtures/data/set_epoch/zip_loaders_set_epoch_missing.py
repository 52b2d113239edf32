"""Semi-supervised: each step zips a labelled and an unlabelled loader, both sharded by a
DistributedSampler; the epoch loop sets the epoch of neither."""
# scan-facts: calls_set_epoch=false
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

dist.init_process_group("nccl")
labelled, unlabelled = ToyDataset(512), ToyDataset(4096)
lab_loader = DataLoader(labelled, batch_size=16, sampler=DistributedSampler(labelled))
unl_loader = DataLoader(unlabelled, batch_size=64, sampler=DistributedSampler(unlabelled))
model = DDP(ToyNet().cuda())
opt = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9)
for epoch in range(50):  # expect: sampler-set-epoch-missing
    for lab, unl in zip(lab_loader, unl_loader):
        sup = model(lab["x"].cuda()).square().mean()
        cons = (model(unl["x"].cuda()) - model(unl["x"].cuda()).detach()).square().mean()
        loss = sup + 0.5 * cons
        opt.zero_grad()
        loss.backward()
        opt.step()
