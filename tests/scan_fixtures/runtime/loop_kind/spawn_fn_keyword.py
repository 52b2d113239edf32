"""``torch.multiprocessing.spawn(fn=worker, args=(...), nprocs=n)``: the spawned function (in
another module) is passed by keyword; each process runs ``worker(rank, *args)``, and the scan
follows it."""
# scan-facts: hand_written_loop=true optimizer_family=adam uses_distributed_sampler=true
# scan-facts: calls_set_epoch=true
import torch

from _launched import worker

if __name__ == "__main__":
    n = torch.cuda.device_count()
    torch.multiprocessing.spawn(fn=worker, args=(n, 10), nprocs=n)
