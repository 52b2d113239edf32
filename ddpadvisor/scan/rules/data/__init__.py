"""What each rank reads: sampler, set_epoch, seeds and augmentation (kb/causes/data.yaml)."""
