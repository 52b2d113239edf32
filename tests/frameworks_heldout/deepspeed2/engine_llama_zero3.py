"""Pretraining a tiny Llama from scratch with the DeepSpeed engine (ZeRO-3 by default, bf16).

The model is built inside ``deepspeed.zero.Init`` so its parameters are partitioned as they
are created; DeepSpeed's own AdamW and WarmupCosineLR come from the config; two micro-batches
are accumulated per optimizer step.
"""

import argparse
import gc

import deepspeed
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
from transformers import LlamaConfig, LlamaForCausalLM


def synthetic_corpus(n_seq, seq_len, vocab, seed=0):
    """Sequences from a fixed random bigram table, so there is something to learn."""
    g = torch.Generator().manual_seed(seed)
    table = torch.randint(0, vocab, (vocab, 4), generator=g)
    seqs = torch.empty(n_seq, seq_len, dtype=torch.long)
    seqs[:, 0] = torch.randint(0, vocab, (n_seq,), generator=g)
    for t in range(1, seq_len):
        pick = torch.randint(0, 4, (n_seq,), generator=g)
        seqs[:, t] = table[seqs[:, t - 1], pick]
    return seqs


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--zero_stage", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--micro_batch", type=int, default=4)
    parser.add_argument("--grad_accum", type=int, default=2)
    parser.add_argument("--seq_len", type=int, default=32)
    parser.add_argument("--local_rank", type=int, default=-1)
    args = parser.parse_args()

    deepspeed.init_distributed(dist_backend="gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(42)

    ds_config = {
        "train_micro_batch_size_per_gpu": args.micro_batch,
        "gradient_accumulation_steps": args.grad_accum,
        "gradient_clipping": 1.0,
        "bf16": {"enabled": True},  # fault llama_zero0_bf16_weights: -
        "zero_optimization": {
            "stage": args.zero_stage,
            "overlap_comm": False,
            "contiguous_gradients": True,
            "stage3_param_persistence_threshold": 0,
        },
        "optimizer": {
            "type": "AdamW",
            "params": {"lr": 3e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1},
        },
        "scheduler": {
            "type": "WarmupCosineLR",
            "params": {"total_num_steps": args.steps, "warmup_num_steps": 2, "warmup_min_ratio": 0.01},
        },
        "steps_per_print": 1000,
        "wall_clock_breakdown": False,
    }

    config = LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=args.seq_len,
        tie_word_embeddings=False,
    )
    with deepspeed.zero.Init(config_dict_or_path=ds_config, enabled=args.zero_stage == 3):
        model = LlamaForCausalLM(config)  # fault llama_zero0_bf16_weights: model = LlamaForCausalLM(config).to(torch.bfloat16)

    n_seq = args.steps * args.grad_accum * args.micro_batch * world_size
    dataset = TensorDataset(synthetic_corpus(n_seq, args.seq_len, config.vocab_size))
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=42)
    loader = DataLoader(dataset, batch_size=args.micro_batch, sampler=sampler, drop_last=True)

    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)

    engine.train()
    for step, (input_ids,) in enumerate(loader):
        input_ids = input_ids.to(engine.device)
        loss = engine(input_ids=input_ids, labels=input_ids).loss
        engine.backward(loss)
        engine.step()  # fault llama_zero3_step_window: if (step + 1) % args.grad_accum == 0: || >engine.step()
        if (step + 1) % args.grad_accum == 0:
            reported = loss.detach().float().clone()
            dist.all_reduce(reported, op=dist.ReduceOp.AVG)
            if rank == 0:
                print(
                    f"step {engine.global_steps} loss {reported.item():.4f} "
                    f"lr {engine.get_lr()[0]:.2e}",
                    flush=True,
                )

    del engine, model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
