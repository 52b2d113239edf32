"""SFT with padded batches: each rank averages over its own target tokens."""
# scan-facts: variable_length_sequences=true loss_normalised_by_global_tokens=false loss_reduction=mean
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, DistributedSampler
from transformers import AutoModelForCausalLM, AutoTokenizer


def collate(batch):
    ids = pad_sequence([b["input_ids"] for b in batch], batch_first=True, padding_value=0)
    labels = pad_sequence([b["labels"] for b in batch], batch_first=True, padding_value=-100)
    return ids, labels


dist.init_process_group("nccl")
tok = AutoTokenizer.from_pretrained("gpt2")
model = DDP(AutoModelForCausalLM.from_pretrained("gpt2").cuda())
data = torch.load("sft.pt")
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=4, sampler=sampler, collate_fn=collate)
opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
for epoch in range(3):
    sampler.set_epoch(epoch)
    for ids, labels in loader:
        logits = model(input_ids=ids.cuda()).logits
        loss = F.cross_entropy(logits.flatten(0, 1), labels.cuda().flatten(), ignore_index=-100)  # expect: per-rank-token-mean-loss
        loss.backward()
        opt.step()
        opt.zero_grad()
