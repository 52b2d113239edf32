"""Lightning Fabric: setup_dataloaders() puts a DistributedSampler in and sets its epoch."""
# scan-facts: uses_distributed_sampler=true calls_set_epoch=true uses_fsdp_or_zero=false
import lightning as L
import torch
from torch.utils.data import DataLoader

from _toy import ToyDataset, ToyNet


def main():
    fabric = L.Fabric(accelerator="cuda", devices=4, strategy="ddp")
    fabric.launch()
    model = ToyNet()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, opt = fabric.setup(model, opt)
    loader = DataLoader(ToyDataset(512), batch_size=8, shuffle=True)  # ok: no-distributed-sampler
    loader = fabric.setup_dataloaders(loader)
    for epoch in range(2):  # ok: sampler-set-epoch-missing
        for batch in loader:
            loss = model(batch["x"]).square().mean()
            fabric.backward(loss)
            opt.step()
            opt.zero_grad()


main()
