"""The model is compiled in a function a launcher starts (fabric.launch(main)), which the
scan does not follow: neither "torch.compile is not used" nor "constant learning rate" can be
concluded from the loop alone."""
# scan-facts: uses_torch_compile=unknown warmup_steps=unknown
import lightning as L
import torch
import torch.nn.functional as F

from _toy import ToyNet


def fit(fabric, model, optimizer, scheduler, steps):
    for step in range(steps):
        x = torch.randn(16, 16, device=fabric.device)
        loss = F.mse_loss(model(x), x)
        fabric.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()


def main(fabric, steps):
    model = torch.compile(ToyNet())
    model = fabric.setup(model)
    optimizer = fabric.setup_optimizers(torch.optim.AdamW(model.parameters(), lr=1e-3))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 200))
    fit(fabric, model, optimizer, scheduler, steps)


if __name__ == "__main__":
    fabric = L.Fabric(devices=4, strategy="ddp")
    fabric.launch(main, 1000)
