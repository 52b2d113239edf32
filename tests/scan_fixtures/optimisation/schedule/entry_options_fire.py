"""A fire entry point: every parameter of main() is a command-line option, so its literal
defaults (no warmup, no accumulation) are the defaults', not the run's."""
# scan-facts: warmup_steps=unknown grad_accum_steps=unknown loss_divided_by_accum=true
import fire
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import get_cosine_schedule_with_warmup

from _toy import ToyNet


def main(lr: float = 3e-4, warmup_steps: int = 0, grad_accum: int = 1, total_steps: int = 10000):
    dist.init_process_group("nccl")
    model = DDP(ToyNet().cuda())
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    scheduler = get_cosine_schedule_with_warmup(  # ok: warmup-too-short
        optimizer, num_warmup_steps=warmup_steps, num_training_steps=total_steps
    )
    for step in range(total_steps * grad_accum):
        x = torch.randn(16, 16, device="cuda")
        loss = F.mse_loss(model(x), x) / grad_accum
        loss.backward()
        if (step + 1) % grad_accum == 0:
            optimizer.step()
            optimizer.zero_grad()
            scheduler.step()


if __name__ == "__main__":
    fire.Fire(main)
