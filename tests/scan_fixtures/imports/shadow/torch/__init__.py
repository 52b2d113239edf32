"""Not the real torch: the scan must not read this."""
raise RuntimeError(
