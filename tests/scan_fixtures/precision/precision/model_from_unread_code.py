"""The model comes from a checkpoint loader the scan does not read (then compiled): its own
layers may cast to a compute dtype, so no autocast in sight does not make it fp32."""
# scan-facts: precision=unknown
import torch
import torch.distributed as dist
import torch.nn.functional as F

from mytrainer.checkpoint import load_model

dist.init_process_group("nccl")
model, tokenizer = load_model("sft", device="cuda")
model = torch.compile(model, dynamic=False)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5)
for step in range(1000):
    ids = torch.randint(0, 50000, (4, 257), device="cuda")
    logits = model(ids[:, :-1])
    loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
