"""The exact reference backend: NumPy, blocked over queries and keys within the working memory.

Every other backend is tested against this one. It is written for clarity and bounded
memory, not speed: each (query block, key block) pair builds its block of weights feature by
feature (product kernels), in the log domain with a running maximum where the kernel has a
log-profile, and merges it into one :class:`~nadaraya.partials.Partials` per query block.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from nadaraya._support.config import get_config
from nadaraya.kernels import Kernel
from nadaraya.partials import Partials, concat, merge
from nadaraya.partials import empty as empty_partials

__all__ = ["SCRATCH_ARRAYS", "block_sizes", "block_weights", "moment_shapes", "partials", "supports"]

#: how many block-sized scratch arrays one block may hold at once (the kernel profiles make
#: temporaries; in :mod:`nadaraya.nn`, the forward's and the recomputation's); the working
#: memory is divided by this to size the blocks.
SCRATCH_ARRAYS = 8


def block_sizes(
    m: int,
    n: int,
    itemsize: int,
    working_memory_mib: float | None = None,
    *,
    per_pair: int = 1,
    max_keys: int = 4096,
) -> tuple[int, int]:
    """Query and key block sizes whose scratch fits in the working memory.

    Parameters
    ----------
    m, n : int
        Queries and keys.
    itemsize : int
        Bytes per entry (a power of two).
    working_memory_mib : float, optional
        Default ``nadaraya.get_config()["working_memory"]``.
    per_pair : int, default 1
        Entries each (query, key) pair holds in one scratch array (a batch times a width for
        the layers of :mod:`nadaraya.nn`).
    max_keys : int, default 4096
        The largest key block.

    Returns
    -------
    (bq, bk) : tuple of int
        At least 1 each; ``SCRATCH_ARRAYS * bq * bk * per_pair * itemsize`` fits the working
        memory unless a block of one query and one key does not.

    Examples
    --------
    >>> block_sizes(20000, 20000, 8, working_memory_mib=16)
    (64, 4096)
    >>> block_sizes(4096, 4096, 8, working_memory_mib=1, per_pair=128, max_keys=1024)
    (1, 128)
    """
    if working_memory_mib is None:
        working_memory_mib = get_config()["working_memory"]
    budget = working_memory_mib * 2**20 / (SCRATCH_ARRAYS * itemsize)  # exact: a power of two
    pairs = max(1, int(budget // max(1, per_pair)))
    bk = max(1, min(n, max_keys, pairs))
    bq = max(1, min(m, pairs // bk))
    return bq, bk


def supports(kernel: Kernel, d: int) -> bool:
    """Every kernel in any number of features.

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> supports(get("tricube"), 5)
    True
    """
    return True


def block_weights(
    q: NDArray[np.floating],
    k: NDArray[np.floating],
    kernel: Kernel,
    inv_h: NDArray[np.floating],
    log_sw: NDArray[np.floating] | None = None,
    sw: NDArray[np.floating] | None = None,
) -> NDArray[np.floating]:
    """Unnormalised weights of a block: ``log w`` for log-domain kernels, ``w`` otherwise.

    ``q`` (bq, d), ``k`` (bk, d); product over features of ``K((q - k) / h)``, times the
    sample weights (added as ``log sw`` in the log domain).

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.kernels import get
    >>> block_weights(np.array([[0.0]]), np.array([[1.0]]), get("gaussian"), np.ones(1)).tolist()
    [[-0.5]]
    """
    with np.errstate(over="ignore"):  # a far query's log weights may overflow to -inf
        return _block_weights(q, k, kernel, inv_h, log_sw, sw)


def _block_weights(
    q: NDArray[np.floating],
    k: NDArray[np.floating],
    kernel: Kernel,
    inv_h: NDArray[np.floating],
    log_sw: NDArray[np.floating] | None,
    sw: NDArray[np.floating] | None,
) -> NDArray[np.floating]:
    bq, d = q.shape
    bk = k.shape[0]
    u = np.empty((bq, bk), dtype=q.dtype)
    acc: NDArray[np.floating] | None = None
    for j in range(d):
        np.subtract(q[:, j, None], k[None, :, j], out=u)
        u *= inv_h[j]
        if kernel.log_profile is not None:
            term = kernel.log_profile(u)
            if acc is None:
                acc = term
            else:
                acc += term
        else:
            with np.errstate(invalid="ignore"):  # u overflowed to inf: outside any support, and
                term = kernel.profile(u)  # a profile's 0 * inf there is dropped by its support test
            if acc is None:
                acc = term
            else:
                acc *= term
    assert acc is not None
    acc = acc.astype(q.dtype, copy=False)
    if kernel.log_profile is not None:
        if log_sw is not None:
            acc += log_sw[None, :]
    elif sw is not None:
        acc *= sw[None, :]
    return acc


def partials(
    queries: NDArray[np.floating],
    keys: NDArray[np.floating],
    values: NDArray[np.floating],
    *,
    kernel: Kernel,
    bandwidth: NDArray[np.floating],
    sample_weight: NDArray[np.floating] | None = None,
    exclude: NDArray[np.integer] | None = None,
    moments: int = 0,
) -> Partials:
    """Exact partial sums of every query over every key.

    Parameters
    ----------
    queries : ndarray of shape (m, d)
    keys : ndarray of shape (n, d)
    values : ndarray of shape (n, p)
    kernel : Kernel
    bandwidth : ndarray of shape (d,)
    sample_weight : ndarray of shape (n,), optional
    exclude : ndarray of shape (m,), optional
        For each query, the index of one key whose term is left out of the sums (``-1``
        for none): leave-one-out predictions use ``exclude = arange(n)``.
    moments : int, default 0
        The degree ``r`` of a local polynomial fit whose weighted sums to carry as well (see
        :func:`moment_shapes`): with ``u = k - q`` in the data's units, ``sum w u^(x)j`` for
        ``j = 1 .. 2r`` and then ``sum w u^(x)j (x) v`` for ``j = 1 .. r`` (``(x)`` the outer
        product). Each pair of a block then holds ``d^(2r)`` entries, so the blocks shrink.

    Returns
    -------
    Partials
        In the dtype of ``queries``. With ``moments`` and inputs narrower than float64, the
        sums are taken in float64 and rounded once: a local system's solve amplifies the
        rounding of its sums by its condition, so float32 accumulation would lose more than a
        plain float32 fit does.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.kernels import get
    >>> x = np.array([[1.0], [2.0], [3.0]]); v = np.array([[3.0], [5.0], [4.0]])
    >>> p = partials(np.array([[2.5]]), x, v, kernel=get("gaussian"), bandwidth=np.ones(1))
    >>> round(float(p.finalize()[0, 0]), 2)
    4.27
    >>> p = partials(np.array([[2.5]]), x, v, kernel=get("gaussian"), bandwidth=np.ones(1), moments=1)
    >>> [s.shape for s in p.moments]
    [(1, 1), (1, 1, 1), (1, 1, 1)]
    """
    moments = int(moments)  # checked against CAPABILITIES by nadaraya.backends.compute
    dtype = queries.dtype
    if moments and np.dtype(dtype).itemsize < 8:
        wide = partials(
            queries.astype(np.float64), keys.astype(np.float64), values.astype(np.float64),
            kernel=kernel, bandwidth=np.asarray(bandwidth, dtype=np.float64),
            sample_weight=None if sample_weight is None else sample_weight.astype(np.float64),
            exclude=exclude, moments=moments,
        )
        return _rounded(wide, dtype)
    m, n, p = queries.shape[0], keys.shape[0], values.shape[1]
    shapes = moment_shapes(moments, queries.shape[1], p)
    inv_h = (1.0 / bandwidth).astype(dtype)
    log_domain = kernel.log_profile is not None
    log_sw = None
    if sample_weight is not None and log_domain:
        with np.errstate(divide="ignore"):
            log_sw = np.log(sample_weight)
    bq, bk = block_sizes(m, n, np.dtype(dtype).itemsize, per_pair=queries.shape[1] ** (2 * moments))
    out = []
    for q0 in range(0, m, bq):
        q1 = min(m, q0 + bq)
        ex = None if exclude is None else exclude[q0:q1]
        acc = empty_partials(q1 - q0, p, dtype, log_domain, shapes)
        for k0 in range(0, n, bk):
            k1 = min(n, k0 + bk)
            w = block_weights(
                queries[q0:q1],
                keys[k0:k1],
                kernel,
                inv_h,
                None if log_sw is None else log_sw[k0:k1],
                None if sample_weight is None else sample_weight[k0:k1],
            )
            if ex is not None:
                rows = np.nonzero((ex >= k0) & (ex < k1))[0]
                w[rows, ex[rows] - k0] = -np.inf if log_domain else 0.0
            if log_domain:
                shift = w.max(axis=1)
                w -= np.where(np.isfinite(shift), shift, 0.0)[:, None]
                np.exp(w, out=w)
            else:
                shift = np.zeros(q1 - q0, dtype=dtype)
            extra = _moment_sums(w, queries[q0:q1], keys[k0:k1], values[k0:k1], moments) if moments else ()
            acc = merge(acc, Partials(shift, w.sum(axis=1), _value_sums(w, values[k0:k1]), extra))
        out.append(acc)
    return concat(out)


def _value_sums(w: NDArray[np.floating], v: NDArray[np.floating]) -> NDArray[np.floating]:
    """``w @ v``; below float64 as NumPy's pairwise sums along the keys, one value column at a
    time, so that the float32 result (the yardstick of the other backends' float32 error)
    does not depend on the order in which a BLAS kernel happens to add."""
    if np.dtype(w.dtype).itemsize >= 8:
        return w @ v
    out = np.empty((w.shape[0], v.shape[1]), dtype=w.dtype)
    for j in range(v.shape[1]):
        out[:, j] = (w * v[None, :, j]).sum(axis=1)
    return out


def _rounded(parts: Partials, dtype: np.dtype) -> Partials:
    """Float64 partials rounded once to ``dtype``: the shift first, then the sums rescaled by
    ``exp(shift - rounded shift)`` in float64, so that ``exp(shift) * sums`` keeps its value."""
    shift = parts.shift.astype(dtype)
    with np.errstate(invalid="ignore"):  # -inf - -inf where no key has weight
        gap = parts.shift - shift.astype(np.float64)
    factor = np.exp(np.where(np.isfinite(gap), gap, 0.0))

    def scaled(a: NDArray[np.floating]) -> NDArray[np.floating]:
        return (a * factor.reshape(factor.shape + (1,) * (a.ndim - factor.ndim))).astype(dtype)

    return Partials(shift, scaled(parts.weight), scaled(parts.value), tuple(scaled(s) for s in parts.moments))


def moment_shapes(degree: int, d: int, p: int) -> list[tuple[int, ...]]:
    """The trailing shapes of the moment sums that a local polynomial of ``degree`` needs.

    ``(d,) * j`` for ``sum w u^(x)j``, ``j = 1 .. 2 degree``, then ``(d,) * j + (p,)`` for
    ``sum w u^(x)j (x) v``, ``j = 1 .. degree``; none for degree 0 (plain pooling).

    Examples
    --------
    >>> moment_shapes(1, 2, 3)
    [(2,), (2, 2), (2, 3)]
    """
    return [(d,) * j for j in range(1, 2 * degree + 1)] + [(d,) * j + (p,) for j in range(1, degree + 1)]


def _moment_sums(
    w: NDArray[np.floating], q: NDArray[np.floating], k: NDArray[np.floating], v: NDArray[np.floating],
    degree: int,
) -> tuple[NDArray[np.floating], ...]:
    """The moment sums of one block (weights ``w`` (bq, bk)), in the order of :func:`moment_shapes`."""
    u = k[None, :, :] - q[:, None, :]  # (bq, bk, d)
    term, sums, with_values = w, [], []
    for j in range(1, 2 * degree + 1):
        term = term[..., None] * u.reshape(u.shape[:2] + (1,) * (j - 1) + u.shape[2:])
        sums.append(term.sum(axis=1))
        if j <= degree:
            with_values.append(np.einsum("qk...,kp->q...p", term, v))
    return (*sums, *with_values)
