"""Seq2seq (sort a digit string) with a T5 on the DeepSpeed engine at ZeRO-3, bf16.

HfDeepSpeedConfig is created before the model so that from_config builds the T5 under
zero.Init (parameters partitioned as they are created). DeepSpeed's Adam and WarmupDecayLR
come from the config dict. The loop owns its DataLoader with a DistributedSampler and a
padding collate (labels padded with -100), calls engine.backward / engine.step, and after
every epoch evaluates a token-weighted loss (sums and token counts all-reduced) and saves a
checkpoint; the best epoch is loaded back with engine.load_checkpoint for the final eval.

    torchrun --nproc_per_node 2 engine_t5_zero3.py --epochs 2
"""

from __future__ import annotations

import argparse
import gc
import tempfile

import deepspeed
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from transformers import AutoModelForSeq2SeqLM, T5Config
from transformers.integrations import HfDeepSpeedConfig

PAD, EOS, DIGIT0 = 0, 1, 2  # digits 0..9 are tokens 2..11


class SortDigits(Dataset):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.pairs = []
        for _ in range(n):
            length = int(torch.randint(4, 13, (1,), generator=g))
            digits = torch.randint(0, 10, (length,), generator=g)
            source = torch.cat([digits + DIGIT0, torch.tensor([EOS])])
            target = torch.cat([digits.sort().values + DIGIT0, torch.tensor([EOS])])
            self.pairs.append((source, target))

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, i: int):
        return self.pairs[i]


def pad_collate(batch):
    width_in = max(s.numel() for s, _ in batch)
    width_out = max(t.numel() for _, t in batch)
    ids = torch.full((len(batch), width_in), PAD)
    mask = torch.zeros((len(batch), width_in), dtype=torch.long)
    labels = torch.full((len(batch), width_out), -100)
    for row, (s, t) in enumerate(batch):
        ids[row, : s.numel()], mask[row, : s.numel()], labels[row, : t.numel()] = s, 1, t
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def evaluate(engine, loader) -> float:
    engine.eval()
    loss_sum, n_tokens = 0.0, 0
    with torch.no_grad():
        for batch in loader:
            batch = {k: v.to(engine.device) for k, v in batch.items()}
            tokens = int(batch["labels"].ne(-100).sum())
            loss_sum += engine(**batch).loss.float().item() * tokens
            n_tokens += tokens
    stats = torch.tensor([loss_sum, n_tokens], dtype=torch.float64)  # fault t5_eval_sum: stats = torch.tensor([loss_sum / n_tokens], dtype=torch.float64)
    dist.all_reduce(stats, op=dist.ReduceOp.SUM)
    engine.train()
    return (stats[0] / stats[1]).item()  # fault t5_eval_sum: return stats[0].item()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--micro_batch", type=int, default=8)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--local_rank", type=int, default=-1)
    args = parser.parse_args()

    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)

    train_set, val_set = SortDigits(160, seed=1), SortDigits(48, seed=2)
    sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.micro_batch, sampler=sampler, collate_fn=pad_collate)
    val_loader = DataLoader(
        val_set,
        batch_size=16,
        sampler=DistributedSampler(val_set, num_replicas=world, rank=rank, shuffle=False),
        collate_fn=pad_collate,
    )
    total_steps = len(loader) * args.epochs
    ds_config = {
        "train_micro_batch_size_per_gpu": args.micro_batch,
        "gradient_accumulation_steps": 1,
        "train_batch_size": args.micro_batch * world,
        "gradient_clipping": 1.0,
        "bf16": {"enabled": True},
        "zero_optimization": {
            "stage": 3,
            "overlap_comm": False,
            "stage3_param_persistence_threshold": 0,
            "stage3_prefetch_bucket_size": 100000,
            "reduce_bucket_size": 100000,
        },
        "optimizer": {
            "type": "Adam",
            "params": {"lr": args.lr, "betas": [0.9, 0.98], "eps": 1e-8, "weight_decay": 0.01},
        },
        "scheduler": {
            "type": "WarmupDecayLR",
            "params": {
                "warmup_min_lr": 0.0,
                "warmup_max_lr": args.lr,
                "warmup_num_steps": 3,
                "total_num_steps": total_steps,
                "warmup_type": "linear",
            },
        },
        "steps_per_print": 10_000,
    }
    dschf = HfDeepSpeedConfig(ds_config)  # keep alive: from_config builds under zero.Init  # noqa: F841
    config = T5Config(
        vocab_size=16,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        relative_attention_num_buckets=8,
        pad_token_id=PAD,
        eos_token_id=EOS,
        decoder_start_token_id=PAD,
    )
    model = AutoModelForSeq2SeqLM.from_config(config)
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)

    ckpt_dir = [tempfile.mkdtemp(prefix="t5_ds_") if rank == 0 else None]
    dist.broadcast_object_list(ckpt_dir, src=0)
    ckpt_dir = ckpt_dir[0]
    best = (float("inf"), None)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # fault t5_no_set_epoch: -
        for step, batch in enumerate(loader):
            batch = {k: v.to(engine.device) for k, v in batch.items()}
            loss = engine(**batch).loss
            engine.backward(loss)
            engine.step()
            if step % 4 == 0:
                logged = loss.detach().float().clone()
                dist.all_reduce(logged)
                if rank == 0:
                    print(f"epoch {epoch} step {step}: loss {logged.item() / world:.4f} lr {engine.get_lr()[0]:.2e}")
        val_loss = evaluate(engine, val_loader)
        tag = f"epoch{epoch}"
        engine.save_checkpoint(ckpt_dir, tag=tag, client_state={"epoch": epoch, "val_loss": val_loss})
        if val_loss < best[0]:
            best = (val_loss, tag)
        if rank == 0:
            print(f"epoch {epoch}: val loss {val_loss:.4f}", flush=True)

    _, client_state = engine.load_checkpoint(
        ckpt_dir, tag=best[1], load_optimizer_states=False, load_lr_scheduler_states=False
    )
    final = evaluate(engine, val_loader)
    if rank == 0:
        print(f"best epoch {client_state['epoch']}: val loss {final:.4f}", flush=True)

    del engine, model
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
