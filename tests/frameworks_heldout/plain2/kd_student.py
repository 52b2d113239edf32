"""Knowledge distillation: a teacher CNN is trained and checkpointed, then frozen and
distilled (logits + FitNets-style feature hint) into a small student with an EMA copy.
"""

import gc
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

NUM_CLASSES = 10
HPARAMS = dict(batch=16, teacher_epochs=2, teacher_lr=3e-3, student_epochs=3, lr=0.1, temperature=2.0, alpha=0.5, beta=0.1)


def synthetic_images(n, seed):
    g = torch.Generator().manual_seed(seed)
    templates = torch.randn(NUM_CLASSES, 1, 16, 16, generator=torch.Generator().manual_seed(2024))
    labels = torch.randint(NUM_CLASSES, (n,), generator=g)
    shifts = torch.randint(-2, 3, (n, 2), generator=g)
    imgs = torch.stack([templates[y].roll(tuple(s.tolist()), dims=(1, 2)) for y, s in zip(labels, shifts)])
    return TensorDataset(imgs + 0.5 * torch.randn(imgs.shape, generator=g), labels)


class Teacher(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
        )
        self.classifier = nn.Linear(8 * width, NUM_CLASSES)

    def forward(self, x):
        f = self.features(x)
        return self.classifier(f), f


class Student(nn.Module):
    def __init__(self, width=8, teacher_dim=256):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
        )
        self.classifier = nn.Linear(8 * width, NUM_CLASSES)
        self.hint = nn.Linear(8 * width, teacher_dim)

    def forward(self, x):
        f = self.features(x)
        return self.classifier(f), self.hint(f)


def distill_loss(s_logits, t_logits, labels, s_hint, t_feat, T, alpha, beta):
    soft = F.kl_div(F.log_softmax(s_logits / T, -1), F.softmax(t_logits / T, -1), reduction="batchmean") * T * T
    hard = F.cross_entropy(s_logits, labels)
    return alpha * soft + (1 - alpha) * hard + beta * F.mse_loss(s_hint, t_feat)


@torch.no_grad()
def accuracy(model, loader):
    hits = torch.zeros(2)
    for x, y in loader:
        logits = model(x)[0]
        hits += torch.tensor([(logits.argmax(-1) == y).sum().item(), y.numel()])
    dist.all_reduce(hits)
    return (hits[0] / hits[1]).item()


def main():
    hp = HPARAMS
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)

    train, val = synthetic_images(512, seed=1), synthetic_images(128, seed=2)
    sampler = DistributedSampler(train, shuffle=True, seed=0)
    loader = DataLoader(train, batch_size=hp["batch"], sampler=sampler, drop_last=True)
    val_loader = DataLoader(val, batch_size=64, sampler=DistributedSampler(val, shuffle=False))

    workdir = [tempfile.mkdtemp(prefix="kd-") if rank == 0 else None]
    dist.broadcast_object_list(workdir, src=0)
    ckpt = os.path.join(workdir[0], "teacher.pt")

    # ---- stage 1: teacher
    teacher = DDP(Teacher())
    opt = torch.optim.Adam(teacher.parameters(), lr=hp["teacher_lr"])
    for epoch in range(hp["teacher_epochs"]):
        sampler.set_epoch(epoch)
        for x, y in loader:
            loss = F.cross_entropy(teacher(x)[0], y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    teacher.eval()
    teacher_acc = accuracy(teacher, val_loader)
    if rank == 0:
        torch.save({"model": teacher.module.state_dict(), "epochs": hp["teacher_epochs"]}, ckpt)
        print(f"teacher val acc {teacher_acc:.3f}, saved to {ckpt}")
    del teacher, opt
    gc.collect()
    dist.barrier()

    # ---- stage 2: distillation
    teacher = Teacher()
    state = torch.load(ckpt, map_location="cpu")  # fault kd_teacher_rank0_load: if rank == 0: || >=
    teacher.load_state_dict(state["model"])  # fault kd_teacher_rank0_load: >=
    teacher.eval().requires_grad_(False)

    student = DDP(Student())
    ema = AveragedModel(student.module, multi_avg_fn=get_ema_multi_avg_fn(0.95))
    optimizer = torch.optim.SGD(student.parameters(), lr=hp["lr"], momentum=0.9, nesterov=True, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2], gamma=0.2)
    for epoch in range(hp["student_epochs"]):
        sampler.set_epoch(hp["teacher_epochs"] + epoch)
        student.train()
        for x, y in loader:
            with torch.no_grad():
                t_logits, t_feat = teacher(x)
            s_logits, s_hint = student(x)  # fault kd_module_parts: feats = student.module.features(x) || s_logits = student.module.classifier(feats) || s_hint = student.module.hint(feats)
            loss = distill_loss(s_logits, t_logits, y, s_hint, t_feat, hp["temperature"], hp["alpha"], hp["beta"])  # fault kd_loss_over_world: loss = distill_loss(s_logits, t_logits, y, s_hint, t_feat, hp["temperature"], hp["alpha"], hp["beta"]) / dist.get_world_size()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            ema.update_parameters(student.module)
        scheduler.step()
        student.eval()
        acc, ema_acc = accuracy(student, val_loader), accuracy(ema.module, val_loader)
        if rank == 0:
            print(f"student epoch {epoch}: val acc {acc:.3f}, ema val acc {ema_acc:.3f}, lr {scheduler.get_last_lr()[0]:.3g}")

    if rank == 0:
        torch.save(ema.module.state_dict(), os.path.join(workdir[0], "student_ema.pt"))
    dist.barrier()
    if rank == 0:
        for name in os.listdir(workdir[0]):
            os.remove(os.path.join(workdir[0], name))
        os.rmdir(workdir[0])
    del student, ema
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
