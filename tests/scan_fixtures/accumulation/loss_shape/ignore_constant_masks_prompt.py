"""Fine-tuning on prompt/answer pairs: the prompt's positions are masked with the project's
IGNORE_INDEX constant in the training step, so each batch holds a varying number of target
tokens."""

# scan-facts: variable_length_sequences=true
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import AutoModelForCausalLM

from _lm_constants import IGNORE_INDEX

dist.init_process_group("nccl")
rank = dist.get_rank()
model = DDP(AutoModelForCausalLM.from_pretrained("gpt2").cuda(rank), device_ids=[rank])
opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
pairs = torch.load(f"pairs_rank{rank}.pt")
for ids, prompt_len in pairs:
    ids = ids.cuda(rank)
    labels = ids.clone()
    labels[:, :prompt_len] = IGNORE_INDEX
    logits = model(ids).logits[:, :-1]
    targets = labels[:, 1:].flatten()
    loss = F.cross_entropy(logits.flatten(0, 1), targets, ignore_index=IGNORE_INDEX)  # expect: per-rank-token-mean-loss
    opt.zero_grad()
    loss.backward()
    opt.step()
