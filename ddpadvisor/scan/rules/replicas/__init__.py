"""Whether the replicas stay identical: wrap order, rank-conditional changes, batch norm and
buffers (kb/causes/replicas.yaml)."""
