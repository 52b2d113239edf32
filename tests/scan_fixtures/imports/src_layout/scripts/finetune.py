"""Entry script of a src layout: a recipe class from the installed package runs the loop.
The recipe accumulates gradients without dividing the loss by the accumulation count."""
# scan-facts: loss_divided_by_accum=false grad_accum_steps=4 logs_rank0_only=true
from tuner.config import parse
from tuner.trainers import SFTRecipe


def main():
    cfg = parse()
    recipe = SFTRecipe(cfg)
    recipe.setup()
    recipe.train()


if __name__ == "__main__":
    main()
