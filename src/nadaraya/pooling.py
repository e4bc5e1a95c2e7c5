"""The primitive: attention pooling by similarity (pool, loo_pool; attention_weights in ``_attention``).

Everything in nadaraya calls :func:`pool` or the partial sums behind it; nothing else
re-implements the kernel sums.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from nadaraya import backends
from nadaraya._core.call import compute_partials, prepare
from nadaraya._core.finish import EmptyWindowWarning, finish
from nadaraya._support.validation import as_empty, as_tol, is_dask
from nadaraya.kernels import Kernel

__all__ = ["EmptyWindowWarning", "loo_pool", "pool"]


def _lazy_pool(
    queries: object, keys: object, values: object, kernel: str | Kernel, bandwidth: ArrayLike,
    empty: str, sample_weight: object, backend: str, degree: int = 0, var_types: str | None = None,
    categorical_kernel: str = "classic", tol: float | None = None,
) -> Any:
    """Dask input: a lazy Dask array from :func:`nadaraya.distributed.pool.pool`; a backend other
    than "auto" or "dask" names the engine each task runs."""
    from nadaraya.distributed.pool import pool as lazy_pool

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
        R np's nearest-neighbour bandwidths, ``bandwidth`` then k (:mod:`nadaraya.local.neighbours`).

    Returns
    -------
    ndarray of shape (m,) or (m, p)
        float32 when all of queries, keys and values are float32, else float64. A lazy
        ``dask.array.Array`` (one chunk per query chunk) when any input is a Dask array: see
        :mod:`nadaraya.distributed.pool` and docs/distributed.md.

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
        from nadaraya.local import fit as _fit
        from nadaraya.local import job as _job

        job = _job.prepare(queries, keys, values, kernel=kernel, bandwidth=bandwidth,
                           sample_weight=sample_weight, degree=degree, var_types=var_types,
                           categorical_kernel=categorical_kernel, device=device, backend=backend)
        job.device, job.tol = device, tol
        return job.narrowed(_fit.pool(job, empty, backend=backend))
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
        from nadaraya.local import fit as _fit
        from nadaraya.local import job as _job

        job = _job.prepare(None, keys, values, kernel=kernel, bandwidth=bandwidth,
                           sample_weight=sample_weight, degree=degree, var_types=var_types,
                           categorical_kernel=categorical_kernel, device=device, backend=backend)
        job.device, job.tol = device, tol
        return job.narrowed(_fit.pool(job, empty, np.arange(job.call.keys.shape[0]), backend))
    call = prepare(None, keys, values, kernel=kernel, bandwidth=bandwidth, sample_weight=sample_weight)
    exclude = np.arange(call.keys.shape[0])
    parts, _ = compute_partials(call, exclude=exclude, backend=backend, device=device, tol=tol)
    return finish(parts, call, empty, exclude)


def __getattr__(name: str) -> Any:
    """Names that release 0.1.0 kept here (``Call`` in its pickles) and that now live in ``_core``."""
    from nadaraya._compat import moved_name

    return moved_name(__name__, name)
