"""A Lightning DDP fit: the Trainer owns sampling, set_epoch, accumulation, sync and clipping;
the module's training_step loss and its hooks are the user's."""
# scan-facts: uses_distributed_sampler=true calls_set_epoch=true grad_accum_steps=4
# scan-facts: loss_divided_by_accum=true zero_grad_every_micro_step=false uses_no_sync=true
# scan-facts: final_micro_step_synced=true forward_bypasses_ddp=false precision=bf16_amp
# scan-facts: uses_grad_scaler=false uses_grad_clipping=true unscale_before_clip=true
# scan-facts: clip_inside_no_sync=false hand_written_loop=false optimizer_family=sgd
import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        self.log("loss", loss, sync_dist=True)
        return loss

    def on_train_start(self) -> None:
        if self.trainer.is_global_zero:
            print("starting")  # ok: checkpoint-loaded-on-rank0-only

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9)


x = torch.randn(512, 8)
loader = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=16, shuffle=True)  # ok: no-distributed-sampler
trainer = L.Trainer(
    accelerator="gpu",
    devices=8,
    strategy="ddp",
    accumulate_grad_batches=4,  # ok: grad-accum-loss-not-scaled, no-sync-misaligned
    gradient_clip_val=1.0,  # ok: clip-on-local-grads
    precision="bf16-mixed",
    max_epochs=3,
)
trainer.fit(Regressor(), loader)
