"""Fine-tuning where LoRA is opt-in (`--use_lora`): whether adapters train is the run's flag."""
# scan-facts: uses_lora=unknown
import argparse

import torch
import torch.distributed as dist
from peft import LoraConfig, get_peft_model
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import AutoModelForCausalLM

parser = argparse.ArgumentParser()
parser.add_argument("--model_name", default="gpt2")
parser.add_argument("--use_lora", action="store_true")
parser.add_argument("--lora_rank", type=int, default=8)
args = parser.parse_args()

dist.init_process_group("nccl")
model = AutoModelForCausalLM.from_pretrained(args.model_name)
if args.use_lora:
    config = LoraConfig(r=args.lora_rank, lora_alpha=16, target_modules=["c_attn"])
    model = get_peft_model(model, config)
model = DDP(model.cuda())
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
for step in range(100):
    ids = torch.randint(0, 50000, (4, 128), device="cuda")
    loss = model(input_ids=ids, labels=ids).loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
