"""Names of the library APIs the scanner understands (PyTorch, HF transformers/accelerate/PEFT).

Callees are matched by their last dotted component after import aliases are resolved, so
``from torch.nn.parallel import DistributedDataParallel as DDP; DDP(m)`` and
``torch.nn.parallel.DistributedDataParallel(m)`` are the same thing.
"""

from __future__ import annotations

OPTIMIZER_FAMILY: dict[str, str] = {
    "Adam": "adam",
    "AdamW": "adam",
    "Adamax": "adam",
    "NAdam": "adam",
    "RAdam": "adam",
    "SparseAdam": "adam",
    "FusedAdam": "adam",
    "AdamW8bit": "adam",
    "Adam8bit": "adam",
    "PagedAdamW": "adam",
    "PagedAdamW8bit": "adam",
    "PagedAdamW32bit": "adam",
    "AdamW32bit": "adam",
    "DeepSpeedCPUAdam": "adam",
    "SGD": "sgd",
    "ASGD": "sgd",
    "Adagrad": "other",
    "Adadelta": "other",
    "RMSprop": "other",
    "Rprop": "other",
    "LBFGS": "other",
    "Adafactor": "other",
    "Lion": "other",
    "LAMB": "other",
    "Lamb": "other",
    "FusedLAMB": "other",
    "Muon": "other",
}
ADAM_DEFAULT_BETA2 = 0.999

TORCH_SCHEDULERS = {
    "LambdaLR",
    "MultiplicativeLR",
    "StepLR",
    "MultiStepLR",
    "ConstantLR",
    "LinearLR",
    "ExponentialLR",
    "SequentialLR",
    "CosineAnnealingLR",
    "ChainedScheduler",
    "ReduceLROnPlateau",
    "CyclicLR",
    "OneCycleLR",
    "CosineAnnealingWarmRestarts",
    "PolynomialLR",
    "CosineLRScheduler",  # timm
}
# How each scheduler constructor the scan knows sets its warmup (kb fact warmup_steps):
# the keyword (and position, counting the optimizer as 0) that holds the warmup length and
# the library's default when it is not passed. A scheduler missing here (a factory such as
# timm's ``create_scheduler(args, optimizer)``, a class of the project's own, OneCycleLR's
# ramp, a SequentialLR of others) leaves the warmup undecided.
#   timm: https://github.com/huggingface/pytorch-image-models/blob/main/timm/scheduler/cosine_lr.py
#   (warmup_t=0), step_lr.py, multistep_lr.py, plateau_lr.py, poly_lr.py, tanh_lr.py
SCHEDULER_WARMUP: dict[str, tuple[str, int | None, int]] = {
    "CosineLRScheduler": ("warmup_t", None, 0),
    "StepLRScheduler": ("warmup_t", None, 0),
    "MultiStepLRScheduler": ("warmup_t", None, 0),
    "PlateauLRScheduler": ("warmup_t", None, 0),
    "PolyLRScheduler": ("warmup_t", None, 0),
    "TanhLRScheduler": ("warmup_t", None, 0),
}
# torch.optim.lr_scheduler classes that never start below the base learning rate.
# (OneCycleLR and CyclicLR ramp up; ConstantLR and LinearLR start lower; LambdaLR and
# MultiplicativeLR do what their function says; SequentialLR/ChainedScheduler what their
# members do.)
NO_WARMUP_SCHEDULERS = {
    "StepLR",
    "MultiStepLR",
    "ExponentialLR",
    "CosineAnnealingLR",
    "ReduceLROnPlateau",
    "PolynomialLR",
    "CosineAnnealingWarmRestarts",
}
# Calls that take the optimizer and cannot change its learning rate.
OPTIMIZER_CONSUMERS = {
    "prepare",
    "setup",
    "setup_optimizers",
    "step",
    "unscale_",
    "update",
    "zero_grad",
    "state_dict",
    "load_state_dict",
    "save",
    "print",
    "clip_gradients",
    "clip_grad_norm_",
    "backward",
}

# Schedulers meant to be stepped once per epoch when used on their own.
EPOCH_SCHEDULERS = {"StepLR", "MultiStepLR", "ExponentialLR", "ReduceLROnPlateau"}

HF_SCHEDULER_PREFIX = "get_"

LOSS_CLASSES_SUFFIX = "Loss"

BN_CLASSES = {
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "LazyBatchNorm1d",
    "LazyBatchNorm2d",
    "LazyBatchNorm3d",
    "BatchNorm",
}
SYNC_BN = {"SyncBatchNorm", "convert_sync_batchnorm"}

# torchvision / timm model constructors that contain BatchNorm, and ones that do not.
BN_MODEL_PREFIXES = (
    "resnet",
    "resnext",
    "wide_resnet",
    "densenet",
    "mobilenet",
    "efficientnet",
    "regnet",
    "inception",
    "googlenet",
    "shufflenet",
    "mnasnet",
    "convnext_bn",
    "vgg11_bn",
    "vgg13_bn",
    "vgg16_bn",
    "vgg19_bn",
    "deeplab",
    "fcn_",
    "fasterrcnn",
    "maskrcnn",
    "retinanet",
    "r3d",
    "r2plus1d",
    "maxvit",
)
# (MaxViT's MBConv blocks use BatchNorm2d in torchvision and timm, so it is not listed.)
NO_BN_MODEL_PREFIXES = ("vit_", "swin_", "alexnet", "convnext_", "vgg11", "vgg13")

# diffusers / HF model classes built only from GroupNorm and LayerNorm (UNets, VAEs,
# diffusion transformers, text encoders). A class named nowhere here, such as
# ResNetForImageClassification or a project's own, is not known to be free of BatchNorm.
HF_NO_BN_CLASS_HINTS = (
    "UNet2D",
    "UNet3D",
    "UNetSpatioTemporal",
    "Autoencoder",
    "VQModel",
    "Transformer2DModel",
    "Transformer3DModel",
    "SD3Transformer",
    "FluxTransformer",
    "PriorTransformer",
    "ControlNetModel",
    "CLIPTextModel",
    "CLIPVisionModel",
    "T5EncoderModel",
    "ViTModel",
    "ViTForImageClassification",
)

# HF AutoModel classes for text models: no BatchNorm anywhere.
HF_TEXT_MODEL_HINTS = (
    "CausalLM",
    "MaskedLM",
    "Seq2SeqLM",
    "SequenceClassification",
    "TokenClassification",
    "QuestionAnswering",
    "MultipleChoice",
    "GPT2",
    "Llama",
    "Bert",
    "T5",
    "Mistral",
    "Qwen",
    "OPT",
    "Bloom",
    "Falcon",
    "Gemma",
    "Phi",
)

RANDOM_TRANSFORMS_PREFIX = ("Random",)
RANDOM_TRANSFORMS = {
    "RandAugment",
    "AutoAugment",
    "TrivialAugmentWide",
    "AugMix",
    "ColorJitter",
    "GaussianBlur",
    "MixUp",
    "CutMix",
    "Mixup",
    "ElasticTransform",
}
DETERMINISTIC_TRANSFORMS = {
    "ToTensor",
    "Normalize",
    "Resize",
    "CenterCrop",
    "Compose",
    "ToImage",
    "ToDtype",
    "PILToTensor",
    "ConvertImageDtype",
    "Lambda",
    "Grayscale",
    "Pad",
}
RANDOM_CALLS = {
    "rand",
    "randn",
    "randint",
    "randperm",
    "rand_like",
    "randn_like",
    "randint_like",
    "bernoulli",
    "multinomial",
    "normal",
    "uniform",
    "random",
    "choice",
    "shuffle",
    "sample",
    "permutation",
    "beta",
    "randrange",
    "gauss",
}

PADDING_SIGNALS = {
    "pad_sequence",
    "DataCollatorWithPadding",
    "DataCollatorForSeq2Seq",
    "DataCollatorForLanguageModeling",
    "DataCollatorForTokenClassification",
    "DataCollatorForCompletionOnlyLM",
    "DataCollatorWithFlattening",
    "pad",
}
TOKEN_KWARGS = {"attention_mask", "ignore_index", "padding", "num_items_in_batch", "labels"}

# Libraries whose API a job calls only when it runs several ranks (or launches them): a call
# into one, other than a check of whether it is available, makes the job distributed.
DIST_NAMESPACES = (
    "torch.distributed.",
    "torch.multiprocessing.spawn",
    "torch.multiprocessing.start_processes",
    "deepspeed.",
    "accelerate.",
    "lightning.",
    "lightning_fabric.",
    "pytorch_lightning.",
    "megatron.",
    "colossalai.",
)
DIST_QUERIES = {"is_available", "is_initialized", "is_torchelastic_launched", "is_nccl_available"}


def sets_up_ranks(name: str) -> bool:
    """A call that only a distributed job makes: a process group set up by any name
    (``init_process_group``, a project's ``init_distributed``), or a distributed library's API."""
    leaf = last(name)
    if leaf in ("init_process_group", "init_distributed"):
        return True
    return name.startswith(DIST_NAMESPACES) and leaf not in DIST_QUERIES


# print-like calls that put a number in front of the user.
LOG_NAMES = {
    "print",
    "info",
    "debug",
    "warning",
    "log",
    "add_scalar",
    "add_scalars",
    "set_postfix",
    "set_description",
    "write",
    "log_metrics",
    "log_dict",
}

# Methods on a model that are not a forward pass.
MODEL_NON_FORWARD = {
    "parameters",
    "named_parameters",
    "buffers",
    "named_buffers",
    "modules",
    "named_modules",
    "children",
    "named_children",
    "state_dict",
    "load_state_dict",
    "train",
    "eval",
    "to",
    "cuda",
    "cpu",
    "half",
    "float",
    "bfloat16",
    "double",
    "zero_grad",
    "requires_grad_",
    "apply",
    "register_buffer",
    "register_parameter",
    "register_module",
    "add_module",
    "get_submodule",
    "register_forward_hook",
    "register_full_backward_hook",
    "register_comm_hook",
    "no_sync",
    "join",
    "save_pretrained",
    "generate",
    "gradient_checkpointing_enable",
    "enable_input_require_grads",
    "print_trainable_parameters",
    "resize_token_embeddings",
    "get_input_embeddings",
    "get_output_embeddings",
    "tie_weights",
    "configure_optimizers",
    "num_parameters",
    "get_num_params",
    "extra_repr",
    "merge_and_unload",
    "set_static_graph",
    "_set_static_graph",
    "add_adapter",
    "enable_adapters",
}
# Attributes of a model that are data, not sub-modules.
MODEL_DATA_ATTRS = {"config", "device", "dtype", "training", "weight", "bias", "data", "grad"}

# Attributes of a LightningModule that hold the run's context, not a submodule.
MODULE_CONTEXT_ATTRS = {"trainer", "fabric", "logger", "hparams", "current_epoch", "global_step"}

# Calls that return (a view of) their first argument for the scanner's purposes.
PASSTHROUGH = {"tqdm", "iter", "cycle", "islice", "trange_passthrough", "skip_first_batches"}

# Module-creating calls: any of these attached to a model after DDP wraps it adds parameters
# that DDP's reducer never sees.
INJECTORS = {
    "get_peft_model",
    "inject_adapter_in_model",
    "add_module",
    "register_module",
    "register_parameter",
    "add_adapter",
    "resize_token_embeddings",
    "convert_sync_batchnorm",
    "prepare_model_for_kbit_training",
}

STATE_LOADERS = {
    "load_state_dict",
    "set_peft_model_state_dict",
    "load_checkpoint",
    "load_state",
    "load_adapter",
    "load_model",
}
PARAM_INPLACE = {
    "copy_",
    "mul_",
    "add_",
    "sub_",
    "div_",
    "fill_",
    "zero_",
    "normal_",
    "uniform_",
    "lerp_",
    "clamp_",
    "apply",
}


def last(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def is_ddp(canon: str) -> bool:
    return last(canon) in ("DistributedDataParallel", "DDP") or canon.endswith(
        "parallel.DistributedDataParallel"
    )


def is_fsdp(canon: str) -> bool:
    return last(canon) in ("FullyShardedDataParallel", "FSDP", "fully_shard")


def optimizer_family(canon: str) -> str | None:
    return OPTIMIZER_FAMILY.get(last(canon))


def is_scheduler(canon: str) -> bool:
    name = last(canon)
    if name in TORCH_SCHEDULERS:
        return True
    return (
        name.startswith(HF_SCHEDULER_PREFIX) and "schedule" in name
    ) or name == "create_scheduler"


def dtype_of(canon_or_text: str | None) -> str | None:
    """'fp16' | 'bf16' | 'fp32' for a torch dtype symbol or a dtype string."""
    if not canon_or_text:
        return None
    name = last(canon_or_text).lower().strip("'\"")
    if name in ("float16", "half", "fp16", "f16"):
        return "fp16"
    if name in ("bfloat16", "bf16"):
        return "bf16"
    if name in ("float32", "float", "fp32", "f32", "no", "tf32"):
        return "fp32"
    return None


def is_random_transform(name: str) -> bool:
    n = last(name)
    return n in RANDOM_TRANSFORMS or (n.startswith(RANDOM_TRANSFORMS_PREFIX) and n[6:7].isupper())
