"""The same shape with the regression loss as a criterion object: still a loss over image
values, whatever the caption tokenizer pads."""
# scan-facts: variable_length_sequences=unknown
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import AutoTokenizer

dist.init_process_group("nccl")
tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
embed = nn.Embedding(30522, 16).cuda()
decoder = DDP(nn.Linear(16, 64).cuda())
criterion = nn.MSELoss()
optimizer = torch.optim.Adam(decoder.parameters(), lr=1e-4)
texts = ["short", "a somewhat longer caption"]
for step in range(1000):
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    cond = embed(batch["input_ids"].cuda()).mean(dim=1)
    image = torch.randn(2, 64, device="cuda")
    loss = criterion(decoder(cond), image)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
