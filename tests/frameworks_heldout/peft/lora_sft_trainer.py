"""LoRA SFT of a tiny Llama under the HF Trainer (the usual PEFT recipe, no downloads)."""

import gc

import torch
import torch.distributed as dist
from peft import LoraConfig, TaskType, get_peft_model
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    DataCollatorForLanguageModeling,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    Trainer,
    TrainingArguments,
)

WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "ran",
    "on",
    "under",
    "mat",
    "log",
    "quickly",
    "slowly",
    "and",
    "then",
]


def build_tokenizer():
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}
    for w in WORDS:
        vocab[w] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
    )


def synthetic_corpus(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    lines = []
    for _ in range(n):
        k = int(torch.randint(4, 10, (1,), generator=g))
        idx = torch.randint(0, len(WORDS), (k,), generator=g).tolist()
        lines.append(" ".join(WORDS[i] for i in idx))
    return lines


def main():
    tokenizer = build_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=32,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    base = LlamaForCausalLM(config)

    lora = LoraConfig(
        task_type=TaskType.CAUSAL_LM,
        r=4,
        lora_alpha=8,
        lora_dropout=0.0,
        target_modules=["q_proj", "v_proj"],
    )
    model = get_peft_model(base, lora)

    texts = synthetic_corpus(80)
    train_ds = [tokenizer(t, truncation=True, max_length=16) for t in texts]

    args = TrainingArguments(
        output_dir="/tmp/ddpadvisor-heldout/lora_sft",
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        max_steps=4,
        learning_rate=2e-3,
        lr_scheduler_type="cosine",
        warmup_steps=1,
        logging_steps=1,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        remove_unused_columns=False,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=train_ds,
        data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
    )
    trainer.train()

    del trainer, model, base
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
