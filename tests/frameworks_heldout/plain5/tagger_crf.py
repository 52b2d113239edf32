"""Sequence tagger with a linear-chain CRF loss on synthetic variable-length sentences:
token-dropout augmentation inside the Dataset, a DataLoader with two workers seeded per rank
and per epoch by worker_init_fn, a padding collate with a mask, the summed CRF loss divided by
the tokens of all ranks, Adam, StepLR per epoch."""

import gc

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

VOCAB, TAGS, UNK = 40, 5, 1
SEED = 31


class Sentences(Dataset):
    def __init__(self, n: int, drop: float) -> None:
        gen = torch.Generator().manual_seed(SEED)
        self.items = []
        for _ in range(n):
            length = int(torch.randint(4, 13, (1,), generator=gen))
            words = torch.randint(2, VOCAB, (length,), generator=gen)
            tags = words % TAGS
            tags[1:] = torch.where(words[:-1] % 3 == 0, (tags[1:] + 1) % TAGS, tags[1:])
            self.items.append((words, tags))
        self.drop = drop

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        words, tags = self.items[i]
        if self.drop > 0:
            words = torch.where(torch.rand(words.shape) < self.drop, UNK, words)
        return words, tags


def pad_batch(batch: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, ...]:
    longest = max(len(w) for w, _ in batch)
    words = torch.zeros(len(batch), longest, dtype=torch.long)
    tags = torch.zeros(len(batch), longest, dtype=torch.long)
    mask = torch.zeros(len(batch), longest, dtype=torch.bool)
    for row, (w, t) in enumerate(batch):
        words[row, : len(w)], tags[row, : len(t)], mask[row, : len(w)] = w, t, True
    return words, tags, mask


class CRFTagger(nn.Module):
    def __init__(self, d: int = 32) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, d, padding_idx=0)
        self.conv = nn.Conv1d(d, d, 3, padding=1)
        self.emit = nn.Linear(d, TAGS)
        self.trans = nn.Parameter(torch.zeros(TAGS, TAGS))
        self.start = nn.Parameter(torch.zeros(TAGS))

    def forward(self, words: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.emb(words)
        h = h + torch.relu(self.conv(h.transpose(1, 2))).transpose(1, 2)
        em = self.emit(h)  # (B, T, TAGS)
        b, t = words.shape
        rows = torch.arange(b)
        m = mask.float()
        gold = self.start[tags[:, 0]] + em[rows, 0, tags[:, 0]]
        alpha = self.start + em[:, 0]
        for i in range(1, t):
            step_gold = self.trans[tags[:, i - 1], tags[:, i]] + em[rows, i, tags[:, i]]
            gold = gold + step_gold * m[:, i]
            nxt = torch.logsumexp(alpha.unsqueeze(2) + self.trans + em[:, i].unsqueeze(1), dim=1)
            alpha = torch.where(mask[:, i : i + 1], nxt, alpha)
        return torch.logsumexp(alpha, dim=1) - gold  # per-sentence negative log-likelihood


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    train_set, val_set = Sentences(192, drop=0.1), Sentences(48, drop=0.0)
    epoch_box = [0]

    def worker_init_fn(worker_id: int) -> None:
        torch.manual_seed(SEED * 1000 + epoch_box[0] * 100 + rank * 10 + worker_id)  # fault tag_worker_seed_shared: torch.manual_seed(SEED * 1000 + epoch_box[0] * 100 + worker_id)

    sampler = DistributedSampler(train_set, shuffle=True, seed=SEED)  # fault tag_no_sampler: -
    loader = DataLoader(  # fault tag_no_sampler: loader = DataLoader(train_set, batch_size=12, shuffle=True, num_workers=2, collate_fn=pad_batch, worker_init_fn=worker_init_fn)
        train_set,  # fault tag_no_sampler: -
        batch_size=12,  # fault tag_no_sampler: -
        sampler=sampler,  # fault tag_no_sampler: -
        num_workers=2,  # fault tag_no_sampler: -
        collate_fn=pad_batch,  # fault tag_no_sampler: -
        worker_init_fn=worker_init_fn,  # fault tag_no_sampler: -
    )  # fault tag_no_sampler: -
    val_loader = DataLoader(
        val_set, batch_size=16, sampler=DistributedSampler(val_set, shuffle=False), collate_fn=pad_batch
    )

    model = DDP(CRFTagger())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)

    for epoch in range(3):
        epoch_box[0] = epoch
        sampler.set_epoch(epoch)  # fault tag_no_sampler: -
        model.train()
        for words, tags, mask in loader:
            ntok = mask.sum().float()
            dist.all_reduce(ntok)  # fault tag_local_tokens: -
            nll = model(words, tags, mask)
            loss = nll.sum() / ntok * world  # fault tag_local_tokens: loss = nll.sum() / ntok
            opt.zero_grad()
            loss.backward()
            opt.step()
            logged = torch.stack([nll.detach().sum(), mask.sum().float()])
            dist.all_reduce(logged)
            if rank == 0:
                print(f"epoch {epoch} nll/token {(logged[0] / logged[1]).item():.4f}")
        sched.step()

        model.eval()
        stats = torch.zeros(2)
        with torch.no_grad():
            for words, tags, mask in val_loader:
                stats += torch.stack([model(words, tags, mask).sum(), mask.sum().float()])
        dist.all_reduce(stats)
        if rank == 0:
            print(f"epoch {epoch} val nll/token {(stats[0] / stats[1]).item():.4f}")

    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
