"""DeepSpeed: precision, accumulation and clipping live in ds_config.json, not here."""
# scan-facts: uses_fsdp_or_zero=unknown hand_written_loop=false precision=unknown grad_accum_steps=unknown warmup_steps=unknown
# scan-facts: uses_grad_clipping=unknown uses_grad_scaler=unknown optimizer_family=unknown
import argparse

import deepspeed
import torch

from _toy import ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=-1)
parser = deepspeed.add_config_arguments(parser)
args = parser.parse_args()

model = ToyNet()
engine, optimizer, _, _ = deepspeed.initialize(args=args, model=model, model_parameters=model.parameters())
for step in range(1000):
    x = torch.randn(8, 16, device=engine.device)
    loss = engine(x).pow(2).mean()
    engine.backward(loss)
    engine.step()
