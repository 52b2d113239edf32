# Hand-written DDP loop: sentiment-style classifier, LoRA on the attention projections.
# The model is wrapped first (the wrapping code is shared with the full fine-tune script),
# the adapters are injected afterwards.
import gc
import os

import torch
import torch.distributed as dist
from peft import LoraConfig, inject_adapter_in_model
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler
from transformers import LlamaConfig, LlamaForSequenceClassification


def setup():
    dist.init_process_group("gloo")
    return dist.get_rank(), dist.get_world_size()


def wrap(model):
    # find_unused_parameters: the frozen base weights get no gradient
    return DDP(model, find_unused_parameters=True)


rank, world = setup()
torch.manual_seed(0)
cfg = LlamaConfig(
    vocab_size=64,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=4,
    num_labels=2,
    pad_token_id=0,
)
net = LlamaForSequenceClassification(cfg)
model = wrap(net)

peft_cfg = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
inject_adapter_in_model(peft_cfg, model.module)
for p in model.module.score.parameters():  # the head is trained too
    p.requires_grad_(True)

n_train = sum(p.numel() for p in model.parameters() if p.requires_grad)
if rank == 0:
    print(f"trainable params: {n_train}")

g = torch.Generator().manual_seed(5)
x = torch.randint(1, 64, (64, 12), generator=g)
y = (x.sum(1) % 2).long()
ds = TensorDataset(x, y)
sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=0)
loader = DataLoader(ds, batch_size=8, sampler=sampler)

opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
steps = int(os.environ.get("STEPS", "6"))
step = 0
model.train()
for epoch in range(10):
    sampler.set_epoch(epoch)
    for ids, labels in loader:
        out = model(input_ids=ids, labels=labels)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        if rank == 0:
            print(f"step {step} loss {out.loss.item():.4f}")
        if step >= steps:
            break
    if step >= steps:
        break

del model, net, opt
gc.collect()
dist.destroy_process_group()
