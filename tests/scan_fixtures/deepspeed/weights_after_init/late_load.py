"""A warm start loaded into the engine's module after deepspeed.initialize (ZeRO-2)."""

# scan-facts: ds_weights_loaded_after_init=true
import deepspeed
import torch
from _toy import ToyNet

CONFIG = {
    "train_micro_batch_size_per_gpu": 8,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
    "zero_optimization": {"stage": 2},
    "bf16": {"enabled": True},
}


def main(warm="warm.pt"):
    deepspeed.init_distributed()
    model = ToyNet()
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=CONFIG
    )
    state = torch.load(warm)
    engine.module.load_state_dict(state)  # expect: deepspeed-weights-loaded-after-initialize
    for _ in range(100):
        loss = engine(torch.randn(8, 16, device=engine.device)).pow(2).mean()
        engine.backward(loss)
        engine.step()


if __name__ == "__main__":
    main()
