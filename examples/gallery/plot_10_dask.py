"""
The same pooling on Dask arrays
===============================

The Nadaraya-Watson sums split over shards of the training data: each block of keys gives
each query a partial result (the largest log weight, the sum of the weights, the weighted sum
of the values), and partials merge exactly. So :func:`nadaraya.pool`,
:func:`nadaraya.loo_pool` and :class:`nadaraya.NadarayaWatson` accept Dask arrays and return
lazy Dask arrays, one chunk per query chunk, whose values equal the single-machine ones to
rounding. Needs the ``dask`` extra; :doc:`/distributed` covers clusters and chunk sizes.

This example stays on one machine with Dask's synchronous scheduler (no cluster to start):
the same code runs on a ``distributed`` cluster once a ``Client`` is connected.
"""

# %%
# Sharded keys, chunked queries
# -----------------------------
# 2000 training points in four shards of 500, 400 queries in four chunks of 100.
import dask
import dask.array as da
import matplotlib.pyplot as plt
import numpy as np

import nadaraya
from nadaraya import NadarayaWatson
from nadaraya.datasets import textbook

dask.config.set(scheduler="synchronous")

data = textbook(n=2000, noise=1.0, seed=0)
grid = np.linspace(0.0, 5.0, 400)
keys = da.from_array(data.x_train[:, None], chunks=(500, 1))
values = da.from_array(data.y_train, chunks=500)
queries = da.from_array(grid[:, None], chunks=(100, 1))

lazy = nadaraya.pool(queries, keys, values, kernel="gaussian", bandwidth=0.3)
print(
    type(lazy).__name__,
    lazy.shape,
    "chunks:",
    lazy.chunks,
    "| tasks in the graph:",
    len(lazy.dask),
)

# %%
# Compute, and compare with NumPy
# -------------------------------
# Nothing ran until ``compute()``. The result equals the NumPy call on the whole arrays up to
# float64 rounding (the shards are summed in a different order).
pred = lazy.compute()
reference = nadaraya.pool(
    grid, data.x_train, data.y_train, kernel="gaussian", bandwidth=0.3
)
print("largest difference from NumPy:", float(np.abs(pred - reference).max()))

loo = nadaraya.loo_pool(keys, values, bandwidth=0.3).compute()
loo_reference = nadaraya.loo_pool(data.x_train, data.y_train, bandwidth=0.3)
print(
    "leave-one-out, largest difference:",
    float(np.abs(loo - loo_reference).max()),
)

# %%
# The estimator on Dask arrays
# ----------------------------
# ``bandwidth="scott"`` is computed with Dask reductions (the quartiles exactly), so the
# model stays lazy; ``bandwidth="cv"`` would gather the training data to search.
model = NadarayaWatson(bandwidth="scott").fit(keys, values)
numpy_model = NadarayaWatson(bandwidth="scott").fit(
    data.x_train[:, None], data.y_train
)
print(
    f"Scott's rule: {model.bandwidth_[0]:.6f} from Dask, {numpy_model.bandwidth_[0]:.6f} from NumPy"
)
lazy_fit = model.predict(queries)
print(
    "predict returns",
    type(lazy_fit).__name__,
    "; difference from NumPy:",
    float(
        np.abs(lazy_fit.compute() - numpy_model.predict(grid[:, None])).max()
    ),
)

# %%
# The picture
# -----------
# The shaded bands are the four shards of the keys; every query chunk gets partials from
# every shard, merged in a tree of fixed shape (so repeated runs are bit-identical).
fig, ax = plt.subplots(figsize=(6.4, 3.8), layout="constrained")
shards = [data.x_train[i : i + 500] for i in range(0, 2000, 500)]
for j, shard in enumerate(shards):
    ax.axvspan(shard.min(), shard.max(), color=f"C{j}", alpha=0.08, lw=0)
ax.scatter(
    data.x_train,
    data.y_train,
    s=3,
    color="0.6",
    alpha=0.5,
    label="training data (4 shards)",
)
ax.plot(grid, data.truth(grid), "--", color="k", lw=1.2, label="truth")
ax.plot(grid, pred, color="C3", lw=4, alpha=0.6, label="Dask, h = 0.3")
ax.plot(grid, reference, ":", color="C0", lw=1.8, label="NumPy, h = 0.3")
ax.set(
    xlabel="x",
    ylabel="y",
    title="Attention pooling on Dask arrays equals NumPy",
)
ax.grid(alpha=0.3)
fig.legend(
    *ax.get_legend_handles_labels(),
    loc="outside lower center",
    ncols=2,
    frameon=False,
    markerscale=3,
)
plt.show()
