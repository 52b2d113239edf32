"""PEFT adapters injected after DDP wrapped the base model (thread 000 pattern)."""
# scan-facts: uses_lora=true module_created_after_wrap=true precision=bf16_amp uses_grad_scaler=false
import os

import torch
import torch.distributed as dist
from peft import LoraConfig, get_peft_model
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import AutoModelForCausalLM

dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
base = AutoModelForCausalLM.from_pretrained("huggyllama/llama-7b").cuda(local_rank)
model = DDP(base, device_ids=[local_rank])
lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"])
model.module = get_peft_model(model.module, lora)  # expect: params-added-after-ddp-wrap
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-4)
for step in range(200):
    ids = torch.randint(0, 32000, (4, 256), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad()
