"""Token losses summed and divided by the token count of all ranks, but not multiplied back by
the world size: DDP's average divides the global mean by W once more."""
# scan-facts: loss_normalised_by_global_tokens=true loss_divided_by_world_size=true
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import AutoModelForCausalLM

dist.init_process_group("nccl")
model = DDP(AutoModelForCausalLM.from_pretrained("gpt2").cuda())
opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
batches = torch.load("batches.pt")
for ids, labels in batches:
    logits = model(input_ids=ids.cuda()).logits
    n_tokens = (labels != -100).sum().cuda()
    dist.all_reduce(n_tokens)
    loss_sum = F.cross_entropy(logits.flatten(0, 1), labels.cuda().flatten(), ignore_index=-100, reduction="sum")
    loss = loss_sum / n_tokens  # expect: loss-divided-by-world-size
    loss.backward()
    opt.step()
    opt.zero_grad()
