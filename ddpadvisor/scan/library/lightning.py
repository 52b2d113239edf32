"""What lightning.Trainer decides for the training loop, as the scanner needs it.

Sources (lightning 2.x): ``loops/optimization/automatic.py`` (the closure divides the
training_step loss by ``accumulate_grad_batches``; ``zero_grad`` once per optimizer step),
``loops/training_epoch_loop.py`` (``_block_parallel_sync_behavior``: DDP's no_sync on the
accumulating batches, the last one synchronises), ``loops/fit_loop.py`` with
``fabric/utilities/data.py::_set_sampler_epoch`` (``set_epoch`` on every training sampler each
epoch, also on a user's own DistributedSampler), ``trainer/connectors/data_connector.py``
(``use_distributed_sampler=True`` replaces the sampler with a DistributedSampler),
``plugins/precision/amp.py`` (unscale before clipping) and ``trainer/connectors/
accelerator_connector.py`` (the precision strings).
"""

from __future__ import annotations

SOURCE = "https://github.com/Lightning-AI/pytorch-lightning/tree/master/src/lightning/pytorch"

# Trainer(...) arguments and Lightning's own defaults.
DEFAULTS: dict[str, object] = {
    "accumulate_grad_batches": 1,
    "gradient_clip_val": None,
    "precision": "32-true",
    "use_distributed_sampler": True,
    "strategy": "auto",
}

# Trainer(precision=...) -> the KB's precision values.
PRECISION: dict[str, str] = {
    "32-true": "fp32",
    "32": "fp32",
    "64-true": "fp32",
    "64": "fp32",
    "16-mixed": "fp16_amp",
    "16": "fp16_amp",
    "bf16-mixed": "bf16_amp",
    "bf16": "bf16_amp",
    "bf16-true": "pure_bf16",
    "16-true": "pure_fp16",
    "transformer-engine": "bf16_amp",
}


# Fabric's methods, by the accelerate method that does the same (lightning 2.x
# ``fabric/fabric.py``: setup / setup_module wrap the model with the strategy (DDP by default on
# several devices), setup_dataloaders replaces the sampler with a DistributedSampler unless
# ``use_distributed_sampler=False``, no_backward_sync skips the gradient all-reduce, all_reduce
# averages by default, backward / clip_gradients / autocast as accelerate's).
FABRIC_SOURCE = (
    "https://github.com/Lightning-AI/pytorch-lightning/blob/master/src/lightning/fabric/fabric.py"
)
FABRIC_METHODS: dict[str, str] = {
    "setup": "prepare",
    "setup_module": "prepare_model",
    "setup_optimizers": "prepare_optimizer",
    "no_backward_sync": "no_sync",
    "all_reduce": "reduce",
    "all_gather": "gather",
    "autocast": "autocast",
}


def precision(value: object) -> str | None:
    return PRECISION.get(str(value)) if value is not None else None
