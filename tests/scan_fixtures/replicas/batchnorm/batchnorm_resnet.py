"""torchvision ResNet on small per-GPU batches, BatchNorm left local and buffers unsynced."""
# scan-facts: has_batchnorm=true uses_syncbn=false broadcast_buffers_disabled=true
# scan-facts: uses_random_augmentation=true optimizer_family=sgd per_gpu_batch_size=4
import torch
import torch.distributed as dist
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import transforms

dist.init_process_group("nccl")
rank = dist.get_rank()
tf = transforms.Compose([
    transforms.RandomResizedCrop(224),  # expect: augmentation-rng-identical-across-ranks
    transforms.RandomHorizontalFlip(),
    transforms.ToTensor(),
])
train_set = torchvision.datasets.ImageFolder("/data/train", transform=tf)
sampler = DistributedSampler(train_set)
loader = DataLoader(train_set, batch_size=4, sampler=sampler, num_workers=8)
model = torchvision.models.resnet50(weights=None).cuda()  # expect: batchnorm-without-syncbn
model = DDP(model, device_ids=[rank], broadcast_buffers=False)  # expect: broadcast-buffers-disabled, batchnorm-without-syncbn
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
for epoch in range(90):
    sampler.set_epoch(epoch)
    for images, target in loader:
        loss = torch.nn.functional.cross_entropy(model(images.cuda()), target.cuda())
        opt.zero_grad()
        loss.backward()
        opt.step()
