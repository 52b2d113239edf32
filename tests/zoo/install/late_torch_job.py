"""Run as ``torchrun -m late_torch_job``: torch comes in late, through a library, after a
find_spec lookup, and the DataLoader starts its workers with ``spawn``."""

import os

import late_torch_lib


def main() -> None:
    assert late_torch_lib.TORCH_AVAILABLE
    torch = late_torch_lib.torch()
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    data = late_torch_lib.Squares(48, os.environ["LATE_TORCH_OUT"])
    loader = DataLoader(
        data,
        batch_size=8,
        sampler=DistributedSampler(data, shuffle=False),
        num_workers=2,
        multiprocessing_context="spawn",
    )
    model = DDP(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
