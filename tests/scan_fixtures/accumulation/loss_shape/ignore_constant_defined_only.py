"""Pretraining on fixed 1024-token blocks cut from one token stream. The project's constants
module defines IGNORE_INDEX = -100 for a fine-tuning collator this script never calls, and a
warm-up forward on one tokenized text (its result thrown away) reads an attention mask:
neither says that the training batches hold varying numbers of target tokens."""

# scan-facts: variable_length_sequences=unknown
import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import AutoModelForCausalLM, AutoTokenizer

from _lm_constants import PAD_TOKEN

dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
tokenizer = AutoTokenizer.from_pretrained("gpt2")
tokenizer.add_special_tokens({"pad_token": PAD_TOKEN})
model = AutoModelForCausalLM.from_pretrained("gpt2").cuda(rank)
warm = tokenizer("warm the kernels up" * 20, return_tensors="pt")
model(warm["input_ids"].cuda(rank), warm["attention_mask"].cuda(rank))
model = DDP(model, device_ids=[rank])
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
tokens = np.memmap("train.bin", dtype=np.uint16, mode="r")
for step in range(10000):
    starts = np.random.randint(0, len(tokens) - 1025, size=8)
    block = torch.stack([torch.from_numpy(tokens[s : s + 1025].astype(np.int64)) for s in starts])
    block = block[rank::world].cuda(rank)
    logits = model(block[:, :-1]).logits
    loss = F.cross_entropy(logits.flatten(0, 1), block[:, 1:].flatten())
    opt.zero_grad()
    loss.backward()
    opt.step()
