"""A launcher script: model, wrapper and loop all live in a package the scan cannot see."""
# scan-facts: hand_written_loop=unknown uses_comm_hook=unknown uses_no_sync=unknown
# scan-facts: forward_bypasses_ddp=unknown loss_divided_by_accum=unknown loss_multiplied_by_world_size=unknown
# scan-facts: module_created_after_wrap=unknown rank_conditional_state_change=unknown uses_fsdp_or_zero=unknown
# scan-facts: uses_lora=unknown scheduler_steps_per_optimizer_step=unknown rank_seeds_identical=unknown
# scan-facts: loss_normalised_by_global_tokens=unknown logs_rank0_only=unknown zero_grad_every_micro_step=unknown
# scan-facts: final_micro_step_synced=unknown extra_backward_through_ddp=unknown loss_reduction=unknown
# scan-facts: uses_distributed_sampler=unknown grad_accum_steps=unknown precision=unknown
import sys

import torch.distributed as dist
from omegaconf import OmegaConf
from trainlib.engine import fit
from trainlib.factory import build_dataloaders, build_model, wrap_model

cfg = OmegaConf.load(sys.argv[1])
dist.init_process_group("nccl")
model = wrap_model(build_model(cfg), cfg)
train_loader, val_loader = build_dataloaders(cfg)
fit(model, train_loader, val_loader, cfg)
