"""The recipe base class: set-up and the epoch loop; subclasses write the step."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from ..data import TokenBlocks
from ..utils.dist import print_rank_0


class BaseRecipe:
    grad_accum = 4

    def __init__(self, cfg):
        self.cfg = cfg

    def setup(self):
        dist.init_process_group("nccl")
        self.model = DDP(self.build_model())
        self.dataset = TokenBlocks(4096)
        self.sampler = DistributedSampler(self.dataset, seed=0)
        self.loader = DataLoader(self.dataset, batch_size=4, sampler=self.sampler)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=self.cfg.lr)

    def build_model(self):
        raise NotImplementedError

    def train(self):
        for epoch in range(self.cfg.epochs):
            self.sampler.set_epoch(epoch)  # ok: sampler-set-epoch-missing
            for step, batch in enumerate(self.loader):
                loss = self.train_step(batch, step)
                if step % 100 == 0:
                    print_rank_0(f"epoch {epoch} step {step} loss {loss.item():.4f}")  # expect: rank0-only-loss-logging
