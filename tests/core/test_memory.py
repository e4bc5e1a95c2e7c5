"""The memory bound: scratch memory stays within the working-memory setting, never O(m n)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import nadaraya
import nadaraya.backends


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


# The compiled backends allocate outside Python's allocator (numba), so tracemalloc cannot see
# them: a fresh process measures its peak resident memory around one call instead, after a
# smaller call has compiled the loops and started the thread pool.
_RSS_SCRIPT = """
import json, resource, sys
import numpy as np
import nadaraya
import nadaraya.backends

backend, kernel, d, h = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
m = n = 20_000
rng = np.random.default_rng(0)
keys = rng.uniform(0, 5, (n, d)); values = rng.normal(size=n); queries = rng.uniform(0, 5, (m, d))

def call(q, k, v):
    if backend != "dask":
        return nadaraya.pool(q, k, v, kernel=kernel, bandwidth=h, backend=backend)
    import dask, dask.array as da
    lazy = lambda a: da.from_array(a, chunks=(5000,) + a.shape[1:])
    with dask.config.set(scheduler="synchronous"):
        return nadaraya.pool(lazy(q), lazy(k), lazy(v), kernel=kernel, bandwidth=h).compute()

with nadaraya.config_context(working_memory=16):
    call(queries[:2000], keys[:2000], values[:2000])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = call(queries, keys, values)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"extra": (after - before) * 1024, "finite": bool(np.isfinite(out).all())}))
"""


@pytest.mark.parametrize(
    "backend, kernel, d, h",
    [
        ("fused", "gaussian", 1, 0.05),
        ("fused", "epanechnikov", 3, 0.5),
        ("windowed", "epanechnikov", 1, 0.5),  # windows of about 4000 keys: 8e7 pairs
        ("windowed", "biweight", 2, 0.5),  # a k-d tree's neighbour pairs: about 1.6e7
        ("dask", "gaussian", 1, 0.05),
    ],
)
def test_compiled_and_dask_backends_peak_memory_is_bounded(backend, kernel, d, h):
    """README: "scratch memory is bounded by working_memory ... never O(m n)", for every backend."""
    import json
    import resource
    import subprocess
    import sys

    if backend not in nadaraya.backends.available():
        pytest.skip(f"backend {backend!r} is not installed")
    if not hasattr(resource, "getrusage"):
        pytest.skip("resource.getrusage is not available on this platform")
    out = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, backend, kernel, str(d), str(h)],
                         capture_output=True, text=True, timeout=300, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["finite"]
    budget, slack = 16 * 2**20, 48 * 2**20  # the setting, and threads' buffers and chunk copies
    dense = 20_000 * 20_000 * 8  # the (m, n) weights alone: 3.2 GB
    assert r["extra"] < budget + slack, f"peak resident memory grew by {r['extra'] / 2**20:.1f} MiB"
    assert r["extra"] < dense / 40
