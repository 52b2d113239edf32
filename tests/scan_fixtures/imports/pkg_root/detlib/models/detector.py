import torch.nn as nn


class Detector(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, 4))

    def forward(self, x):
        return self.body(x)


def build_model(args):
    return Detector(256)
