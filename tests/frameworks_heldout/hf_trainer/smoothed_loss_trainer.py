# Fine-tune a small Llama with a label-smoothed LM loss by overriding Trainer.compute_loss.
import gc
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

SEQ = 16
VOCAB = 128


class SmoothedLMTrainer(Trainer):
    smoothing = 0.1

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        logits = outputs.logits[:, :-1, :].contiguous()
        target = labels[:, 1:].contiguous()
        loss = F.cross_entropy(
            logits.view(-1, logits.size(-1)),
            target.view(-1),
            ignore_index=-100,
            label_smoothing=self.smoothing,
        )
        return (loss, outputs) if return_outputs else loss


def make_rows(n, seed=1234):
    g = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(n):
        ids = torch.randint(3, VOCAB, (SEQ,), generator=g)
        rows.append({"input_ids": ids, "labels": ids.clone()})
    return rows


def collate(rows):
    return {k: torch.stack([r[k] for r in rows]) for k in rows[0]}


if __name__ == "__main__":
    cfg = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=SEQ,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg)

    args = TrainingArguments(
        output_dir=os.environ.get("OUT_DIR", "/tmp/ddpadvisor-heldout/smoothed"),
        per_device_train_batch_size=2,
        gradient_accumulation_steps=4,
        max_steps=3,
        learning_rate=3e-4,
        warmup_steps=1,
        max_grad_norm=1.0,
        logging_steps=1,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        dataloader_num_workers=0,
        ddp_find_unused_parameters=False,
        disable_tqdm=True,
    )
    trainer = SmoothedLMTrainer(
        model=model, args=args, train_dataset=make_rows(96), data_collator=collate
    )
    trainer.train()

    del trainer, model
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()
