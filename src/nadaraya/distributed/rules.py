"""Rules of thumb on Dask arrays: the robust scale with Dask reductions and exact quartiles."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dask
import dask.array as da
import numpy as np
from numpy.typing import NDArray

from nadaraya.bandwidth.rules import check_rule_input, from_scale, scale_from
from nadaraya.distributed.inputs import _as_rows, _dask_weights, _points_rows, _zero_weights
from nadaraya.kernels import Kernel
from nadaraya.kernels import get as get_kernel

__all__ = ["robust_scale", "rule_of_thumb"]

# --------------------------------------------------------------------------- rules of thumb


def _weighted_quantiles(
    x: da.Array,
    w: da.Array | None,
    probs: Sequence[float],
    total: float,
    bounds: tuple[NDArray[np.floating], NDArray[np.floating]],
    limit: int = 65536,
    bins: int = 1024,
) -> NDArray[np.float64]:
    """Exact weighted quantiles (inverted CDF, as ``np.quantile(..., method="inverted_cdf")``),
    per feature, by narrowing a bracket with Dask histograms until few points are left in it.

    ``bounds`` are the per-feature minimum and maximum. Each pass is one Dask reduction over
    the data: per bracket, the weight, count, smallest and largest value in each of ``bins``
    bins; the bracket shrinks to the data inside the bin where the target weight is reached,
    so ties end the search at once. Only the points inside the final brackets (at most
    ``limit`` each) are gathered. Returns an array of shape (len(probs), d).
    """
    n, d = x.shape
    ww = da.ones(n, chunks=x.chunks[0], dtype=np.float64) if w is None else w.astype(np.float64)
    targets = np.asarray(probs, dtype=np.float64) * total
    shape = (len(probs), d)
    lo = np.broadcast_to(bounds[0], shape).astype(np.float64)
    hi = np.broadcast_to(bounds[1], shape).astype(np.float64)
    below = np.zeros(shape)  # weight of the points < lo
    count = np.full(shape, n)  # points in [lo, hi]
    result = np.where(lo == hi, lo, np.nan)
    while (todo := np.isnan(result) & (count > limit)).any():
        edges = lo[..., None] + (hi - lo)[..., None] * np.linspace(0.0, 1.0, bins + 1)

        def hist(xb: NDArray[Any], wb: NDArray[Any], edges: NDArray[Any] = edges) -> NDArray[Any]:
            out = np.zeros((1, 4, *shape, bins))
            out[0, 2], out[0, 3] = np.inf, -np.inf
            for a, j in np.ndindex(*shape):
                col = xb[:, j]
                inside = (col >= lo[a, j]) & (col <= hi[a, j])
                idx = np.clip(np.searchsorted(edges[a, j], col[inside], side="right") - 1, 0, bins - 1)
                out[0, 0, a, j] = np.bincount(idx, weights=wb[inside, 0], minlength=bins)
                out[0, 1, a, j] = np.bincount(idx, minlength=bins)
                np.minimum.at(out[0, 2, a, j], idx, col[inside])
                np.maximum.at(out[0, 3, a, j], idx, col[inside])
            return out

        per_chunk = da.map_blocks(hist, x, ww[:, None], new_axis=[2, 3, 4], dtype=np.float64,
                                  chunks=((1,) * x.numblocks[0], (4,), (shape[0],), (d,), (bins,)))
        sums, mins, maxs = dask.compute(per_chunk[:, :2].sum(axis=0), per_chunk[:, 2].min(axis=0),
                                        per_chunk[:, 3].max(axis=0))
        for a, j in zip(*np.nonzero(todo)):
            cum = below[a, j] + np.cumsum(sums[0, a, j])
            b = int(np.argmax(cum >= targets[a])) if cum[-1] >= targets[a] else bins - 1
            below[a, j] = cum[b] - sums[0, a, j, b]
            count[a, j] = int(sums[1, a, j, b])
            lo[a, j], hi[a, j] = mins[a, j, b], maxs[a, j, b]
            if lo[a, j] == hi[a, j]:
                result[a, j] = lo[a, j]
    pending = list(zip(*np.nonzero(np.isnan(result))))
    inside = [(x[:, j] >= lo[a, j]) & (x[:, j] <= hi[a, j]) for a, j in pending]
    (gathered,) = dask.compute([(x[:, j][sel], ww[sel]) for (a, j), sel in zip(pending, inside)])
    for (a, j), (vals, wts) in zip(pending, gathered):
        order = np.argsort(vals, kind="stable")
        cum = below[a, j] + np.cumsum(wts[order])
        result[a, j] = vals[order][min(int(np.argmax(cum >= targets[a])), vals.size - 1)]
    return result


def robust_scale(X: Any, sample_weight: Any = None) -> NDArray[np.float64]:
    """Per-feature ``min(std, IQR / 1.349)`` of a Dask array, as :func:`nadaraya.bandwidth.robust_scale`.

    The mean and variance are Dask reductions; the quartiles are exact (inverted CDF,
    weights as frequencies), found by narrowing brackets with Dask histograms, so only a few
    thousand points per quartile are ever gathered.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from nadaraya.bandwidth import robust_scale as plain
    >>> x = np.random.default_rng(0).normal(size=(1000, 2))
    >>> bool(np.allclose(robust_scale(da.from_array(x, chunks=300)), plain(x), rtol=1e-12))
    True
    """
    x = _points_rows("X", X)
    n = x.shape[0]
    w = None
    if sample_weight is not None:
        sw = _dask_weights(sample_weight, n, np.dtype(np.float64))
        w = _as_rows("sample_weight", sw, np.dtype(np.float64), None, like=x.chunks[0], kind="weights")[:, 0]
    ww = da.ones(n, chunks=x.chunks[0]) if w is None else w
    total, wx, bounds = dask.compute(ww.sum(), (ww[:, None] * x).sum(axis=0), (x.min(axis=0), x.max(axis=0)))
    _zero_weights(total > 0)
    mean = wx / total
    squares = (ww[:, None] * (x - mean) ** 2).sum(axis=0).compute() if total > 1 else np.zeros(x.shape[1])
    q75, q25 = _weighted_quantiles(x, w, (0.75, 0.25), float(total), bounds)
    return scale_from(float(total), squares, q25, q75)


def rule_of_thumb(
    X: Any, method: str = "scott", *, kernel: str | Kernel = "gaussian", sample_weight: Any = None
) -> NDArray[np.float64]:
    """:func:`nadaraya.bandwidth.rule_of_thumb` on a Dask array, with Dask reductions.

    The scale comes from :func:`robust_scale` (Dask reductions, exact quartiles); the factor
    from :func:`nadaraya.bandwidth.rules.from_scale`, shared with the single-machine rule.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from nadaraya.bandwidth import rule_of_thumb as plain
    >>> x = np.random.default_rng(1).normal(size=500)
    >>> bool(np.allclose(rule_of_thumb(da.from_array(x, chunks=100)), plain(x), rtol=1e-12))
    True
    """
    x = _points_rows("X", X)
    check_rule_input(method, x.shape[0])
    total = None if sample_weight is None else float(da.asarray(sample_weight).sum().compute())
    return from_scale(robust_scale(x, sample_weight), method, get_kernel(kernel), x.shape[0], total)
