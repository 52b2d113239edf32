"""Lightning Fabric launches four ranks, but the loader never goes through setup_dataloaders():
every rank reads the whole dataset in the same shuffled order."""
# scan-facts: uses_distributed_sampler=false
import lightning as L
import torch
from torch.utils.data import DataLoader

from _toy import ToyDataset, ToyNet


def main():
    fabric = L.Fabric(accelerator="cuda", devices=4)
    fabric.launch()
    model = ToyNet()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, opt = fabric.setup(model, opt)
    loader = DataLoader(ToyDataset(512), batch_size=8, shuffle=True)  # expect: no-distributed-sampler
    for epoch in range(2):
        for batch in loader:
            loss = model(batch["x"]).square().mean()
            fabric.backward(loss)
            opt.step()
            opt.zero_grad()


main()
