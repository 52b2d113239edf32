"""The training loop of the package (a detection-style engine)."""
import math
import sys

from .util import misc


def train_one_epoch(model, data_loader, optimizer, epoch, max_norm=0.1):
    model.train()
    header = f"Epoch: [{epoch}]"
    for samples, targets in data_loader:
        outputs = model(samples)
        loss = ((outputs - targets) ** 2).mean()
        if not math.isfinite(loss.item()):
            print(f"{header} loss is {loss.item()}, stopping")
            sys.exit(1)
        optimizer.zero_grad()
        loss.backward()
        misc.clip(model, max_norm)
        optimizer.step()


def evaluate(model, data_loader):
    model.eval()
    for samples, _ in data_loader:
        model(samples)
