"""A submitit launcher: the entry builds an executor and submits an object of its own class,
whose ``__call__`` runs the training function (in another module) in every task of the job.
The scan follows the submitted callable into the loop."""
# scan-facts: hand_written_loop=true optimizer_family=sgd uses_distributed_sampler=true
# scan-facts: calls_set_epoch=true grad_accum_steps=1
import argparse

import submitit

from _launched import train


class Job:
    def __init__(self, epochs):
        self.epochs = epochs

    def __call__(self):
        train(self.epochs)

    def checkpoint(self):
        return submitit.helpers.DelayedSubmission(Job(self.epochs))


parser = argparse.ArgumentParser()
parser.add_argument("--nodes", type=int, default=1)
args = parser.parse_args()
executor = submitit.AutoExecutor(folder="logs/%j")
executor.update_parameters(nodes=args.nodes, tasks_per_node=8, gpus_per_node=8)
with executor.batch():
    job = executor.submit(Job(10))
print(job.job_id)
