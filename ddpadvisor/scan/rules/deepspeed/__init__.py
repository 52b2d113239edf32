"""Rules whose facts serve kb/causes/deepspeed.yaml: a DeepSpeed engine driven by the script."""
