"""TRL's GRPOTrainer draws its prompts with a repeat sampler of its own (each prompt repeated
for its group of generations), not the Trainer's shuffling sampler: whether the epoch reaches
it is TRL's, so calls_set_epoch stays undecided."""
# scan-facts: calls_set_epoch=unknown hand_written_loop=false
from trl import GRPOConfig, GRPOTrainer

from datasets import load_dataset


def reward_len(completions, **kwargs):
    return [-abs(20 - len(c)) for c in completions]


dataset = load_dataset("trl-lib/tldr", split="train")
config = GRPOConfig(output_dir="out", num_train_epochs=2, num_generations=8)
trainer = GRPOTrainer(  # ok: sampler-set-epoch-missing
    model="Qwen/Qwen2-0.5B-Instruct", reward_funcs=reward_len, args=config, train_dataset=dataset
)
trainer.train()
