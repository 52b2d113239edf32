"""Speech: a collate class of the project pads each batch's spectrograms to its longest one
(the DataLoader calls it, the loop never does), so batches hold varying numbers of frames;
the loss regresses the padded frames densely, so the padding is read but not called a loss
over a varying number of targets either: not decided (not "fixed-size examples")."""
# scan-facts: variable_length_sequences=unknown
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


class PadCollate:
    def __call__(self, batch):
        longest = max(x[1].size(1) for x in batch)
        mels = torch.zeros(len(batch), batch[0][1].size(0), longest)
        for i, (_, mel) in enumerate(batch):
            mels[i, :, : mel.size(1)] = mel
        texts = torch.stack([x[0] for x in batch])
        return texts, mels


class Acoustic(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(148, 80)

    def forward(self, texts, frames):
        return self.emb(texts).mean(1, keepdim=True).transpose(1, 2).expand(-1, -1, frames)


dist.init_process_group("nccl")
data = torch.load("utterances.pt")
loader = DataLoader(data, batch_size=32, sampler=DistributedSampler(data), collate_fn=PadCollate())
model = DDP(Acoustic().cuda())
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for texts, mels in loader:
    pred = model(texts.cuda(), mels.size(2))
    loss = torch.nn.functional.mse_loss(pred, mels.cuda())
    opt.zero_grad()
    loss.backward()
    opt.step()
