"""A Trainer subclass that overrides compute_loss the way older tutorials do.

    torchrun --nproc_per_node 2 trainer_loss_not_scaled.py

The model is called without num_items_in_batch, so it returns the micro-batch mean, and the
override swallows num_items_in_batch in **kwargs. The Trainer still counts the loss as
normalised over the accumulated batch (the model accepts loss kwargs and a count was given),
so it does not divide by gradient_accumulation_steps: the step sums 4 mean gradients.
"""

from random_tokens import RandomTokens
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments


class MyTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        outputs = model(input_ids=inputs["input_ids"], labels=inputs["labels"])
        loss = outputs.loss
        return (loss, outputs) if return_outputs else loss


def main() -> None:
    args = TrainingArguments(
        output_dir="/tmp/ddpadvisor-frameworks/hf_trainer/not_scaled",
        use_cpu=True,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=4,
        max_steps=6,
        learning_rate=1e-3,
        max_grad_norm=1.0,
        logging_steps=2,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
    )
    config = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=128, n_positions=16)
    model = GPT2LMHeadModel(config)
    trainer = MyTrainer(model=model, args=args, train_dataset=RandomTokens())
    trainer.train()


if __name__ == "__main__":
    main()
