import torch.nn as nn
import torch.nn.functional as F

from tuner.trainers.base import BaseRecipe


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(1000, 64)
        self.head = nn.Linear(64, 1000)

    def forward(self, ids):
        return self.head(self.emb(ids))


class SFTRecipe(BaseRecipe):
    def build_model(self):
        return TinyLM()

    def train_step(self, batch, step):
        logits = self.model(batch["input_ids"])
        loss = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten())
        loss.backward()  # expect: grad-accum-loss-not-scaled
        if (step + 1) % self.grad_accum == 0:
            self.optimizer.step()
            self.optimizer.zero_grad()
        return loss
