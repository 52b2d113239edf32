"""A base model cast to bf16 with LoRA adapters added afterwards: the frozen base computes in
bf16, the adapters are whatever the adapter library makes them. Neither pure bf16 nor fp32 is
certain, so the precision is not decided."""
# scan-facts: precision=unknown uses_lora=true
import torch
import torch.distributed as dist
from peft import LoraConfig, get_peft_model
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import AutoModelForCausalLM

dist.init_process_group("nccl")
base = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf")
base = base.to(torch.bfloat16).cuda()
model = get_peft_model(base, LoraConfig(r=16, target_modules=["q_proj", "v_proj"]))
model = DDP(model)
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-4)
for step in range(200):
    ids = torch.randint(0, 32000, (4, 256), device="cuda")
    loss = model(input_ids=ids, labels=ids).loss  # ok: pure-low-precision-weights
    opt.zero_grad()
    loss.backward()
    opt.step()
