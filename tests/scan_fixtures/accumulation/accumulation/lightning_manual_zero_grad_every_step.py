"""Lightning manual optimization with its own accumulation (two optimizers, a GAN-style VAE):
zero_grad() sits before the backward on every batch, outside the `if` that steps, so only the
last micro-batch's gradient reaches each step when the count is above 1 (PreDiff issue 32)."""
# scan-facts: hand_written_loop=true zero_grad_every_micro_step=true
import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class AutoEncoder(L.LightningModule):
    def __init__(self, accumulate_grad_batches: int = 1) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.accumulate_grad_batches = accumulate_grad_batches
        self.enc = nn.Linear(16, 4)
        self.dec = nn.Linear(4, 16)
        self.disc = nn.Linear(16, 1)

    def training_step(self, batch, batch_idx):
        g_opt, d_opt = self.optimizers()
        (x,) = batch
        recon = self.dec(self.enc(x))
        g_loss = (recon - x).pow(2).mean() - self.disc(recon).mean()
        g_opt.zero_grad()  # expect: zero-grad-inside-accumulation
        self.manual_backward(g_loss)
        if (batch_idx + 1) % self.accumulate_grad_batches == 0:
            g_opt.step()
        d_loss = self.disc(recon.detach()).mean() - self.disc(x).mean()
        d_opt.zero_grad()
        self.manual_backward(d_loss)
        if (batch_idx + 1) % self.accumulate_grad_batches == 0:
            d_opt.step()

    def configure_optimizers(self):
        g = torch.optim.Adam([*self.enc.parameters(), *self.dec.parameters()], lr=1e-3)
        d = torch.optim.Adam(self.disc.parameters(), lr=1e-3)
        return [{"optimizer": g}, {"optimizer": d}]


data = DataLoader(TensorDataset(torch.randn(512, 16)), batch_size=16, shuffle=True)
L.Trainer(accelerator="gpu", devices=4, strategy="ddp").fit(AutoEncoder(4), data)
