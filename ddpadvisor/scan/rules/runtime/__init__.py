"""Which framework drives the step, torch.compile and sharded wrappers (kb/causes/runtime.yaml)."""
