"""The memory bound: scratch memory stays within the working-memory setting, never O(m n)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import nadaraya


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_reference_backend_peak_memory_is_bounded(kernel):
    m = n = 20_000
    rng = np.random.default_rng(0)
    keys = rng.uniform(0, 5, n)
    values = rng.normal(size=n)
    queries = rng.uniform(0, 5, m)
    budget = 16 * 2**20
    small_constant = 2 * 2**20
    dense = m * n * 8  # what the dense (m, n) weight matrix alone would take: 3.2 GB
    with nadaraya.config_context(working_memory=16):
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            before, _ = tracemalloc.get_traced_memory()
            out = nadaraya.pool(queries, keys, values, kernel=kernel, bandwidth=0.05, backend="reference")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert np.isfinite(out).all()
    extra = peak - before
    assert extra < budget + small_constant, f"peak extra memory {extra / 2**20:.1f} MiB"
    assert extra < dense / 100
