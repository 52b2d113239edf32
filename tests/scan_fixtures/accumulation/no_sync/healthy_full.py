"""A careful DDP fine-tune: every check should come out healthy."""
# scan-facts: uses_distributed_sampler=true sampler_seed_rank_dependent=false calls_set_epoch=true
# scan-facts: grad_accum_steps=4 loss_divided_by_accum=true zero_grad_every_micro_step=false
# scan-facts: uses_no_sync=true final_micro_step_synced=true forward_bypasses_ddp=false
# scan-facts: extra_backward_through_ddp=false loss_multiplied_by_world_size=false
# scan-facts: precision=fp16_amp uses_grad_scaler=true unscale_before_clip=true uses_grad_clipping=true
# scan-facts: clip_inside_no_sync=false uses_torch_compile=false uses_lora=false
# scan-facts: module_created_after_wrap=false rank_conditional_state_change=false uses_fsdp_or_zero=false
# scan-facts: has_batchnorm=false uses_syncbn=unknown broadcast_buffers_disabled=false lr_scaling=unknown
# scan-facts: warmup_steps=500 scheduler_steps_per_optimizer_step=1.0 optimizer_family=adam adam_beta2=0.95
# scan-facts: per_gpu_batch_size=16 loss_reduction=mean variable_length_sequences=false
# scan-facts: logs_rank0_only=false logged_loss_reduction_wrong=false uses_random_augmentation=false
# scan-facts: comm_hook_averages=unknown uses_comm_hook=false
import argparse
import contextlib
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
from transformers import get_cosine_schedule_with_warmup

ACCUM = 4


class MLP(nn.Module):
    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.LayerNorm(dim), nn.Linear(dim, 1))

    def forward(self, x):
        return self.net(x)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    dist.init_process_group("nccl")
    rank = dist.get_rank()
    world_size = dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)

    model = MLP().cuda()
    model = DDP(model, device_ids=[local_rank])

    data = TensorDataset(torch.randn(4096, 32), torch.randn(4096, 1))
    sampler = DistributedSampler(data, shuffle=True, seed=args.seed)  # ok: sampler-seed-differs-per-rank
    loader = DataLoader(data, batch_size=16, sampler=sampler)  # ok: no-distributed-sampler
    val_loader = DataLoader(data, batch_size=64, shuffle=False)  # ok: no-distributed-sampler

    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95))  # ok: lr-scaled-too-aggressively
    steps = len(loader) * args.epochs // ACCUM
    scheduler = get_cosine_schedule_with_warmup(optimizer, num_warmup_steps=500, num_training_steps=steps)  # ok: warmup-too-short
    scaler = torch.cuda.amp.GradScaler()

    for epoch in range(args.epochs):  # ok: sampler-set-epoch-missing
        sampler.set_epoch(epoch)
        model.train()
        micro = 0
        for step, (x, y) in enumerate(loader):
            x, y = x.cuda(), y.cuda()
            last = (step + 1) % ACCUM == 0
            ctx = contextlib.nullcontext() if last else model.no_sync()
            with ctx:  # ok: no-sync-misaligned
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = F.mse_loss(model(x), y) / ACCUM  # ok: ddp-wrapper-bypassed
                scaler.scale(loss).backward()  # ok: grad-accum-loss-not-scaled
            if last:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # ok: clip-before-unscale, clip-on-local-grads
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)  # ok: zero-grad-inside-accumulation
                scheduler.step()  # ok: scheduler-step-miscounted
                reduced = loss.detach() * ACCUM
                dist.all_reduce(reduced, op=dist.ReduceOp.AVG)
                if rank == 0:
                    print(f"epoch {epoch} step {step} loss {reduced.item():.4f}")  # ok: rank0-only-loss-logging, metric-reduction-wrong

        model.eval()
        with torch.no_grad():
            for x, y in val_loader:
                _ = F.mse_loss(model.module(x.cuda()), y.cuda())  # ok: ddp-wrapper-bypassed

    if rank == 0:
        torch.save(model.module.state_dict(), "final.pt")  # ok: checkpoint-loaded-on-rank0-only
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
