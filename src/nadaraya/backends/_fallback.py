"""The approximate backends' fallback: rows their bound cannot serve, recomputed by an exact backend."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from nadaraya.kernels import Kernel


def exact_rows(
    rows: NDArray[np.int64], queries: NDArray[np.floating], keys: NDArray[np.floating],
    values: NDArray[np.floating], kernel: Kernel, bandwidth: NDArray[np.floating],
    sample_weight: NDArray[np.floating] | None, exclude: NDArray[np.integer] | None, r: int,
    shift: NDArray[np.float64], out: NDArray[np.float64],
) -> None:
    """The exact partials of queries ``rows`` (those a faster method left out), written in place
    into ``shift`` and the rows of ``out`` (weight, values, moments, as :func:`assemble` reads
    them): the truncated backend's, which visits only the keys within each query's window, or
    the fused loop's where that computes no moments (local fits in 2 and 3 features)."""
    from nadaraya.backends import fused, truncated

    f64 = np.float64
    q, x, v = (np.asarray(a, dtype=f64) for a in (queries[rows], keys, values))
    kw = {"kernel": kernel, "bandwidth": np.asarray(bandwidth, dtype=f64),
          "sample_weight": None if sample_weight is None else np.asarray(sample_weight, dtype=f64),
          "exclude": None if exclude is None else np.asarray(exclude)[rows], "moments": r}
    backend = truncated if (r == 0 or x.shape[1] == 1) else fused
    parts = backend.partials(q, x, v, **kw)
    shift[rows] = parts.shift
    out[rows] = np.column_stack([parts.weight, parts.value.reshape(rows.size, -1)]
                                + [m.reshape(rows.size, -1) for m in parts.moments])
