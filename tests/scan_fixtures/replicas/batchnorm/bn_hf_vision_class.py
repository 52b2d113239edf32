"""A pretrained HF vision model loaded by its class: ResNet in transformers keeps BatchNorm,
so a class the scan does not know to be free of it leaves the fact open."""
# scan-facts: has_batchnorm=unknown
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import ResNetForImageClassification

dist.init_process_group("nccl")
model = ResNetForImageClassification.from_pretrained("microsoft/resnet-50")
model = DDP(model.cuda())  # ok: batchnorm-without-syncbn
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
for step in range(500):
    pixels = torch.randn(8, 3, 224, 224, device="cuda")
    labels = torch.randint(0, 1000, (8,), device="cuda")
    loss = F.cross_entropy(model(pixel_values=pixels).logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
