"""A pipeline asks for bf16 on the command line and switches its TrainingArguments to
fp16 only when the GPU lacks bf16. The fallback is a hardware test the scan cannot
decide: the run is not known to train in fp16 with a GradScaler."""
# scan-facts: precision=unknown uses_grad_scaler=unknown
import torch
from transformers import (
    AutoModelForCausalLM,
    HfArgumentParser,
    Trainer,
    TrainingArguments,
)

from datasets import load_dataset


class Finetuner:
    def __init__(self, args):
        self.args = args

    def tune(self, model, dataset):
        if self.args.bf16 and not torch.cuda.is_bf16_supported():
            self.args.bf16 = False
            self.args.fp16 = True  # ok: fp16-without-grad-scaler
        trainer = Trainer(model=model, args=self.args, train_dataset=dataset)
        trainer.train()


def main():
    parser = HfArgumentParser(TrainingArguments)
    (args,) = parser.parse_args_into_dataclasses()
    model = AutoModelForCausalLM.from_pretrained("gpt2")
    dataset = load_dataset("imdb", split="train")
    Finetuner(args).tune(model, dataset)


if __name__ == "__main__":
    main()
