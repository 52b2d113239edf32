"""DeepSpeed with an inline config: ZeRO stage 2 shards gradients and optimizer state."""
# scan-facts: uses_fsdp_or_zero=true hand_written_loop=false
import deepspeed
import torch

from _toy import ToyNet

ds_config = {
    "train_micro_batch_size_per_gpu": 4,
    "gradient_accumulation_steps": 8,
    "zero_optimization": {"stage": 2},
    "bf16": {"enabled": True},
}
model = ToyNet()
engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)
for step in range(100):
    loss = engine(torch.randn(4, 16, device=engine.device)).pow(2).mean()
    engine.backward(loss)
    engine.step()
