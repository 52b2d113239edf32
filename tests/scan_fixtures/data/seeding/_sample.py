"""A sampling script beside the training one (helper module for seeding fixtures): the
training script imports its decode loop; its own main seeds a fixed value for sampling."""
import torch


def decode(model, x, steps=8):
    out = x
    for _ in range(steps):
        out = model(out)
    return out


def main():
    torch.manual_seed(1234)
    model = torch.nn.Linear(16, 16)
    print(decode(model, torch.randn(1, 16)))


if __name__ == "__main__":
    main()
