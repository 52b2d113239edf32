"""The right order: adapters first, then DDP."""
# scan-facts: uses_lora=true module_created_after_wrap=false
import torch
import torch.distributed as dist
from peft import LoraConfig, get_peft_model
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import AutoModelForCausalLM

dist.init_process_group("nccl")
model = AutoModelForCausalLM.from_pretrained("gpt2")
model = get_peft_model(model, LoraConfig(r=4, target_modules=["c_attn"]))  # ok: params-added-after-ddp-wrap
model = DDP(model.cuda())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(100):
    ids = torch.randint(0, 50257, (2, 64), device="cuda")
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
