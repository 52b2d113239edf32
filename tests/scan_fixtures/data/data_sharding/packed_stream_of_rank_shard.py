"""A packing IterableDataset that never mentions the rank, built on a Hugging Face dataset that
was sharded by rank (``shard(num_shards, index=rank)``) and had a validation slice skipped: each
rank packs its own shard, so the loader reads per-rank data."""
# scan-facts: uses_distributed_sampler=true
import datasets
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, IterableDataset

from _toy import ToyNet


class Rows:
    def __init__(self, table, width):
        self.table = table
        self.width = width

    def __iter__(self):
        for row in self.table:
            yield torch.tensor(row["values"][: self.width], dtype=torch.float32)


class Packer(IterableDataset):
    def __init__(self, source, per_pack=4):
        self.source = source
        self.per_pack = per_pack

    def __iter__(self):
        held = []
        for item in self.source:
            held.append(item)
            if len(held) == self.per_pack:
                yield torch.stack(held).mean(0)
                held = []


dist.init_process_group("gloo")
parts = [datasets.load_dataset("json", data_files=f"part{i}.jsonl")["train"] for i in range(2)]
table = datasets.concatenate_datasets(parts)
table = table.shard(dist.get_world_size(), index=dist.get_rank())  # ok: no-distributed-sampler
table = table.skip(100)
loader = DataLoader(Packer(Rows(table, 16)), batch_size=8)  # ok: no-distributed-sampler
model = DDP(ToyNet())
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x in loader:
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
