"""Lightning with use_distributed_sampler=False and a plain shuffling DataLoader: every rank
reads the whole dataset (Lightning keeps the loader as it is)."""
# scan-facts: uses_distributed_sampler=false calls_set_epoch=true hand_written_loop=false
import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(8, 2)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


L.seed_everything(0)
x = torch.randn(256, 8)
loader = DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8, shuffle=True)  # expect: no-distributed-sampler
trainer = L.Trainer(accelerator="gpu", devices=4, strategy="ddp", use_distributed_sampler=False)
trainer.fit(Classifier(), loader)
