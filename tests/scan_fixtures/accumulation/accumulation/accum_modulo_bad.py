"""Accumulation by step counter, with three classic mistakes."""
# scan-facts: grad_accum_steps=8 loss_divided_by_accum=false zero_grad_every_micro_step=true
# scan-facts: scheduler_steps_per_optimizer_step=8.0 warmup_steps=100 uses_no_sync=false
# scan-facts: final_micro_step_synced=true
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
from transformers import AutoModelForCausalLM, get_linear_schedule_with_warmup

GRAD_ACCUM_STEPS = 8


def main():
    dist.init_process_group("nccl")
    local_rank = dist.get_rank() % torch.cuda.device_count()
    model = AutoModelForCausalLM.from_pretrained("gpt2").cuda()
    model = DDP(model, device_ids=[local_rank])
    train_ds = torch.load("tokens.pt")
    sampler = DistributedSampler(train_ds)
    loader = DataLoader(train_ds, batch_size=2, sampler=sampler)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
    scheduler = get_linear_schedule_with_warmup(optimizer, 100, 10_000)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for i, batch in enumerate(loader):
            optimizer.zero_grad()  # expect: zero-grad-inside-accumulation
            out = model(input_ids=batch["input_ids"].cuda(), labels=batch["labels"].cuda())
            loss = out.loss
            loss.backward()  # expect: grad-accum-loss-not-scaled
            scheduler.step()  # expect: scheduler-step-miscounted
            if (i + 1) % GRAD_ACCUM_STEPS == 0:
                optimizer.step()


if __name__ == "__main__":
    main()
