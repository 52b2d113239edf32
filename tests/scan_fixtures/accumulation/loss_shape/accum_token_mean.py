"""SFT with accumulation: each micro-batch is a token mean, then averaged over micro-batches."""
# scan-facts: grad_accum_steps=4 loss_divided_by_accum=true variable_length_sequences=true
# scan-facts: loss_normalised_by_global_tokens=false
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import AutoModelForCausalLM, AutoTokenizer, DataCollatorWithPadding

ACCUM = 4

dist.init_process_group("nccl")
tok = AutoTokenizer.from_pretrained("gpt2")
collate = DataCollatorWithPadding(tok)
model = DDP(AutoModelForCausalLM.from_pretrained("gpt2").cuda())
opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
batches = torch.load("sft_batches.pt")
for step, batch in enumerate(batches):
    logits = model(input_ids=batch["input_ids"].cuda(), attention_mask=batch["attention_mask"].cuda()).logits
    loss = F.cross_entropy(logits.flatten(0, 1), batch["labels"].cuda().flatten(), ignore_index=-100)  # expect: accum-token-normalisation
    (loss / ACCUM).backward()
    if (step + 1) % ACCUM == 0:
        opt.step()
        opt.zero_grad()
