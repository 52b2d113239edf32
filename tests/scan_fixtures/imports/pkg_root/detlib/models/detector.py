import torch.nn as nn


class Detector(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, 4))

    def forward(self, x):
        return self.body(x)


def build_model(args):
    model = Detector(256)
    model.pad_token_id = None  # a name for a pad id: no padded batches anywhere
    return model
