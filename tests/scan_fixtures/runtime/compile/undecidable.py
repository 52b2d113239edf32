"""Everything that matters comes from elsewhere: the scan must not guess."""
# (whether it clips hangs on cfg.clip; where it clips, after unscale_ and outside no_sync, does not)
# scan-facts: grad_accum_steps=unknown loss_divided_by_accum=true zero_grad_every_micro_step=false
# scan-facts: precision=unknown uses_grad_scaler=unknown uses_distributed_sampler=unknown
# scan-facts: calls_set_epoch=unknown sampler_seed_rank_dependent=unknown lr_scaling=unknown
# scan-facts: has_batchnorm=unknown uses_syncbn=unknown per_gpu_batch_size=unknown
# scan-facts: optimizer_family=unknown adam_beta2=unknown uses_grad_clipping=unknown
# scan-facts: uses_torch_compile=unknown warmup_steps=unknown scheduler_steps_per_optimizer_step=1.0
# scan-facts: broadcast_buffers_disabled=unknown forward_bypasses_ddp=false unscale_before_clip=true
# scan-facts: loss_reduction=unknown variable_length_sequences=unknown uses_random_augmentation=unknown
# scan-facts: final_micro_step_synced=true clip_inside_no_sync=false logged_loss_reduction_wrong=unknown
import torch
import torch.distributed as dist
import yaml
from mytraining.data import build_loader
from mytraining.models import build_model
from mytraining.optim import build_optimizer, build_scheduler
from torch.nn.parallel import DistributedDataParallel as DDP


def train(cfg, model, loader, optimizer, scheduler, scaler):
    for step, batch in enumerate(loader):
        with torch.autocast("cuda", dtype=cfg.dtype, enabled=cfg.amp):
            loss = model(batch)
        scaler.scale(loss / cfg.accum).backward()
        if (step + 1) % cfg.accum == 0:
            if cfg.clip:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
            scheduler.step()


def main(path):
    cfg = yaml.safe_load(open(path))
    dist.init_process_group("nccl")
    model = DDP(build_model(cfg).cuda(), broadcast_buffers=cfg["bb"])
    if cfg["compile"]:
        model = torch.compile(model)
    loader = build_loader(cfg)
    optimizer = build_optimizer(cfg, model)
    scheduler = build_scheduler(cfg, optimizer)
    scaler = torch.cuda.amp.GradScaler(enabled=cfg["fp16"])
    train(cfg, model, loader, optimizer, scheduler, scaler)
