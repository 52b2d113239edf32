"""Lightning Fabric: the clipping is fabric.clip_gradients(), which unscales and clips."""
# scan-facts: uses_grad_clipping=true
import lightning as L
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from _toy import ToyDataset, ToyNet


def main():
    fabric = L.Fabric(accelerator="cuda", devices=4, strategy="ddp", precision="bf16-mixed")
    fabric.launch()
    model = ToyNet()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    model, optimizer = fabric.setup(model, optimizer)
    loader = fabric.setup_dataloaders(DataLoader(ToyDataset(2048), batch_size=16, shuffle=True))
    for epoch in range(3):
        for batch in loader:
            loss = F.mse_loss(model(batch["x"]), batch["x"])
            fabric.backward(loss)
            fabric.clip_gradients(model, optimizer, max_norm=1.0)
            optimizer.step()  # ok: grad-clip-missing
            optimizer.zero_grad()


if __name__ == "__main__":
    main()
