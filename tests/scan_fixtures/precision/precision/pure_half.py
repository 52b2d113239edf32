"""Weights cast to fp16 and trained with plain AdamW (no master weights)."""
# scan-facts: precision=pure_fp16 uses_grad_scaler=false uses_lora=false
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import AutoModelForCausalLM

dist.init_process_group("nccl")
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-13b-hf")
model = model.half().cuda()  # expect: pure-low-precision-weights
model = DDP(model)
opt = torch.optim.AdamW(model.parameters(), lr=3e-6)
for step in range(100):
    ids = torch.randint(0, 32000, (2, 512), device="cuda")
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
