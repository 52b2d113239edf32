"""Joins the process group and ends before training: a trace with no optimizer step."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
dist.destroy_process_group()
