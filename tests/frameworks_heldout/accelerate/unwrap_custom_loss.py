# Tiny char-level LM trained with accelerate.
# The model computes its own loss in a helper method; the loop calls it on the unwrapped
# model because the prepared (DDP) object does not expose custom methods.
import gc
import sys

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from torch import nn
from torch.utils.data import DataLoader, Dataset


class CharLM(nn.Module):
    def __init__(self, vocab=40, dim=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.out = nn.Linear(dim, vocab)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.out(h)

    def lm_loss(self, seq):
        logits = self(seq[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), seq[:, 1:].reshape(-1))


class RandomText(Dataset):
    def __init__(self, n=128, length=20, vocab=40):
        g = torch.Generator().manual_seed(2)
        self.data = torch.randint(0, vocab, (n, length), generator=g)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i]


def main(max_steps=6):
    accelerator = Accelerator(cpu=True)
    torch.manual_seed(0)
    model = CharLM()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    loader = DataLoader(RandomText(), batch_size=8, shuffle=True)
    model, opt, loader = accelerator.prepare(model, opt, loader)

    step = 0
    while step < max_steps:
        for seq in loader:
            loss = accelerator.unwrap_model(model).lm_loss(seq)
            accelerator.backward(loss)
            opt.step()
            opt.zero_grad()
            step += 1
            if accelerator.is_main_process:
                print(f"step {step}: {loss.item():.4f}")
            if step >= max_steps:
                break

    accelerator.end_training()
    del model, opt
    gc.collect()
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 6))
