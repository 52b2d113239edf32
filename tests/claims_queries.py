"""Queries for `ddpadvisor claims`: forum tips as another user would paste them.

Every query is our own paraphrase of advice in the two seed threads (none is copied from
them), with the claim it must find first. TUNED is what the scoring was tuned on; HELD_OUT
was written before any tuning and is never used to adjust the scoring: its figures are
reported beside the tuned ones (bench/claims_lookup.py).
"""

from __future__ import annotations

# (query, claim id)
TUNED: list[tuple[str, str]] = [
    ("每张卡的随机种子最好都设得不一样，不然多卡同步之后梯度会很怪", "different-seed-per-rank"),
    ("DDP 里梯度范数是所有卡合起来算的，所以 clip 阈值要乘上 GPU 数量", "scale-clip-by-gpu-count"),
    ("建议把 torch.compile 关了再跑一遍对比，先排除编译的影响", "disable-compile-ab"),
    ("13B 模型等效 batch 64 还是太小，把梯度累积开到 16 步试试", "effective-batch-64-too-small"),
    (
        "把 bucket_cap_mb 调小一点或者开 gradient_as_bucket_view，训练会稳",
        "bucket-settings-fix-convergence",
    ),
    (
        "A100 上开 AMP 的话，各个 rank 的 GradScaler 缩放因子可能不一致，导致 loss 偶尔爆掉",
        "grad-scaler-unsynced-across-ranks",
    ),
    ("记得每个 epoch 开头调用 sampler.set_epoch，不然每轮 shuffle 都一样", "call-set-epoch"),
    (
        "loss 里用了 mean，再被 DDP 平均一次就等于多除了一遍 batch size",
        "mean-reduction-double-scales",
    ),
    ("前几百步 loss 抖一抖很正常，别慌，看整体趋势在不在降", "early-jumps-are-normal"),
    ("V100 不支持 bf16，跑的其实是 fp16，loss 跳可能是溢出出了 inf/nan", "fp16-on-v100-overflow"),
    ("改成 fp16 混合精度训练，loss 会平稳不少", "use-fp16-to-stabilise"),
    (
        "find_unused_parameters 设成 True 会让有些层梯度同步不正常，改成 False",
        "find-unused-parameters-corrupts-sync",
    ),
    (
        "先在单卡上用梯度累积凑到同样的全局 batch，跟 DDP 的曲线比一比",
        "single-gpu-accumulation-reference",
    ),
    ("试试把 NCCL 的算法从 ring 换成 tree", "nccl-ring-to-tree"),
]

# English paraphrases (tuned too), beside those in tests/test_claims.py.
ENGLISH: list[tuple[str, str]] = [
    (
        "the loss spikes because gradients are not synchronized across GPUs",
        "unsynced-gradients-as-default-suspect",
    ),
    ("turn off torch.compile and compare", "disable-compile-ab"),
    ("disable gradient clipping", "disable-or-loosen-clipping"),
]

HELD_OUT: list[tuple[str, str]] = [
    ("LoRA 跟 DDP 没啥关系，分布式下不会有什么坑", "lora-has-no-ddp-pitfalls"),
    (
        "把学习率降到现在的四分之一左右，batch 变大后 lr 别线性放那么多",
        "linear-lr-scaling-too-aggressive",
    ),
    ("每个卡上的 DistributedSampler 给不同的 seed，打乱得更彻底", "per-rank-sampler-seed"),
    ("梯度裁剪干脆关掉，或者 max_norm 开到 5，看看还炸不炸", "disable-or-loosen-clipping"),
    (
        "打印下 loss 看看是不是只有 rank0 的，没有 all_reduce 过的 loss 看着会很乱",
        "rank0-only-loss-logging",
    ),
    ("换 DeepSpeed ZeRO-2 吧，loss 能稳很多", "zero-stage-2-stabilises"),
    # Written after the scoring was settled; measured once, never tuned on.
    (
        "DDP 会自动把梯度 all-reduce 好，backward 完了每张卡上的梯度就已经是平均过的",
        "ddp-allreduce-is-reliable",
    ),
    ("loss 偶尔一下子蹦到几十，多半是混合精度搞的", "spikes-to-tens-suggest-precision"),
    ("把 Adam 的 eps 从 1e-8 改大到 1e-6 能让前期没那么跳", "raise-adam-eps"),
    ("用 no_sync 包住前面几个 micro-step，最后一步再同步梯度", "use-no-sync-for-accumulation"),
    ("LLaMA 用的是 RMSNorm，压根没有 BN，别往 BN 上想了", "llama-has-no-batchnorm"),
    (
        "freeze the first layers and unfreeze them later once the loss settles",
        "freeze-then-unfreeze-layers",
    ),
    ("每张卡 bs=2 乘 4 张卡，全局 batch 其实只有 8", "global-batch-only-8"),
    ("loss 用 sum 代替 mean，这样就不会被 DDP 平均掉", "switch-loss-to-sum"),
]

# Nothing in the knowledge base is close to these.
NONSENSE: list[str] = [
    "如何烤面包",
    "what is the capital of France",
    "今天天气怎么样",
    "qwzx plmokn vbyt",
    "猫咪为什么喜欢纸箱子",
    "best pizza in Naples",
]

# One generic word is no tip: every claim is about DDP, the loss and gradients.
GENERIC: list[str] = ["DDP", "lr", "loss", "梯度", "loss 震荡"]

# About training but about nothing a claim says; each shares words with a CORRECT claim
# (set_epoch's "epoch", the lr claim's "learning rate", the clip claim's "1.0", ...).
UNRELATED: list[tuple[str, str]] = [
    ("每个 epoch 结束之后怎么保存验证集上最好的模型", "call-set-epoch"),
    ("how do I plot the learning rate schedule in tensorboard", "linear-lr-scaling-too-aggressive"),
    ("升级到 1.0 版本的 accelerate 之后怎么写配置文件", "clip-at-one"),
    ("怎么用 wandb 记录训练曲线和显存占用", "log-grad-norm-curve"),
    ("多机训练的时候 NCCL 报超时错误该怎么排查", "lengthen-warmup"),
]
