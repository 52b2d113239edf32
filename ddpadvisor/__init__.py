"""ddpadvisor: evidence-based troubleshooting of PyTorch DDP training that oscillates or diverges."""

__version__ = "0.1.0"
