"""FSDP with the plain torch clip: it measures only the local shard's norm."""
# scan-facts: uses_fsdp_or_zero=true clip_inside_no_sync=true uses_grad_clipping=true
import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from transformers import AutoModelForCausalLM

dist.init_process_group("nccl")
model = FSDP(AutoModelForCausalLM.from_pretrained("gpt2").cuda())
opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
for step in range(100):
    ids = torch.randint(0, 50257, (2, 128), device="cuda")
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # expect: clip-on-local-grads
    opt.step()
    opt.zero_grad()
