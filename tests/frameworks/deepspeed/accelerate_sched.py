"""A GRU tagger trained with accelerate's DeepSpeedPlugin built from a config dict (ZeRO-2, two
micro-batches per optimizer step, clipping at 1.0); a client AdamW with the usual two parameter
groups (no weight decay on biases) and a hand-written warmup + cosine LambdaLR, both prepared.
The schedule's length is counted on the loader before prepare(): accelerate's scheduler wrapper
steps the scheduler once per process at every optimizer step.

    DS_ACCELERATOR=cpu torchrun --nproc_per_node 2 accelerate_sched.py
"""

import math

import torch
import torch.nn as nn
from accelerate import Accelerator, DeepSpeedPlugin, PartialState
from torch.utils.data import DataLoader, TensorDataset


class Tagger(nn.Module):
    def __init__(self, vocab=50, dim=32, tags=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.out = nn.Linear(dim, tags)

    def forward(self, ids):
        h, _ = self.rnn(self.emb(ids))
        return self.out(h)


def main():
    PartialState(cpu=True)  # gloo; Accelerator(cpu=True) would turn DeepSpeed off
    accum = 2
    ds = {
        "train_micro_batch_size_per_gpu": 8,
        "gradient_accumulation_steps": accum,
        "gradient_clipping": 1.0,  # fault accelerate_sched_torch_clip: "gradient_clipping": 0.0,
        "zero_optimization": {"stage": 2},
    }
    acc = Accelerator(deepspeed_plugin=DeepSpeedPlugin(hf_ds_config=ds))
    torch.manual_seed(1)
    model = Tagger()
    decay = [p for n, p in model.named_parameters() if not n.endswith("bias")]
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias")]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=3e-3)

    g = torch.Generator().manual_seed(3)
    ids = torch.randint(1, 50, (256, 12), generator=g)
    loader = DataLoader(TensorDataset(ids, ids % 5), batch_size=8, shuffle=True)
    epochs, warm = 2, 8
    total = epochs * math.ceil(len(loader) / accum)  # fault accelerate_sched_late: -

    def lam(s):
        if s < warm:
            return (s + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (s - warm) / max(1, total - warm))))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lam)  # fault accelerate_sched_late: -
    model, opt, loader, sched = acc.prepare(model, opt, loader, sched)  # fault accelerate_sched_late: model, opt, loader = acc.prepare(model, opt, loader) || total = epochs * math.ceil(len(loader) / accum) || sched = acc.prepare(torch.optim.lr_scheduler.LambdaLR(opt, lam))
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        model.train()
        for x, y in loader:
            with acc.accumulate(model):
                loss = loss_fn(model(x).reshape(-1, 5), y.reshape(-1))
                acc.backward(loss)  # fault accelerate_sched_torch_clip: = || if acc.sync_gradients: || >torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                opt.zero_grad()
        mean = acc.gather(loss.detach()[None]).mean().item()
        acc.print(f"epoch {epoch}: loss {mean:.3f}, lr {sched.get_last_lr()[0]:.2e}")


if __name__ == "__main__":
    main()
