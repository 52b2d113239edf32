"""The trained network comes from a library the scan has no entry for, and the optimizer
class is picked by a flag, so the scan cannot tell which model trains; the frozen text
encoder is cast to fp16 for inference only. That cast is not the training precision
(accelerate's mixed precision, from its config, decides it)."""
# scan-facts: precision=unknown
import argparse

import torch
from accelerate import Accelerator
from somelib import build_denoiser
from transformers import CLIPTextModel

parser = argparse.ArgumentParser()
parser.add_argument("--use_8bit_adam", action="store_true")
args = parser.parse_args()

accelerator = Accelerator()
text_encoder = CLIPTextModel.from_pretrained("openai/clip-vit-base-patch32")
text_encoder.requires_grad_(False)
denoiser = build_denoiser("some/denoiser")
if args.use_8bit_adam:
    import bitsandbytes as bnb

    optimizer_cls = bnb.optim.AdamW8bit
else:
    optimizer_cls = torch.optim.AdamW
optimizer = optimizer_cls(denoiser.parameters(), lr=1e-5)
denoiser, optimizer = accelerator.prepare(denoiser, optimizer)
text_encoder.to(accelerator.device, dtype=torch.float16)
for step in range(1000):
    ids = torch.randint(0, 49408, (4, 77), device=accelerator.device)
    with torch.no_grad():
        cond = text_encoder(ids)[0]
    noisy = torch.randn(4, 4, 64, 64, device=accelerator.device)
    loss = (denoiser(noisy, cond) - noisy).pow(2).mean()
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
