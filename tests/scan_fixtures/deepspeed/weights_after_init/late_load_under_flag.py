"""A warm start loaded after deepspeed.initialize only when a flag asks for it: the run decides."""

# scan-facts: ds_weights_loaded_after_init=unknown
import argparse

import deepspeed
import torch
from _toy import ToyNet

CONFIG = {
    "train_micro_batch_size_per_gpu": 8,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
    "zero_optimization": {"stage": 1},
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--warm", default="")
    args = parser.parse_args()
    deepspeed.init_distributed()
    model = ToyNet()
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=CONFIG
    )
    if args.warm:
        engine.module.load_state_dict(torch.load(args.warm))
    for _ in range(100):
        loss = engine(torch.randn(8, 16, device=engine.device)).pow(2).mean()
        engine.backward(loss)
        engine.step()


if __name__ == "__main__":
    main()
