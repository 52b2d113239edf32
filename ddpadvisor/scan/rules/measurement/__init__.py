"""How the loss is logged and the batch it is measured on (kb/causes/measurement.yaml)."""
