"""Lightning autoencoder whose encoder is warm-started from a previous run.

Only the main process reads the previous weights (to avoid every rank hitting the disk).
"""

import argparse
import gc
import os
import tempfile

import lightning as L
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def encoder():
    return nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 4))


class AutoEncoder(L.LightningModule):
    def __init__(self, pretrained_path=None):
        super().__init__()
        self.pretrained_path = pretrained_path
        self.encoder = encoder()
        self.decoder = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 16))

    def on_train_start(self):
        if (
            self.trainer.is_global_zero
            and self.pretrained_path
            and os.path.exists(self.pretrained_path)
        ):
            state = torch.load(self.pretrained_path, map_location="cpu")
            self.encoder.load_state_dict(state)
            print(f"loaded encoder from {self.pretrained_path}")

    def training_step(self, batch, batch_idx):
        (x,) = batch
        recon = self.decoder(self.encoder(x))
        loss = nn.functional.mse_loss(recon, x)
        self.log("recon", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=5e-3)


def previous_run_weights(path):
    if not os.path.exists(path):
        torch.manual_seed(99)
        torch.save(encoder().state_dict(), path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-steps", type=int, default=5)
    ap.add_argument(
        "--ckpt", default=os.path.join(tempfile.gettempdir(), "ddpadvisor-heldout-encoder.pt")
    )
    args = ap.parse_args()

    if int(os.environ.get("RANK", "0")) == 0:
        previous_run_weights(args.ckpt)

    L.seed_everything(0)
    data = TensorDataset(torch.randn(128, 16, generator=torch.Generator().manual_seed(1)))
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        max_steps=args.max_steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    model = AutoEncoder(pretrained_path=args.ckpt)
    trainer.fit(model, DataLoader(data, batch_size=8, shuffle=True))
    del trainer, model
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
