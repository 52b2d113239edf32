"""An image-text model trained on a contrastive loss; only its evaluation, which runs without
gradients, tokenizes captions with padding. That says nothing about the training batches, so
variable-length sequences are not decided either way."""
# scan-facts: variable_length_sequences=unknown
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
from transformers import AutoTokenizer

from _toy import ToyDataset


class PairModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.image = nn.Linear(16, 8)
        self.text = nn.Embedding(30522, 8)
        self.register_buffer("id_queue", torch.full((1, 64), -100))

    def forward(self, x):
        img = F.normalize(self.image(x), dim=-1)
        logits = img @ img.t()
        return F.cross_entropy(logits, torch.arange(len(x), device=x.device))


@torch.no_grad()
def evaluate(model, tokenizer, texts):
    enc = tokenizer(texts, padding="max_length", max_length=35, return_tensors="pt")
    return model.module.text(enc.input_ids).mean(1)


dist.init_process_group("nccl")
rank = dist.get_rank()
tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
model = DDP(PairModel().cuda(rank), device_ids=[rank])
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
data = ToyDataset(1024)
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=32, sampler=sampler)
for epoch in range(5):
    sampler.set_epoch(epoch)
    for batch in loader:
        loss = model(batch["x"].cuda(rank))
        opt.zero_grad()
        loss.backward()
        opt.step()
    evaluate(model, tokenizer, ["a cat", "a dog on a mat"])
