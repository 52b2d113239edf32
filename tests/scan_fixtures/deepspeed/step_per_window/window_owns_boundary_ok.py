"""A loop that keeps its own window but tells the engine where the boundary is."""

# scan-facts: ds_backwards_per_accumulation_window=unknown
import deepspeed
import torch
from _toy import ToyNet

ACCUM = 4
CONFIG = {
    "train_micro_batch_size_per_gpu": 8,
    "gradient_accumulation_steps": ACCUM,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
    "zero_optimization": {"stage": 2},
}


def main():
    deepspeed.init_distributed()
    model = ToyNet()
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=CONFIG
    )
    for i in range(400):
        last = (i + 1) % ACCUM == 0
        engine.set_gradient_accumulation_boundary(last)
        loss = engine(torch.randn(8, 16, device=engine.device)).pow(2).mean()
        engine.backward(loss)
        if last:
            engine.step()  # ok: deepspeed-step-per-accumulation-window


if __name__ == "__main__":
    main()
