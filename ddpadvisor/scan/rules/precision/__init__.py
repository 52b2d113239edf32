"""Mixed precision, the grad scaler and clipping around it (kb/causes/precision.yaml)."""
