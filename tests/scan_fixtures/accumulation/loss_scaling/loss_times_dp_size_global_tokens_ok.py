"""The loss is summed over tokens and divided by the token count summed over all ranks, then
multiplied by the data-parallel size so that DDP's average gives the global token mean."""
# scan-facts: loss_multiplied_by_world_size=false
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import AutoModelForCausalLM

from mylib.parallel_state import get_data_parallel_world_size

dist.init_process_group("nccl")
model = DDP(AutoModelForCausalLM.from_pretrained("gpt2").cuda())
opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
batches = torch.load("batches.pt")
for ids, labels in batches:
    logits = model(input_ids=ids.cuda()).logits
    n_tokens = (labels != -100).sum().cuda()
    dist.all_reduce(n_tokens)
    loss = F.cross_entropy(logits.flatten(0, 1), labels.cuda().flatten(), ignore_index=-100, reduction="sum") / n_tokens
    (loss * get_data_parallel_world_size()).backward()  # ok: loss-scaled-by-world-size
    opt.step()
    opt.zero_grad()
