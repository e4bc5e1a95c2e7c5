"""A validated local or mixed-data fit: the degree, the continuous call, the categorical columns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from nadaraya._core import call as _call
from nadaraya._support.validation import as_points, as_real, as_sample_weight, as_values, pick_dtype
from nadaraya.kernels import Kernel
from nadaraya.kernels import get as get_kernel
from nadaraya.local.mixed import Categorical, as_categorical_kernel, as_var_types

#: the highest polynomial degree offered (a degree-r system in d features has C(d + r, r) unknowns)
MAX_DEGREE = 3


class SingularFitWarning(UserWarning):
    """Some queries' local polynomial systems were singular: they got a lower degree."""


def as_degree(degree: Any) -> int:
    """A polynomial degree, 0 to :data:`MAX_DEGREE`.

    Examples
    --------
    >>> as_degree(1)
    1
    >>> as_degree(1.5)
    Traceback (most recent call last):
    ...
    ValueError: degree must be an integer from 0 to 3 (0: Nadaraya-Watson, 1: local linear, ...); got 1.5
    """
    if isinstance(degree, bool) or not isinstance(degree, int | np.integer) or not 0 <= degree <= MAX_DEGREE:
        raise ValueError(
            f"degree must be an integer from 0 to {MAX_DEGREE} (0: Nadaraya-Watson, 1: local linear, "
            f"2: local quadratic); got {degree!r}"
        )
    return int(degree)


@dataclass
class Job:
    """A validated local or mixed call: the continuous part as a pooling call, the categorical part."""

    call: _call.Call  # continuous columns only (keys of shape (n, 0) when there are none)
    cat: Categorical | None
    degree: int
    cont: NDArray[np.intp]  # the continuous columns' positions
    d: int  # all columns
    device: str | None = None  # the torch device of backend="torch"
    tol: float | None = None  # the error allowed in the sums (tol= of nadaraya.pool)
    #: the continuous columns (queries, keys and bandwidth) were multiplied by ``2**-x_exp``
    #: (exact), one exponent per column, so that the moment sums stay in range (see :func:`scaled`)
    x_exp: NDArray[np.int64] | None = None
    #: the caller's dtype where the call was widened to float64 (see :func:`prepare`); None: the call's
    dtype: np.dtype | None = None

    def narrowed(self, out: NDArray[np.floating]) -> NDArray[np.floating]:
        """Predictions in the caller's dtype: rounded once where the job was widened.

        Examples
        --------
        >>> import numpy as np
        >>> x = np.linspace(0.0, 1.0, 5, dtype=np.float32)
        >>> job = prepare(x, x, x, kernel="gaussian", bandwidth=0.5, sample_weight=None, degree=1,
        ...               var_types=None, categorical_kernel="classic")
        >>> job.call.keys.dtype, job.narrowed(np.zeros(2)).dtype
        (dtype('float64'), dtype('float32'))
        """
        return out if self.dtype is None else out.astype(self.dtype)

    def per_x(self) -> NDArray[np.float64]:
        """The factor per continuous column that turns a slope in the job's coordinates into
        one per unit of the caller's ``x``."""
        if self.x_exp is None:
            return np.ones(self.cont.size)
        return np.ldexp(1.0, -self.x_exp)


#: a continuous column whose bandwidth is beyond ``2**+-X_EXP_LIMIT`` is rescaled by a power of two
X_EXP_LIMIT = 64


def scaled(
    queries: NDArray[np.floating], keys: NDArray[np.floating], bandwidth: NDArray[np.float64]
) -> tuple[NDArray[np.floating], NDArray[np.floating], NDArray[np.float64], NDArray[np.int64] | None]:
    """Continuous columns in units of about their bandwidth, where it is extreme.

    A local fit's moment sums ``sum w u^j``, ``j`` up to twice the degree, are taken in the
    units of ``u = k - q``: at ``h`` ~ 1e-160 their squares underflow, at 1e155 they overflow
    (1e+-77 at degree 2, 1e+-50 at degree 3). Each column whose bandwidth is beyond
    ``2**+-X_EXP_LIMIT`` is multiplied, with its bandwidth, by ``2**-e`` (``e`` the binary
    exponent of ``h``): exact, so the weights are the same bit for bit, and the moments are
    then of ``u / 2**e``, which is ``u / h`` within a factor of two. Slopes come back through
    :meth:`Job.per_x`.

    Examples
    --------
    >>> import numpy as np
    >>> q, k, h, e = scaled(np.array([[0.0]]), np.array([[3e-160]]), np.array([1e-160]))
    >>> round(float(h[0]), 4), float(k[0, 0]) / float(h[0]), int(e[0])
    (0.703, 3.0, -531)
    """
    e = np.frexp(bandwidth)[1].astype(np.int64)
    if not (np.abs(e) > X_EXP_LIMIT).any():
        return queries, keys, bandwidth, None
    e = np.where(np.abs(e) > X_EXP_LIMIT, e, 0)
    factor = np.ldexp(1.0, -e)
    same = queries is keys
    keys = np.ascontiguousarray(keys * factor.astype(keys.dtype))
    queries = keys if same else np.ascontiguousarray(queries * factor.astype(queries.dtype))
    return queries, keys, bandwidth * factor, e


def prepare(
    queries: ArrayLike | None,
    keys: ArrayLike,
    values: ArrayLike,
    *,
    kernel: str | Kernel,
    bandwidth: ArrayLike,
    sample_weight: ArrayLike | None,
    degree: Any,
    var_types: str | None,
    categorical_kernel: str,
    levels: NDArray[np.int64] | None = None,
    trusted: _call.Trusted | None = None,
    device: str | None = None,
    backend: str = "auto",
) -> Job:
    """Validate a local or mixed call (``queries=None`` means the keys themselves); with
    ``trusted``, the training data validated once (see :func:`nadaraya._core.call.prepare`).

    float32 calls of degree 1 or more are widened to float64 (exact) and their predictions
    rounded once (:meth:`Job.narrowed`): every CPU backend sums in float64, and its sums rounded to
    float32 would leave a nearly singular local system (a far query, weight on a cluster of
    keys) to rounding noise, its degree and its fit. On an accelerator (``device`` other than
    the CPU, and ``backend`` "auto" or "torch", the one that runs there) the call keeps its dtype:
    the sums there are the dtype's, and :func:`nadaraya.local.solve.rcond_for` scales the rule to
    them. A CPU backend named with a device (``backend="fused", device="cuda"``) runs on the CPU:
    widened."""
    deg = as_degree(degree)
    ck = as_categorical_kernel(categorical_kernel)
    k = get_kernel(kernel)
    if trusted is not None:
        kk, vv, one_d, sw, value_exp = (trusted.keys, trusted.values, trusted.one_d, trusted.sample_weight,
                                        trusted.value_exp)
        caller = kk.dtype
        if _widened(caller, deg, device, backend):
            kk, vv = kk.astype(np.float64), vv.astype(np.float64)
            sw = None if sw is None else sw.astype(np.float64)
        qq = kk if queries is None else np.ascontiguousarray(queries, dtype=kk.dtype)
        n, d = kk.shape
    else:
        dtype = caller = pick_dtype(keys, values, keys if queries is None else queries)
        if _widened(caller, deg, device, backend):
            dtype = np.dtype(np.float64)
        kk = as_points("keys", keys, dtype)
        n, d = kk.shape
        qq = kk if queries is None else as_points("queries", queries, dtype, d=d)
        vv, one_d = as_values(values, n, dtype)
        sw = as_sample_weight(sample_weight, n, dtype, relative=True)
        vv, value_exp = _call._in_range(vv)
    vt = as_var_types(var_types, d)
    cont = np.array([j for j, c in enumerate(vt) if c == "c"], dtype=np.intp)
    catc = np.array([j for j, c in enumerate(vt) if c != "c"], dtype=np.intp)
    h = _bandwidth(bandwidth, vt)
    kc = np.ascontiguousarray(kk[:, cont])
    qc, kc, hc, x_exp = scaled(kc if queries is None else np.ascontiguousarray(qq[:, cont]), kc, h[cont])
    call = _call.Call(qc, kc, vv, one_d, k, hc, sw, value_exp)
    cat = None
    if catc.size:
        kinds = "".join(vt[j] for j in catc)
        cat = Categorical.build(kinds, kk[:, catc], qq[:, catc], h[catc], ck, levels, catc)
    return Job(call, cat, deg if cont.size else 0, cont, d, x_exp=x_exp,
               dtype=caller if caller != kk.dtype else None)


def _widened(dtype: np.dtype, degree: int, device: str | None, backend: str = "auto") -> bool:
    """Whether a call of ``dtype`` and ``degree`` is widened to float64: unless its sums are made on
    an accelerator (``device`` other than the CPU, by the torch backend: see :func:`prepare`)."""
    accelerator = device is not None and str(device).split(":")[0] != "cpu" and backend in ("auto", "torch")
    return degree >= 1 and np.dtype(dtype).itemsize < 8 and not accelerator


def _bandwidth(bandwidth: ArrayLike, vt: str) -> NDArray[np.float64]:
    """One bandwidth (continuous) or lambda (categorical) per column; a scalar if all are continuous."""
    d = len(vt)
    if isinstance(bandwidth, str):
        raise ValueError(f"bandwidth={bandwidth!r} is a string; pool() needs numbers (one per column)")
    h = as_real("bandwidth", bandwidth).astype(np.float64)
    if h.ndim == 0 and set(vt) == {"c"}:
        h = np.full(d, float(h))
    if h.shape != (d,):
        raise ValueError(
            f"bandwidth must have one entry per column ({d}: var_types={vt!r}; a scalar only when every "
            f"column is continuous); got shape {h.shape}"
        )
    hc = h[[j for j, c in enumerate(vt) if c == "c"]]
    if not (np.isfinite(hc).all() and (hc > 0).all()):
        raise ValueError(
            f"the bandwidths of the continuous columns must be positive and finite; got {hc.tolist()}"
        )
    return h
