import os

import torch
import torch.distributed as dist


class Strategy:
    def __init__(self, args):
        self.args = args

    def setup_distributed(self):
        self.local_rank = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(self.local_rank)
        dist.init_process_group("nccl")
        self.world_size = dist.get_world_size()

    def is_rank_0(self):
        return dist.get_rank() == 0

    def print_reduced(self, name, value):
        value = value.detach().clone()
        dist.all_reduce(value, op=dist.ReduceOp.AVG)
        if self.is_rank_0():
            print(f"{name}: {value.item():.4f}")
