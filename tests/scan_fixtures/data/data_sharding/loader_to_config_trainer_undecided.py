"""The trainer is built from the run's config (hydra.utils.instantiate) and handed the loader:
a Lightning Trainer under a DDP strategy puts its own DistributedSampler in, so a plain
shuffling DataLoader here says nothing about what each rank reads."""

# scan-facts: uses_distributed_sampler=unknown
import hydra
import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

from _toy import ToyNet


class Module(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = ToyNet()

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=3e-4)


@hydra.main(version_base=None, config_path="configs", config_name="config")
def main(cfg):
    if cfg.loader.global_batch_size % torch.distributed.get_world_size() != 0:
        raise ValueError("global batch not divisible by the number of GPUs")
    data = TensorDataset(torch.randn(4096, 16), torch.randn(4096, 4))
    train_loader = DataLoader(
        data, batch_size=cfg.loader.batch_size, shuffle=True
    )  # ok: no-distributed-sampler
    trainer = hydra.utils.instantiate(cfg.trainer, strategy=hydra.utils.instantiate(cfg.strategy))
    trainer.fit(Module(), train_loader)


if __name__ == "__main__":
    main()
