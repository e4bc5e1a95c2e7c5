"""The primitive: attention pooling by similarity (pool, loo_pool, attention_weights).

Everything in nadaraya calls :func:`pool` or the partial sums behind it; nothing else
re-implements the kernel sums.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import backends
from ._validation import (
    as_bandwidth,
    as_empty,
    as_points,
    as_sample_weight,
    as_values,
    pick_dtype,
)
from .kernels import Kernel
from .kernels import get as get_kernel
from .partials import Partials

__all__ = ["EmptyWindowWarning", "attention_weights", "loo_pool", "pool"]


class EmptyWindowWarning(UserWarning):
    """Some queries had no key inside a compact kernel's window; see ``empty=``."""


@dataclass
class Call:
    """A validated call of the primitive: 2-D arrays of one dtype, a kernel, a bandwidth."""

    queries: NDArray[np.floating]
    keys: NDArray[np.floating]
    values: NDArray[np.floating]
    one_d: bool
    kernel: Kernel
    bandwidth: NDArray[np.floating]
    sample_weight: NDArray[np.floating] | None

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(m, n, d, p)."""
        return (self.queries.shape[0], *self.keys.shape, self.values.shape[1])


def prepare(
    queries: ArrayLike | None,
    keys: ArrayLike,
    values: ArrayLike,
    *,
    kernel: str | Kernel,
    bandwidth: ArrayLike,
    sample_weight: ArrayLike | None = None,
) -> Call:
    """Validate the arguments of :func:`pool` (``queries=None`` means the keys themselves)."""
    k = get_kernel(kernel)
    dtype = pick_dtype(keys, values, keys if queries is None else queries)
    kk = as_points("keys", keys, dtype)
    n, d = kk.shape
    qq = kk if queries is None else as_points("queries", queries, dtype, d=d)
    vv, one_d = as_values(values, n, dtype)
    h = as_bandwidth(bandwidth, d)
    sw = as_sample_weight(sample_weight, n, dtype)
    return Call(qq, kk, vv, one_d, k, h, sw)


def compute_partials(
    call: Call, *, exclude: NDArray[np.integer] | None = None, backend: str = "auto"
) -> tuple[Partials, backends.Choice]:
    """The partial sums of a validated call on the chosen backend."""
    m, n, d, _ = call.shape
    choice = backends.choose(call.kernel, n=n, m=m, d=d, bandwidth=call.bandwidth, backend=backend)
    parts = backends.compute(
        choice.name,
        call.queries,
        call.keys,
        call.values,
        kernel=call.kernel,
        bandwidth=call.bandwidth,
        sample_weight=call.sample_weight,
        exclude=exclude,
    )
    return parts, choice


def _nearest(call: Call, rows: NDArray[np.intp], exclude: NDArray[np.integer] | None) -> NDArray[np.intp]:
    """Index of the nearest key (in scaled coordinates ``x / h``) to each query in ``rows``,
    skipping keys of zero weight and the excluded key; -1 where there is none."""
    from scipy.spatial import cKDTree

    scale = 1.0 / call.bandwidth
    ok = (
        np.arange(call.keys.shape[0]) if call.sample_weight is None else np.nonzero(call.sample_weight > 0)[0]
    )
    tree = cKDTree(call.keys[ok] * scale)
    kq = min(2, ok.size)
    _, idx = tree.query(call.queries[rows] * scale, k=[1, 2][:kq])
    idx = ok[np.minimum(idx, ok.size - 1)]
    first = idx[:, 0]
    if exclude is None:
        return first
    clash = first == exclude[rows]
    out = first.copy()
    out[clash] = idx[clash, 1] if kq == 2 else -1
    return out


def _report_empty(rows: NDArray[np.intp], m: int, call: Call, empty: str) -> None:
    """Raise or warn about queries with an empty window, as ``empty=`` says."""
    what = (
        f"{rows.size} of {m} queries have no key with positive weight within the support "
        f"of the {call.kernel.name!r} kernel (bandwidth {np.array2string(call.bandwidth, threshold=4)})"
    )
    if empty == "raise":
        raise ValueError(f"{what}; pass empty='nan', 'nearest' or 'mean', or a larger bandwidth")
    if empty == "nan":
        warnings.warn(f"{what}; their predictions are NaN (empty='nan')", EmptyWindowWarning, stacklevel=4)


def _fill_empty(
    out: NDArray[np.floating], parts: Partials, call: Call, empty: str, exclude: NDArray[np.integer] | None
) -> None:
    rows = np.nonzero(parts.empty)[0]
    if rows.size == 0:
        return
    _report_empty(rows, out.shape[0], call, empty)
    if empty == "nearest":
        idx = _nearest(call, rows, exclude)
        good = idx >= 0
        out[rows[good]] = call.values[idx[good]]
    elif empty == "mean":  # average pooling (the constant kernel) for these queries
        sub = Call(
            call.queries[rows],
            call.keys,
            call.values,
            call.one_d,
            get_kernel("constant"),
            call.bandwidth,
            call.sample_weight,
        )
        fallback, _ = compute_partials(
            sub, exclude=None if exclude is None else exclude[rows], backend="reference"
        )
        out[rows] = fallback.finalize()


def finish(
    parts: Partials, call: Call, empty: str, exclude: NDArray[np.integer] | None = None
) -> NDArray[np.floating]:
    """Predictions from partials, applying the ``empty=`` policy; (m,) or (m, p)."""
    out = parts.finalize()
    _fill_empty(out, parts, call, empty, exclude)
    return out[:, 0] if call.one_d else out


def _is_dask(*arrays: object) -> bool:
    """Whether any argument is a Dask collection (checked without importing dask)."""
    return any(type(a).__module__.startswith("dask.") and hasattr(a, "__dask_graph__") for a in arrays)


def _dask_pool(
    queries: object, keys: object, values: object, kernel: str | Kernel, bandwidth: ArrayLike,
    empty: str, sample_weight: object, backend: str,
) -> Any:
    """Dask input: a lazy Dask array from :func:`nadaraya.backends.dask.pool`; a backend other
    than "auto" or "dask" names the engine each task runs."""
    module = backends.get("dask")
    engine = None if backend in ("auto", "dask") else backend
    return module.pool(queries, keys, values, kernel=kernel, bandwidth=bandwidth, empty=empty,
                       sample_weight=sample_weight, engine=engine)


def pool(
    queries: ArrayLike,
    keys: ArrayLike,
    values: ArrayLike,
    *,
    kernel: str | Kernel = "gaussian",
    bandwidth: ArrayLike = 1.0,
    empty: str = "nan",
    sample_weight: ArrayLike | None = None,
    backend: str = "auto",
) -> NDArray[np.floating]:
    r"""Attention pooling by similarity: the Nadaraya-Watson estimate at each query.

    .. math::

        f(q) = \sum_i \alpha(q, k_i)\, v_i, \qquad
        \alpha(q, k_i) = \frac{s_i \prod_j K((q_j - k_{ij}) / h_j)}
                              {\sum_l s_l \prod_j K((q_j - k_{lj}) / h_j)}

    Equivalent to this dense NumPy code (which needs O(m n) memory; ``pool`` streams over
    blocks within the working memory and computes log-domain kernels with a running
    maximum, so a query far from every key gets its nearest keys' values, never 0/0)::

        u = (queries[:, None, :] - keys[None, :, :]) / bandwidth     # (m, n, d)
        w = K(u).prod(axis=-1) * sample_weight                         # (m, n)
        f = (w @ values) / w.sum(axis=1, keepdims=True)                # (m, p)

    Parameters
    ----------
    queries : array-like of shape (m, d) or (m,)
        Where to predict. A 1-D array means one feature.
    keys : array-like of shape (n, d) or (n,)
        The training inputs.
    values : array-like of shape (n,) or (n, p)
        The training outputs.
    kernel : str or Kernel, default "gaussian"
        A name from :mod:`nadaraya.kernels` (``"constant"`` is average pooling).
    bandwidth : float or array-like of shape (d,), default 1.0
        Positive and finite; one per feature or a scalar for all.
    empty : {"nan", "nearest", "mean", "raise"}, default "nan"
        What a query gets when no key lies inside a compact kernel's window: NaN (with one
        :class:`EmptyWindowWarning` per call saying how many), the value of the nearest key
        (in ``x / h`` coordinates), the weighted mean of all values, or a ValueError.
    sample_weight : array-like of shape (n,), optional
        Non-negative weights of the keys; integer weights act as repeated rows.
    backend : str, default "auto"
        See :func:`nadaraya.backends.available`.

    Returns
    -------
    ndarray of shape (m,) or (m, p)
        float32 when all of queries, keys and values are float32, else float64. A lazy
        ``dask.array.Array`` (one chunk per query chunk) when any input is a Dask array: see
        :mod:`nadaraya.backends.dask` and docs/distributed.md.

    Examples
    --------
    >>> import nadaraya
    >>> nadaraya.pool([2.5], [1.0, 2.0, 3.0], [3.0, 5.0, 4.0]).round(2)
    array([4.27])
    """
    empty = as_empty(empty)
    if _is_dask(queries, keys, values, sample_weight):
        return _dask_pool(queries, keys, values, kernel, bandwidth, empty, sample_weight, backend)
    call = prepare(queries, keys, values, kernel=kernel, bandwidth=bandwidth, sample_weight=sample_weight)
    parts, _ = compute_partials(call, backend=backend)
    return finish(parts, call, empty)


def loo_pool(
    keys: ArrayLike,
    values: ArrayLike,
    *,
    kernel: str | Kernel = "gaussian",
    bandwidth: ArrayLike = 1.0,
    empty: str = "nan",
    sample_weight: ArrayLike | None = None,
    backend: str = "auto",
) -> NDArray[np.floating]:
    """Leave-one-out predictions: each key pooled over all the *other* keys.

    Each point's own term is left out inside the sums (masked), never subtracted afterwards,
    so the result is exact even when the own term dominates. Other keys at the same
    location are kept. These are the predictions that cross-validation scores and that the
    textbook's learnable model is trained on.

    Parameters
    ----------
    keys : array-like of shape (n, d) or (n,)
    values : array-like of shape (n,) or (n, p)
    kernel, bandwidth, empty, sample_weight, backend
        As for :func:`pool`.

    Returns
    -------
    ndarray of shape (n,) or (n, p)
        A lazy ``dask.array.Array`` when the keys, values or weights are Dask arrays.

    Examples
    --------
    >>> import nadaraya
    >>> nadaraya.loo_pool([0.0, 1.0, 2.0], [1.0, 2.0, 3.0], kernel="constant").tolist()
    [2.5, 2.0, 1.5]
    """
    empty = as_empty(empty)
    if _is_dask(keys, values, sample_weight):
        return _dask_pool(None, keys, values, kernel, bandwidth, empty, sample_weight, backend)
    call = prepare(None, keys, values, kernel=kernel, bandwidth=bandwidth, sample_weight=sample_weight)
    exclude = np.arange(call.keys.shape[0])
    parts, _ = compute_partials(call, exclude=exclude, backend=backend)
    return finish(parts, call, empty, exclude)


def attention_weights(
    queries: ArrayLike,
    keys: ArrayLike,
    *,
    kernel: str | Kernel = "gaussian",
    bandwidth: ArrayLike = 1.0,
    sample_weight: ArrayLike | None = None,
    empty: str = "nan",
) -> NDArray[np.floating]:
    """The attention weights ``alpha(q, k_i)``: one row per query, summing to one.

    This materialises the (m, n) matrix, so it is meant for inspection and plots; use
    :func:`pool` to predict.

    Parameters
    ----------
    queries : array-like of shape (m, d) or (m,)
    keys : array-like of shape (n, d) or (n,)
    kernel, bandwidth, sample_weight, empty
        As for :func:`pool`; an empty row is NaN, one-hot at the nearest key, or the
        normalised sample weights ("mean").

    Returns
    -------
    ndarray of shape (m, n)

    Examples
    --------
    >>> import nadaraya
    >>> nadaraya.attention_weights([2.5], [1.0, 2.0, 3.0]).round(3)
    array([[0.155, 0.422, 0.422]])
    """
    from .backends.reference import block_sizes, block_weights

    empty = as_empty(empty)
    kk = np.asarray(keys)
    call = prepare(
        queries,
        kk,
        np.zeros(kk.shape[0] if kk.ndim else 1),
        kernel=kernel,
        bandwidth=bandwidth,
        sample_weight=sample_weight,
    )
    m, n, _, _ = call.shape
    k = call.kernel
    inv_h = (1.0 / call.bandwidth).astype(call.queries.dtype)
    log_sw = None
    if call.sample_weight is not None and k.log_domain:
        with np.errstate(divide="ignore"):
            log_sw = np.log(call.sample_weight)
    out = np.empty((m, n), dtype=call.queries.dtype)
    bq, _ = block_sizes(m, n, out.itemsize)
    for q0 in range(0, m, bq):
        w = block_weights(call.queries[q0 : q0 + bq], call.keys, k, inv_h, log_sw, call.sample_weight)
        if k.log_domain:
            w -= w.max(axis=1, keepdims=True)
            np.exp(w, out=w)
        out[q0 : q0 + bq] = w
    total = out.sum(axis=1)
    ok = total > 0
    out[ok] /= total[ok, None]
    rows = np.nonzero(~ok)[0]
    if rows.size:
        _report_empty(rows, m, call, empty)
        if empty == "nearest":
            idx = _nearest(call, rows, None)
            out[rows] = 0.0
            out[rows, idx] = 1.0
        elif empty == "mean":
            sw = np.ones(n) if call.sample_weight is None else call.sample_weight
            out[rows] = sw / sw.sum()
        else:
            out[rows] = np.nan
    return out
