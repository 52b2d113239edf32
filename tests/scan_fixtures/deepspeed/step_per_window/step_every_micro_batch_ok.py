"""The engine's own loop: backward and step on every micro-batch, DeepSpeed keeps the window."""

# scan-facts: ds_backwards_per_accumulation_window=1.0
import deepspeed
import torch
from _toy import ToyNet

CONFIG = {
    "train_micro_batch_size_per_gpu": 8,
    "gradient_accumulation_steps": 4,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
    "zero_optimization": {"stage": 1},
}


def main():
    deepspeed.init_distributed()
    model = ToyNet()
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=CONFIG
    )
    for i in range(400):
        loss = engine(torch.randn(8, 16, device=engine.device)).pow(2).mean()
        engine.backward(loss)
        engine.step()  # ok: deepspeed-step-per-accumulation-window
        if i % 100 == 0:
            print(i, loss.item())


if __name__ == "__main__":
    main()
