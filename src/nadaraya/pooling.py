"""The primitive: attention pooling by similarity (pool, loo_pool; attention_weights in ``_attention``).

Everything in nadaraya calls :func:`pool` or the partial sums behind it; nothing else
re-implements the kernel sums.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import backends
from ._nearest import FAR_LOG_WEIGHT, _far_weights, _nearest_values
from ._validation import (
    as_bandwidth,
    as_empty,
    as_points,
    as_sample_weight,
    as_tol,
    as_values,
    is_dask,
    pick_dtype,
    warn_at_caller,
)
from .kernels import Kernel
from .kernels import get as get_kernel
from .partials import Partials

__all__ = ["EmptyWindowWarning", "loo_pool", "pool"]


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
    #: the values were multiplied by ``2**-value_exp`` (exact) to keep their sums in range;
    #: :func:`finish` multiplies the predictions back
    value_exp: int = 0

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
    sw = as_sample_weight(sample_weight, n, dtype, relative=True)
    vv, value_exp = _in_range(vv)
    return Call(qq, kk, vv, one_d, k, h, sw, value_exp)


def _in_range(values: NDArray[np.floating]) -> tuple[NDArray[np.floating], int]:
    """Values multiplied by a power of two (exact) when their largest magnitude lies outside
    ``2**(-e/2) .. 2**(e/2)`` of their dtype's exponent range ``e``, so that sums of n
    weighted values neither overflow nor sink into subnormals; the exponent to undo it."""
    top = float(np.max(np.abs(values))) if values.size else 0.0
    info = np.finfo(values.dtype)
    if top == 0.0 or 2.0 ** (info.minexp // 2) <= top <= 2.0 ** (info.maxexp // 2):
        return values, 0
    exp = int(np.frexp(top)[1])
    return np.ldexp(values, -exp).astype(values.dtype), exp


def compute_partials(
    call: Call, *, exclude: NDArray[np.integer] | None = None, backend: str = "auto", moments: int = 0,
    device: str | None = None, tol: float | None = None, merged: bool = False,
) -> tuple[Partials, backends.Choice]:
    """The partial sums of a validated call on the chosen backend (with the moment sums of a
    local polynomial of degree ``moments``; within ``tol`` where a faster method allows it, by
    a bound per sum when the partials will be ``merged`` with others)."""
    m, n, d, _ = call.shape
    if device is not None and backend == "auto":
        backend = "torch"  # a device names the torch backend
    choice = None
    if backend == "auto":
        choice = backends.choose_for_data(call.kernel, call.queries, call.keys, call.bandwidth,
                                          moments=moments, tol=tol, loo=exclude is not None, merged=merged)
    if choice is None:
        choice = backends.choose(call.kernel, n=n, m=m, d=d, backend=backend)
    parts = backends.compute(
        choice.name,
        call.queries,
        call.keys,
        call.values,
        kernel=call.kernel,
        bandwidth=call.bandwidth,
        sample_weight=call.sample_weight,
        exclude=exclude,
        moments=moments,
        device=device,
        tol=tol,
    )
    return parts, choice


def report_empty(
    count: int, m: int, empty: str, kernel: Kernel, bandwidth: NDArray[np.floating], *,
    where: str = "", warn: bool = True,
) -> None:
    """The ``empty=`` policy's report: raise (``"raise"``) or warn (``"nan"``, unless ``warn``
    is False, as for a lazy Dask result) that ``count`` of ``m`` queries have an empty window.

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> report_empty(1, 4, "raise", get("epanechnikov"), np.array([0.1]), where=" (chunk at row 8)")
    Traceback (most recent call last):
    ...
    ValueError: 1 of 4 queries (chunk at row 8) have no key with positive weight within the support \
of the 'epanechnikov' kernel (bandwidth [0.1]); pass empty='nan', 'nearest' or 'mean', or a larger bandwidth
    """
    what = (
        f"{count} of {m} queries{where} have no key with positive weight within the support "
        f"of the {kernel.name!r} kernel (bandwidth {np.array2string(bandwidth, threshold=4)})"
    )
    if empty == "raise":
        raise ValueError(f"{what}; pass empty='nan', 'nearest' or 'mean', or a larger bandwidth")
    if empty == "nan" and warn:
        warn_at_caller(f"{what}; their predictions are NaN (empty='nan')", EmptyWindowWarning)


Fill = Callable[[NDArray[np.intp]], tuple[NDArray[Any], NDArray[np.bool_]]]


def fill_empty(
    out: NDArray[Any], rows: NDArray[np.intp], empty: str, *, nearest: Fill, mean: Fill, nan: float = np.nan
) -> NDArray[np.intp]:
    """The ``empty=`` policy's fill of the ``rows`` of ``out`` whose window is empty: ``nan``
    (``"nan"``), or what ``nearest(rows)`` or ``mean(rows)`` gives (the rows' fill, and
    where there is one); ``"raise"`` leaves them (:func:`report_empty` raised before). Returns
    the rows left without a fill (no usable key at all). The caller says how to compute the
    fill: predictions from values (:func:`finish`, the Dask chunks) or rows of weights
    (:func:`attention_weights`).

    Examples
    --------
    >>> out = np.zeros((3, 1))
    >>> mean = lambda rows: (np.full((rows.size, 1), 7.0), np.ones(rows.size, bool))
    >>> fill_empty(out, np.array([1]), "mean", nearest=mean, mean=mean).tolist(), out[:, 0].tolist()
    ([], [0.0, 7.0, 0.0])
    """
    if rows.size == 0 or empty == "raise":
        return rows[:0]
    if empty == "nan":
        out[rows] = nan
        return rows[:0]
    vals, found = (nearest if empty == "nearest" else mean)(rows)
    out[rows[found]] = vals[found]
    return rows[~found]


def _report_alone(rows: NDArray[np.intp], m: int, empty: str) -> None:
    """Leave-one-out points with no other key of positive weight: NaN, whatever ``empty`` says."""
    what = f"{rows.size} of {m} points have no other key with positive weight to pool over"
    if empty == "raise":
        raise ValueError(f"{what} (leave-one-out)")
    warn_at_caller(f"{what}; their leave-one-out predictions are NaN", EmptyWindowWarning)


def _fill_far(
    out: NDArray[np.floating], parts: Partials, call: Call, empty: str, exclude: NDArray[np.integer] | None
) -> None:
    """Recompute the queries of a log-domain kernel that lie far from every key (their log
    weights below :data:`FAR_LOG_WEIGHT`, or overflowed), exactly, by :func:`_far_weights`."""
    rows = np.nonzero(~(parts.shift >= FAR_LOG_WEIGHT))[0]
    if rows.size == 0:
        return
    ok, w = _far_weights(call, rows, exclude)
    out[rows] = (w @ call.values[ok].astype(np.float64)).astype(out.dtype)
    alone = w.sum(axis=1) == 0
    if alone.any():
        out[rows[alone]] = np.nan
        _report_alone(rows[alone], out.shape[0], empty)


def _fill_empty(
    out: NDArray[np.floating], parts: Partials, call: Call, empty: str, exclude: NDArray[np.integer] | None
) -> None:
    if call.kernel.log_domain:
        _fill_far(out, parts, call, empty, exclude)
        return
    rows = np.nonzero(parts.empty)[0]
    if rows.size == 0:
        return
    m = out.shape[0]
    report_empty(rows.size, m, empty, call.kernel, call.bandwidth)

    def nearest(rows: NDArray[np.intp]) -> tuple[NDArray[Any], NDArray[np.bool_]]:
        return _nearest_values(call, rows, exclude, 2.0)

    def mean(rows: NDArray[np.intp]) -> tuple[NDArray[Any], NDArray[np.bool_]]:
        """Average pooling (the constant kernel) for these queries."""
        sub = Call(call.queries[rows], call.keys, call.values, call.one_d, get_kernel("constant"),
                   call.bandwidth, call.sample_weight)
        fallback, _ = compute_partials(sub, exclude=None if exclude is None else exclude[rows],
                                       backend="reference")
        return fallback.finalize(), ~fallback.empty

    alone = fill_empty(out, rows, empty, nearest=nearest, mean=mean)
    if alone.size:
        _report_alone(alone, m, empty)


def finish(
    parts: Partials, call: Call, empty: str, exclude: NDArray[np.integer] | None = None
) -> NDArray[np.floating]:
    """Predictions from partials, applying the ``empty=`` policy; (m,) or (m, p)."""
    out = parts.finalize()
    _fill_empty(out, parts, call, empty, exclude)
    if call.value_exp:
        out = np.ldexp(out, call.value_exp).astype(out.dtype, copy=False)
    return out[:, 0] if call.one_d else out


def _lazy_pool(
    queries: object, keys: object, values: object, kernel: str | Kernel, bandwidth: ArrayLike,
    empty: str, sample_weight: object, backend: str, degree: int = 0, var_types: str | None = None,
    categorical_kernel: str = "classic", tol: float | None = None,
) -> Any:
    """Dask input: a lazy Dask array from :func:`nadaraya._dask_pool.pool`; a backend other
    than "auto" or "dask" names the engine each task runs."""
    from ._dask_pool import pool as lazy_pool

    engine = None if backend in ("auto", "dask") else backend
    if engine is not None:
        backends.get(engine)  # an unknown or missing engine is refused now, not when computed
    extra = {} if degree == 0 and var_types is None else dict(
        degree=degree, var_types=var_types, categorical_kernel=categorical_kernel)
    return lazy_pool(queries, keys, values, kernel=kernel, bandwidth=bandwidth, empty=empty,
                     sample_weight=sample_weight, engine=engine, tol=tol, **extra)


def _neighbours(*args: Any) -> NDArray[np.floating]:
    """:func:`nadaraya.local.neighbours.pool_neighbours` (numba, loaded on first use)."""
    from .local.neighbours import pool_neighbours

    return pool_neighbours(*args)


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
    degree: int = 0,
    var_types: str | None = None,
    categorical_kernel: str = "classic",
    device: str | None = None,
    tol: float | None = None,
    bandwidth_type: str = "fixed",
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
    degree : int, default 0
        The local polynomial fitted at each query by weighted least squares in ``k - q``: 0 is
        Nadaraya-Watson (the weighted mean), 1 local linear, 2 local quadratic (up to 3); the
        prediction is the fit's intercept. Local terms use the continuous columns only. A
        singular local system falls back to the highest regular lower degree, with one
        :class:`SingularFitWarning` per call (the rule: the guide's local-fits page).
    var_types : str, optional
        One letter per column: ``"c"`` continuous, ``"o"`` ordered, ``"u"`` unordered
        categorical (default all continuous). A categorical column's ``bandwidth`` entry is its
        ``lambda`` (the kernels and their ranges: the guide's local-fits page).
    categorical_kernel : {"classic", "li-racine"}, default "classic"
        Wang-van Ryzin (ordered) and Aitchison-Aitken (unordered), or Li-Racine's for both.
    device : str, optional
        A torch device (``"cpu"``, ``"cuda"``): the sums run on ``backend="torch"`` there.
    tol : float, optional
        An error allowed, for speed. ``None`` (default): exact sums. A number in ``(0, 0.1]``:
        ``backend="auto"`` may use a faster method whose every prediction is within
        ``tol * max|v|`` of the exact one (per value column), on every query, where it beats
        the exact sums (:func:`nadaraya.backends.explain`). Two methods serve it, both for
        ``tol >= 1e-12``: the Taylor series of the Gaussian kernel
        (:mod:`nadaraya.backends.taylor`) in 1 to 3 continuous features at ``degree`` 0 to 2,
        also in leave-one-out sums, per key chunk of Dask inputs and per category of mixed
        data; and the certified binned sums of the logistic kernel
        (:mod:`nadaraya.backends.binned`) in 1 or 2 features at ``degree=0``, in plain pooling
        only (not in leave-one-out sums nor in Dask chunks, whose partial sums are merged).
        With ``degree`` 1 or 2 the bound is on the local fit's moment sums: each
        ``sum_i w_i (x_i - q)^j g_i`` within ``tol h^j max|g| sum_i w_i (|x_i - q| / h + 1)^j``;
        the prediction moves by that times the conditioning of its local system. Everything
        else (the other kernels, more features, ``degree=3``) stays exact, which meets any
        ``tol``.
    bandwidth_type : {"fixed", "generalized_nn", "adaptive_nn"}, default "fixed"
        R np's nearest-neighbour bandwidths: ``bandwidth`` is then ``k`` or a fraction of the
        keys (:mod:`nadaraya.local.neighbours`; exact; NumPy, continuous columns only).

    Returns
    -------
    ndarray of shape (m,) or (m, p)
        float32 when all of queries, keys and values are float32, else float64. A lazy
        ``dask.array.Array`` (one chunk per query chunk) when any input is a Dask array: see
        :mod:`nadaraya._dask_pool` and docs/distributed.md.

    Examples
    --------
    >>> import nadaraya
    >>> nadaraya.pool([2.5], [1.0, 2.0, 3.0], [3.0, 5.0, 4.0]).round(2)
    array([4.27])
    >>> nadaraya.pool([0.0], [0.0, 1.0, 2.0], [1.0, 3.0, 5.0], bandwidth=0.5, degree=1).round(12)
    array([1.])
    """
    empty, tol = as_empty(empty), as_tol(tol)
    if bandwidth_type != "fixed":  # k nearest neighbours: the exact rows of local.neighbours
        return _neighbours(queries, keys, values, kernel, bandwidth, bandwidth_type, degree,
                           sample_weight, empty)
    if is_dask(queries, keys, values, sample_weight):
        return _lazy_pool(queries, keys, values, kernel, bandwidth, empty, sample_weight, backend,
                          degree, var_types, categorical_kernel, tol)
    if not (type(degree) is int and degree == 0) or var_types is not None:  # validated there
        from . import _fit

        job = _fit.prepare(queries, keys, values, kernel=kernel, bandwidth=bandwidth,
                           sample_weight=sample_weight, degree=degree, var_types=var_types,
                           categorical_kernel=categorical_kernel)
        job.device, job.tol = device, tol
        return _fit.pool(job, empty, backend=backend)
    call = prepare(queries, keys, values, kernel=kernel, bandwidth=bandwidth, sample_weight=sample_weight)
    parts, _ = compute_partials(call, backend=backend, device=device, tol=tol)
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
    degree: int = 0,
    var_types: str | None = None,
    categorical_kernel: str = "classic",
    device: str | None = None,
    tol: float | None = None,
    bandwidth_type: str = "fixed",
) -> NDArray[np.floating]:
    """Leave-one-out predictions: each key pooled over all the *other* keys.

    Each point's own term is left out inside the sums (masked), never subtracted afterwards,
    so the result is exact even when the own term dominates (with ``tol``, the Taylor method
    subtracts the own key's share of its series where that keeps the bound, and computes the
    point exactly where it would not). Other keys at the same location are kept. These are the
    predictions that cross-validation scores and that the textbook's learnable model is
    trained on.

    Parameters
    ----------
    keys : array-like of shape (n, d) or (n,)
    values : array-like of shape (n,) or (n, p)
    kernel, bandwidth, empty, sample_weight, backend, degree, var_types, categorical_kernel, device, tol, \
bandwidth_type
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
    empty, tol = as_empty(empty), as_tol(tol)
    if bandwidth_type != "fixed":  # k nearest neighbours: the exact rows of local.neighbours
        return _neighbours(None, keys, values, kernel, bandwidth, bandwidth_type, degree,
                           sample_weight, empty)
    if is_dask(keys, values, sample_weight):
        return _lazy_pool(None, keys, values, kernel, bandwidth, empty, sample_weight, backend,
                          degree, var_types, categorical_kernel, tol)
    if not (type(degree) is int and degree == 0) or var_types is not None:  # validated there
        from . import _fit

        job = _fit.prepare(None, keys, values, kernel=kernel, bandwidth=bandwidth,
                           sample_weight=sample_weight, degree=degree, var_types=var_types,
                           categorical_kernel=categorical_kernel)
        job.device, job.tol = device, tol
        return _fit.pool(job, empty, np.arange(job.call.keys.shape[0]), backend)
    call = prepare(None, keys, values, kernel=kernel, bandwidth=bandwidth, sample_weight=sample_weight)
    exclude = np.arange(call.keys.shape[0])
    parts, _ = compute_partials(call, exclude=exclude, backend=backend, device=device, tol=tol)
    return finish(parts, call, empty, exclude)
