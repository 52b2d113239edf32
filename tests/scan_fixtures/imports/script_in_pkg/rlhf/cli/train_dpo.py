"""Entry script inside a package (``python -m rlhf.cli.train_dpo``): relative imports, a trainer
class over a vendored copy of a framework trainer, losses in a namespace package."""
# scan-facts: loss_multiplied_by_world_size=true calls_set_epoch=true uses_grad_clipping=true
# scan-facts: logs_rank0_only=false
import argparse

from ..trainer import PairTrainer
from .. import strategy as strat
from rlhf.losses.pairwise import pair_loss


def train(args):
    strategy = strat.Strategy(args)
    strategy.setup_distributed()
    trainer = PairTrainer(strategy, pair_loss, lr=args.lr)
    trainer.fit(args.epochs)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=5e-7)
    parser.add_argument("--epochs", type=int, default=1)
    train(parser.parse_args())
