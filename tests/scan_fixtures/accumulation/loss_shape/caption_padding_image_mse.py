"""Text-to-image fine-tuning: captions are padded to a fixed length for the text encoder, but
the loss is a mean squared error over image latents, not a mean over tokens."""
# scan-facts: variable_length_sequences=unknown loss_normalised_by_global_tokens=unknown
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import CLIPTextModel, CLIPTokenizer

dist.init_process_group("nccl")
tokenizer = CLIPTokenizer.from_pretrained("openai/clip-vit-large-patch14")
text_encoder = CLIPTextModel.from_pretrained("openai/clip-vit-large-patch14").cuda()
text_encoder.requires_grad_(False)
denoiser = DDP(nn.Conv2d(4, 4, 3, padding=1).cuda())
optimizer = torch.optim.AdamW(denoiser.parameters(), lr=1e-5)
captions = ["a photo of a cat", "a red car parked by the sea at sunset"]
for step in range(1000):
    ids = tokenizer(
        captions, padding="max_length", max_length=77, truncation=True, return_tensors="pt"
    ).input_ids.cuda()
    with torch.no_grad():
        cond = text_encoder(ids)[0]
    latents = torch.randn(2, 4, 32, 32, device="cuda")
    noise = torch.randn_like(latents)
    pred = denoiser(latents + noise) + cond.mean() * 0
    loss = F.mse_loss(pred.float(), noise.float(), reduction="mean")  # ok: per-rank-token-mean-loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
