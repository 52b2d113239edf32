"""An HF Trainer fine-tune: the framework owns sampling, accumulation and sync."""
# scan-facts: uses_distributed_sampler=true calls_set_epoch=true grad_accum_steps=8
# scan-facts: loss_divided_by_accum=true zero_grad_every_micro_step=false final_micro_step_synced=true
# scan-facts: precision=fp16_amp uses_grad_scaler=true uses_grad_clipping=true warmup_steps=50
# scan-facts: optimizer_family=adam adam_beta2=0.999 per_gpu_batch_size=2 uses_lora=true
# scan-facts: module_created_after_wrap=false logs_rank0_only=false uses_fsdp_or_zero=false
# scan-facts: lr_scaling=unknown scheduler_steps_per_optimizer_step=1.0 uses_torch_compile=false hand_written_loop=false
from datasets import load_dataset
from peft import LoraConfig, get_peft_model
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    DataCollatorForLanguageModeling,
    Trainer,
    TrainingArguments,
)

tokenizer = AutoTokenizer.from_pretrained("huggyllama/llama-7b")
model = AutoModelForCausalLM.from_pretrained("huggyllama/llama-7b")
model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
data = load_dataset("yahma/alpaca-cleaned")["train"]
data = data.map(lambda ex: tokenizer(ex["output"], truncation=True, max_length=512))

args = TrainingArguments(
    output_dir="out",
    per_device_train_batch_size=2,
    gradient_accumulation_steps=8,
    learning_rate=3e-4,
    warmup_steps=50,
    fp16=True,
    logging_steps=10,
    num_train_epochs=3,
)
trainer = Trainer(
    model=model,
    args=args,
    train_dataset=data,
    data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
)
trainer.train()
