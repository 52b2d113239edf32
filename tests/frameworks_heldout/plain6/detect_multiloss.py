"""Single-object detector on a 6x6 grid: objectness, class and box losses, warm-started backbone.

Phase 1 pretrains the conv backbone as a whole-image classifier; rank 0 saves it, every rank
loads it into the detector before the DDP wrap. Phase 2 trains the detector with SGD and a
linear warmup chained with step decay, and reports the all-reduced hit rate and IoU.

torchrun --nproc_per_node 2 detect_multiloss.py
"""

import gc
import math
import os
import shutil
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

CONFIG = {
    "seed": 7,
    "image": 24,
    "stride": 4,
    "classes": 3,
    "width": 32,
    "batch_size": 16,
    "pretrain_epochs": 1,
    "epochs": 5,
    "lr": 0.05,
    "momentum": 0.9,
    "weight_decay": 1e-4,
    "warmup_iters": 6,
    "milestones": [28, 36],
    "loss_weights": {"obj": 5.0, "cls": 0.5, "box": 2.0},
    "obj_prior": 0.05,
}


def synth_scenes(n, cfg, seed):
    """One object per image: a filled square, a hollow square or a cross, 4 to 9 pixels wide.
    Boxes are (cx, cy, w, h) in pixels."""
    g = torch.Generator().manual_seed(seed)
    size = cfg["image"]
    images = 0.3 * torch.randn(n, 3, size, size, generator=g)
    labels = torch.randint(0, cfg["classes"], (n,), generator=g)
    boxes = torch.zeros(n, 4)
    for i in range(n):
        w = int(torch.randint(4, 10, (1,), generator=g))
        x0 = int(torch.randint(0, size - w + 1, (1,), generator=g))
        y0 = int(torch.randint(0, size - w + 1, (1,), generator=g))
        patch = torch.zeros(w, w)
        if labels[i] == 0:
            patch[:] = 1.0
        elif labels[i] == 1:
            patch[0, :] = patch[-1, :] = patch[:, 0] = patch[:, -1] = 1.0
        else:
            patch[w // 2, :] = patch[:, w // 2] = 1.0
        images[i, :, y0 : y0 + w, x0 : x0 + w] += 1.5 * patch
        boxes[i] = torch.tensor([x0 + w / 2, y0 + w / 2, float(w), float(w)])
    return TensorDataset(images, labels, boxes)


class Backbone(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(3, width, 3, stride=2, padding=1),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.Conv2d(width, width, 3, stride=2, padding=1),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=1),
            nn.ReLU(),
        )

    def forward(self, x):
        return self.layers(x)


class Classifier(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.backbone = Backbone(cfg["width"])
        self.fc = nn.Linear(cfg["width"], cfg["classes"])

    def forward(self, x):
        return self.fc(self.backbone(x).mean(dim=(2, 3)))


class Detector(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.backbone = Backbone(cfg["width"])
        self.obj_head = nn.Conv2d(cfg["width"], 1, 1)
        self.cls_head = nn.Conv2d(cfg["width"], cfg["classes"], 1)
        self.box_head = nn.Conv2d(cfg["width"], 4, 1)

    def forward(self, x):
        f = self.backbone(x)
        return self.obj_head(f).squeeze(1), self.cls_head(f), self.box_head(f)


def init_obj_prior(head, prior):
    """Focal-loss style prior: the objectness logits start at the rarity of positive cells."""
    nn.init.zeros_(head.weight)
    nn.init.constant_(head.bias, -math.log((1.0 - prior) / prior))


def encode(boxes, cfg):
    """The grid cell holding each box centre, and the box relative to that cell."""
    stride = cfg["stride"]
    grid = cfg["image"] // stride
    cx, cy = boxes[:, 0] / stride, boxes[:, 1] / stride
    col, row = cx.long().clamp(0, grid - 1), cy.long().clamp(0, grid - 1)
    target = torch.stack(
        [cx - col, cy - row, torch.log(boxes[:, 2] / stride), torch.log(boxes[:, 3] / stride)], 1
    )
    return row, col, target


def decode(row, col, box, cfg):
    stride = cfg["stride"]
    cx = (col.float() + box[:, 0]) * stride
    cy = (row.float() + box[:, 1]) * stride
    return torch.stack([cx, cy, box[:, 2].exp() * stride, box[:, 3].exp() * stride], 1)


def iou(a, b):
    ax0, ay0, ax1, ay1 = (
        a[:, 0] - a[:, 2] / 2,
        a[:, 1] - a[:, 3] / 2,
        a[:, 0] + a[:, 2] / 2,
        a[:, 1] + a[:, 3] / 2,
    )
    bx0, by0, bx1, by1 = (
        b[:, 0] - b[:, 2] / 2,
        b[:, 1] - b[:, 3] / 2,
        b[:, 0] + b[:, 2] / 2,
        b[:, 1] + b[:, 3] / 2,
    )
    inter = (torch.min(ax1, bx1) - torch.max(ax0, bx0)).clamp(min=0) * (
        torch.min(ay1, by1) - torch.max(ay0, by0)
    ).clamp(min=0)
    return inter / (a[:, 2] * a[:, 3] + b[:, 2] * b[:, 3] - inter)


def detection_losses(outputs, labels, boxes, cfg):
    obj_logits, cls_logits, box_pred = outputs
    n = labels.shape[0]
    row, col, box_target = encode(boxes, cfg)
    obj_target = torch.zeros_like(obj_logits)
    obj_target[torch.arange(n), row, col] = 1.0
    idx = torch.arange(n)
    return {
        "obj": F.binary_cross_entropy_with_logits(obj_logits, obj_target),
        "cls": F.cross_entropy(cls_logits[idx, :, row, col], labels),
        "box": F.smooth_l1_loss(box_pred[idx, :, row, col], box_target, beta=0.1),
    }


@torch.no_grad()
def evaluate(model, loader, cfg):
    model.eval()
    hits, ious, count = torch.zeros(()), torch.zeros(()), 0
    for images, labels, boxes in loader:
        obj_logits, cls_logits, box_pred = model(images)
        n, grid = labels.shape[0], obj_logits.shape[-1]
        best = obj_logits.flatten(1).argmax(1)
        row, col = best // grid, best % grid
        idx = torch.arange(n)
        pred_boxes = decode(row, col, box_pred[idx, :, row, col], cfg)
        overlap = iou(pred_boxes, boxes)
        correct_cls = cls_logits[idx, :, row, col].argmax(1) == labels
        hits += ((overlap > 0.5) & correct_cls).sum()
        ious += overlap.sum()
        count += n
    totals = torch.stack([hits, ious, torch.tensor(float(count))])
    dist.all_reduce(totals)
    model.train()
    return (totals[0] / totals[2]).item(), (totals[1] / totals[2]).item()  # fmt: skip  # fault det_metric_local_count: return (totals[0] / count).item(), (totals[1] / count).item()


def pretrain_backbone(cfg, train_set, rank, path):
    model = DDP(Classifier(cfg))
    sampler = DistributedSampler(train_set, shuffle=True, seed=cfg["seed"])
    loader = DataLoader(train_set, batch_size=cfg["batch_size"], sampler=sampler)
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg["lr"], momentum=cfg["momentum"])
    for epoch in range(cfg["pretrain_epochs"]):
        sampler.set_epoch(epoch)
        for images, labels, _ in loader:
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    if rank == 0:
        torch.save(model.module.backbone.state_dict(), path)
        print(f"pretrained backbone saved, last loss {loss.item():.4f}", flush=True)
    dist.barrier()
    del model, optimizer
    gc.collect()


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    cfg = dict(CONFIG)
    torch.manual_seed(cfg["seed"])

    # a scratch folder on rank 0, its name shared with the other ranks
    shared = [tempfile.mkdtemp(prefix="detect_") if rank == 0 else None]
    dist.broadcast_object_list(shared, src=0)
    backbone_path = os.path.join(shared[0], "backbone.pt")

    train_set, val_set = synth_scenes(256, cfg, seed=100), synth_scenes(64, cfg, seed=101)
    if rank == 0:
        print(f"{world} ranks, global batch {cfg['batch_size'] * world}", flush=True)
    pretrain_backbone(cfg, train_set, rank, backbone_path)

    detector = Detector(cfg)
    detector.backbone.load_state_dict(torch.load(backbone_path, map_location="cpu"))  # fmt: skip  # fault det_warm_rank0: -
    init_obj_prior(detector.obj_head, cfg["obj_prior"])  # fmt: skip  # fault det_prior_head_after_wrap: -
    model = DDP(detector)  # fmt: skip  # fault det_warm_rank0: = || if rank == 0: || >model.module.backbone.load_state_dict(torch.load(backbone_path, map_location="cpu"))  # fault det_prior_head_after_wrap: model = DDP(detector, find_unused_parameters=True) || model.module.obj_head = nn.Conv2d(cfg["width"], 1, 1) || init_obj_prior(model.module.obj_head, cfg["obj_prior"])

    weights = dict(cfg["loss_weights"])  # fmt: skip  # fault det_weights_world: weights = {k: v * world for k, v in cfg["loss_weights"].items()}
    sampler = DistributedSampler(train_set, shuffle=True, seed=cfg["seed"])
    train_loader = DataLoader(train_set, batch_size=cfg["batch_size"], sampler=sampler)  # fmt: skip  # fault det_no_sampler: train_loader = DataLoader(train_set, batch_size=cfg["batch_size"], shuffle=True)
    val_loader = DataLoader(
        val_set, batch_size=32, sampler=DistributedSampler(val_set, shuffle=False)
    )
    optimizer = torch.optim.SGD(
        model.parameters(),
        lr=cfg["lr"],
        momentum=cfg["momentum"],
        weight_decay=cfg["weight_decay"],
        nesterov=True,
    )
    scheduler = torch.optim.lr_scheduler.ChainedScheduler(
        [
            torch.optim.lr_scheduler.LinearLR(
                optimizer, start_factor=0.1, total_iters=cfg["warmup_iters"]
            ),
            torch.optim.lr_scheduler.MultiStepLR(
                optimizer, milestones=cfg["milestones"], gamma=0.1
            ),
        ]
    )

    it = 0
    for epoch in range(cfg["epochs"]):
        sampler.set_epoch(epoch)  # fmt: skip  # fault det_no_sampler: -
        for images, labels, boxes in train_loader:
            losses = detection_losses(model(images), labels, boxes, cfg)
            loss = sum(weights[k] * v for k, v in losses.items())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
            optimizer.step()
            scheduler.step()
            it += 1
            if it % 8 == 0:
                logged = torch.stack([losses[k].detach() for k in ("obj", "cls", "box")])
                dist.all_reduce(logged, op=dist.ReduceOp.AVG)
                if rank == 0:
                    print(
                        f"it {it} obj {logged[0]:.4f} cls {logged[1]:.4f} box {logged[2]:.4f} "
                        f"lr {scheduler.get_last_lr()[0]:.4f} grad_norm {grad_norm:.2f}",
                        flush=True,
                    )
        hit_rate, mean_iou = evaluate(model, val_loader, cfg)
        if rank == 0:
            print(f"epoch {epoch} hit_rate {hit_rate:.3f} mean_iou {mean_iou:.3f}", flush=True)

    dist.barrier()
    if rank == 0:
        shutil.rmtree(shared[0], ignore_errors=True)
    del model, detector, optimizer, scheduler
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
