import torch.distributed as dist


def get_rank():
    return dist.get_rank() if dist.is_initialized() else 0


def print_rank_0(msg):
    if get_rank() == 0:
        print(msg)
