"""Lightning: the training_step loss multiplied by the world size; Lightning's own division
by accumulate_grad_batches does not undo it."""
# scan-facts: loss_multiplied_by_world_size=true loss_divided_by_accum=true grad_accum_steps=2
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
        loss = nn.functional.cross_entropy(self.net(x), y)
        return loss * self.trainer.world_size  # expect: loss-scaled-by-world-size

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


x = torch.randn(256, 8)
loader = DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8, shuffle=True)
L.Trainer(accelerator="gpu", devices=4, accumulate_grad_batches=2).fit(Classifier(), loader)
