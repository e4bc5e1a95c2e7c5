"""The primitive's core: a validated call, its partial sums from a backend, the empty-window policy."""
