"""The dense (or sparse) attention weights of the primitive: :func:`attention_weights`."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from nadaraya._core.call import Call, prepare
from nadaraya._core.finish import fill_empty, report_empty
from nadaraya._core.nearest import FAR_LOG_WEIGHT, _far_weights, _nearest
from nadaraya._support.config import get_config
from nadaraya._support.validation import as_empty, as_real
from nadaraya.kernels import Kernel

__all__ = ["attention_weights"]


def _dense_limit(max_bytes: float | None) -> float:
    """The largest result :func:`attention_weights` may return, in bytes."""
    if max_bytes is None:
        return DENSE_WORKING_MEMORY_FACTOR * float(get_config()["working_memory"]) * 2**20
    limit = float(max_bytes)
    if not limit > 0:
        raise ValueError(f"max_bytes must be a positive number of bytes; got {max_bytes!r}")
    return limit


#: attention_weights returns at most this many times the working memory (1 GiB by default).
DENSE_WORKING_MEMORY_FACTOR = 4


def _size(nbytes: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{int(nbytes)} bytes"


def attention_weights(
    queries: ArrayLike,
    keys: ArrayLike,
    *,
    kernel: str | Kernel = "gaussian",
    bandwidth: ArrayLike = 1.0,
    sample_weight: ArrayLike | None = None,
    empty: str = "nan",
    sparse: bool = False,
    max_bytes: float | None = None,
) -> Any:
    """The attention weights ``alpha(q, k_i)``: one row per query, summing to one.

    This returns the (m, n) matrix, so it is meant for inspection and plots; use
    :func:`pool` to predict (it never forms the matrix). The rows are computed in blocks
    within the working memory and normalised in place: the peak memory is the result plus
    the working memory.

    Parameters
    ----------
    queries : array-like of shape (m, d) or (m,)
    keys : array-like of shape (n, d) or (n,)
    kernel, bandwidth, sample_weight, empty
        As for :func:`pool`; an empty row is NaN, spread over the nearest keys (their sample
        weights normalised; one-hot unless several are equally near), the normalised sample
        weights ("mean"), or a ValueError. A query far from every key gets the exact limit
        of its weights, as in :func:`pool`.
    sparse : bool, default False
        Return a ``scipy.sparse.csr_array`` holding only the positive weights: compact
        kernels make it cheap. An empty row under ``empty="nan"`` then holds no entries
        (it sums to 0, not 1).
    max_bytes : float, optional
        The largest result allowed, in bytes (for ``sparse=True``: its data and column
        indices). Default: ``DENSE_WORKING_MEMORY_FACTOR`` (4) times the working memory
        (:func:`nadaraya.set_config`), 1 GiB unless changed. A larger result is refused
        before it is allocated (dense) or as soon as it grows past the limit (sparse).

    Returns
    -------
    ndarray of shape (m, n), or scipy.sparse.csr_array when ``sparse=True``

    Raises
    ------
    ValueError
        When the result would exceed ``max_bytes`` (the message says what to do instead),
        and for invalid arguments as :func:`pool`.

    Examples
    --------
    >>> import nadaraya
    >>> nadaraya.attention_weights([2.5], [1.0, 2.0, 3.0]).round(3)
    array([[0.155, 0.422, 0.422]])
    >>> w = nadaraya.attention_weights([2.5], [1.0, 2.0, 3.0], kernel="epanechnikov", sparse=True)
    >>> w.nnz, w.sum().round(6)
    (2, np.float64(1.0))
    """
    empty = as_empty(empty)
    kk = as_real("keys", keys)
    call = prepare(
        queries, kk, np.zeros(kk.shape[0] if kk.ndim else 1), kernel=kernel, bandwidth=bandwidth,
        sample_weight=sample_weight,
    )
    m, n, _, _ = call.shape
    dtype = call.queries.dtype
    limit = _dense_limit(max_bytes)
    if not sparse and m * n * dtype.itemsize > limit:
        raise ValueError(
            f"attention_weights would return a dense ({m}, {n}) {dtype} array of "
            f"{_size(m * n * dtype.itemsize)}, more than max_bytes ({_size(limit)}); use pool() to "
            "predict (it never forms the matrix), sparse=True for a compact kernel, fewer queries "
            "or keys, or pass a larger max_bytes"
        )
    rows_of = _WeightRows(call, empty, 0.0 if sparse else np.nan)
    # one block of whole rows at a time, within the working memory
    entries = max(1, int(get_config()["working_memory"] * 2**20) // (8 * dtype.itemsize))
    bq = max(1, min(m, entries // max(n, 1)))
    if sparse:
        from scipy import sparse as sp
    out = None if sparse else np.empty((m, n), dtype=dtype)
    pieces: list[Any] = []
    stored = 0
    empty_rows: list[NDArray[np.intp]] = []
    for q0 in range(0, m, bq):
        q1 = min(m, q0 + bq)
        w, rows = rows_of(q0, q1)
        if rows.size:
            empty_rows.append(rows)
        if sparse:
            piece = sp.csr_array(w)
            stored += piece.nnz * (dtype.itemsize + piece.indices.itemsize)
            if stored > limit:
                raise ValueError(
                    f"attention_weights(sparse=True) holds more than max_bytes ({_size(limit)}) of "
                    f"positive weights after {q1} of {m} queries; use pool() to predict, a smaller "
                    "bandwidth or a compact kernel, or pass a larger max_bytes"
                )
            pieces.append(piece)
        else:
            assert out is not None
            out[q0:q1] = w
    if empty_rows:
        report_empty(int(sum(r.size for r in empty_rows)), m, empty, call.kernel, call.bandwidth)
    if sparse:
        return sp.vstack(pieces, format="csr")
    return out


class _WeightRows:
    """The rows ``q0:q1`` of the attention weights of a validated call, normalised, with the
    far queries' exact limit and the ``empty=`` policy's fill (:func:`fill_empty`) applied; and
    which rows were empty (the caller reports them once per call)."""

    def __init__(self, call: Call, empty: str, nan: float) -> None:
        self.call, self.empty, self.nan = call, empty, nan
        dtype = call.queries.dtype
        self.inv_h = (1.0 / call.bandwidth).astype(dtype)
        self.log_sw = None
        if call.sample_weight is not None and call.kernel.log_domain:
            with np.errstate(divide="ignore"):
                self.log_sw = np.log(call.sample_weight)
        n = call.keys.shape[0]
        sw = np.ones(n) if call.sample_weight is None else call.sample_weight.astype(np.float64)
        self.mean_row = (sw / sw.sum()).astype(dtype)

    def __call__(self, q0: int, q1: int) -> tuple[NDArray[np.floating], NDArray[np.intp]]:
        from nadaraya.backends.reference import block_weights

        call, k = self.call, self.call.kernel
        w = block_weights(call.queries[q0:q1], call.keys, k, self.inv_h, self.log_sw, call.sample_weight)
        if k.log_domain:
            shift = w.max(axis=1)
            w -= np.where(np.isfinite(shift), shift, 0.0)[:, None]
            np.exp(w, out=w)
            bad = ~(shift >= FAR_LOG_WEIGHT)
        total = w.sum(axis=1)
        np.divide(w, total[:, None], out=w, where=total[:, None] > 0)
        if k.log_domain:
            far = q0 + np.nonzero(bad)[0]
            if far.size:
                ok, fw = _far_weights(call, far, None)
                w[far - q0] = 0.0
                w[(far - q0)[:, None], ok[None, :]] = fw
            return w, far[:0]
        rows = np.nonzero(~(total > 0))[0]
        fill_empty(w, rows, self.empty, nearest=lambda r: self._nearest(q0 + r), mean=self._mean,
                   nan=self.nan)
        return w, q0 + rows

    def _nearest(self, rows: NDArray[np.intp]) -> tuple[NDArray[np.floating], NDArray[np.bool_]]:
        """The nearest keys' normalised sample weights (one-hot unless several are as near)."""
        vals = np.zeros((rows.size, self.mean_row.size), dtype=self.mean_row.dtype)
        sets = _nearest(self.call, rows, None, 2.0)
        for i, near in enumerate(sets):
            vals[i, near] = self.mean_row[near] / self.mean_row[near].sum()
        return vals, np.array([near.size > 0 for near in sets], dtype=bool)

    def _mean(self, rows: NDArray[np.intp]) -> tuple[NDArray[np.floating], NDArray[np.bool_]]:
        """The normalised sample weights for every row."""
        return np.broadcast_to(self.mean_row, (rows.size, self.mean_row.size)), np.ones(rows.size, dtype=bool)
