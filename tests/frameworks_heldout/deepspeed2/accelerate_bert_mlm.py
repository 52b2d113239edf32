"""Masked-LM pretraining of a tiny BERT with accelerate and a DeepSpeed ZeRO-2 plugin
(``DeepSpeedPlugin(hf_ds_config=<dict>)``).

The loop is the usual no-Trainer one: the collator masks 15% of the tokens on the fly (80%
[MASK], 10% random, 10% kept), ``accelerator.accumulate`` over two micro-batches, torch AdamW
with a linear warmup schedule handed to ``accelerator.prepare``.
"""

import argparse
import math

import torch
from accelerate import Accelerator, DeepSpeedPlugin, PartialState
from accelerate.utils import set_seed
from torch.utils.data import DataLoader, Dataset
from transformers import BertConfig, BertForMaskedLM, get_scheduler

PAD, CLS, SEP, MASK = 0, 1, 2, 3
N_SPECIAL = 4


class MotifSentences(Dataset):
    """[CLS] tokens [SEP] [PAD]...: each sentence repeats a short random motif."""

    def __init__(self, n=256, width=32, vocab=128, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.rows = []
        for _ in range(n):
            length = int(torch.randint(10, width - 1, (), generator=g))
            motif = torch.randint(N_SPECIAL, vocab, (int(torch.randint(2, 5, (), generator=g)),), generator=g)
            body = motif.repeat(math.ceil(length / len(motif)))[:length]
            ids = torch.full((width,), PAD)
            ids[0], ids[1 : length + 1], ids[length + 1] = CLS, body, SEP
            self.rows.append(ids)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def mask_tokens(rows, vocab_size, mlm_probability=0.15):
    input_ids = torch.stack(rows)
    labels = input_ids.clone()
    special = input_ids < N_SPECIAL
    prob = torch.full(labels.shape, mlm_probability).masked_fill(special, 0.0)
    masked = torch.bernoulli(prob).bool()
    labels[~masked] = -100
    replace = torch.bernoulli(torch.full(labels.shape, 0.8)).bool() & masked
    input_ids[replace] = MASK
    randomise = torch.bernoulli(torch.full(labels.shape, 0.5)).bool() & masked & ~replace
    input_ids[randomise] = torch.randint(N_SPECIAL, vocab_size, labels.shape)[randomise]
    return {"input_ids": input_ids, "attention_mask": (input_ids != PAD).long(), "labels": labels}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--grad_accum", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup_steps", type=int, default=2)
    parser.add_argument("--max_grad_norm", type=float, default=1.0)
    args = parser.parse_args()

    # no GPU on this machine: gloo across CPU processes, DeepSpeed on top
    PartialState(cpu=True)
    ds_config = {
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": args.grad_accum,
        "gradient_clipping": args.max_grad_norm,  # fault mlm_torch_clip: "gradient_clipping": 0.0,
        "bf16": {"enabled": "auto"},
        "zero_optimization": {"stage": 2, "overlap_comm": False, "contiguous_gradients": True},
        "steps_per_print": 1000,
    }
    plugin = DeepSpeedPlugin(hf_ds_config=ds_config)
    accelerator = Accelerator(deepspeed_plugin=plugin, mixed_precision="bf16")
    set_seed(args.seed, device_specific=True)  # fault mlm_same_masks: set_seed(args.seed)

    config = BertConfig(
        vocab_size=128,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=64,
        pad_token_id=PAD,
    )
    model = BertForMaskedLM(config)
    loader = DataLoader(
        MotifSentences(),
        batch_size=args.batch_size,
        shuffle=True,
        drop_last=True,
        collate_fn=lambda rows: mask_tokens(rows, config.vocab_size),
    )

    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not n.endswith(no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if n.endswith(no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=args.lr)
    # accelerate steps a prepared scheduler once per process at every update
    max_train_steps = math.ceil(len(loader) / accelerator.num_processes / args.grad_accum)
    lr_scheduler = get_scheduler(
        "linear",
        optimizer,
        num_warmup_steps=args.warmup_steps * accelerator.num_processes,
        num_training_steps=max_train_steps * accelerator.num_processes,
    )
    model, optimizer, loader, lr_scheduler = accelerator.prepare(model, optimizer, loader, lr_scheduler)

    model.train()
    step = 0
    for batch in loader:
        with accelerator.accumulate(model):
            loss = model(**batch).loss
            accelerator.backward(loss)
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), args.max_grad_norm)  # fault mlm_torch_clip: torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
        if accelerator.sync_gradients:
            step += 1
            mean_loss = accelerator.gather(loss.detach().float()).mean().item()
            accelerator.print(f"step {step} loss {mean_loss:.4f} lr {lr_scheduler.get_last_lr()[0]:.2e}")

    accelerator.end_training()


if __name__ == "__main__":
    main()
