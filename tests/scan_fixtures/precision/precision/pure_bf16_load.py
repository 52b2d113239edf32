"""Loaded straight in bf16 and trained without autocast."""
# scan-facts: precision=pure_bf16 has_batchnorm=false
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import AutoModelForCausalLM

dist.init_process_group("nccl")
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2-0.5B", torch_dtype=torch.bfloat16)  # expect: pure-low-precision-weights
model = DDP(model.cuda())
opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
for step in range(100):
    ids = torch.randint(0, 1000, (4, 128), device="cuda")
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad()
