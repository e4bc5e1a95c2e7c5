"""Local polynomial and mixed-data pooling: moment partials per category group, the solve, the fills.

:func:`nadaraya.pool` and :func:`nadaraya.loo_pool` come here for ``degree > 0`` or categorical
columns. The continuous columns go through the chosen backend with the moment sums of the
degree (one pass, one shift); keys are grouped by their categories, each group's partials are
shifted by the log of its categorical factor and merged exactly
(:mod:`nadaraya._mixed`). Then :func:`nadaraya._local.solve` fits each query.

Rules beyond :mod:`nadaraya._local`'s: a query with no key of positive weight follows the
``empty=`` policy of degree 0; a log-domain query so far from every key that pooling takes
its far limit (:data:`nadaraya._nearest.FAR_LOG_WEIGHT`) gets the Nadaraya-Watson far limit
(degree 0). Both, and every singular local system, are counted in one
:class:`SingularFitWarning` per call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import pooling
from ._local import LocalFit, solve
from ._mixed import Categorical, as_categorical_kernel, as_var_types
from ._nearest import FAR_LOG_WEIGHT
from ._validation import as_points, as_real, as_sample_weight, as_values, pick_dtype, warn_at_caller
from .backends.reference import moment_shapes
from .kernels import Kernel
from .kernels import get as get_kernel
from .partials import Partials, merge
from .partials import empty as empty_partials

__all__ = ["MAX_DEGREE", "SingularFitWarning", "as_degree"]

#: the highest polynomial degree offered (a degree-r system in d features has C(d + r, r) unknowns)
MAX_DEGREE = 3


class SingularFitWarning(UserWarning):
    """Some queries' local polynomial systems were singular: they got a lower degree."""


SingularFitWarning.__module__ = "nadaraya"  # public as nadaraya.SingularFitWarning (warning filters)


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

    call: pooling.Call  # continuous columns only (keys of shape (n, 0) when there are none)
    cat: Categorical | None
    degree: int
    cont: NDArray[np.intp]  # the continuous columns' positions
    d: int  # all columns
    device: str | None = None  # the torch device of backend="torch"
    tol: float | None = None  # the error allowed in the sums (tol= of nadaraya.pool)
    #: the continuous columns (queries, keys and bandwidth) were multiplied by ``2**-x_exp``
    #: (exact), one exponent per column, so that the moment sums stay in range (see :func:`scaled`)
    x_exp: NDArray[np.int64] | None = None

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
) -> Job:
    """Validate a local or mixed call (``queries=None`` means the keys themselves)."""
    deg = as_degree(degree)
    ck = as_categorical_kernel(categorical_kernel)
    k = get_kernel(kernel)
    dtype = pick_dtype(keys, values, keys if queries is None else queries)
    kk = as_points("keys", keys, dtype)
    n, d = kk.shape
    qq = kk if queries is None else as_points("queries", queries, dtype, d=d)
    vt = as_var_types(var_types, d)
    cont = np.array([j for j, c in enumerate(vt) if c == "c"], dtype=np.intp)
    catc = np.array([j for j, c in enumerate(vt) if c != "c"], dtype=np.intp)
    h = _bandwidth(bandwidth, vt)
    vv, one_d = as_values(values, n, dtype)
    sw = as_sample_weight(sample_weight, n, dtype, relative=True)
    vv, value_exp = pooling._in_range(vv)
    kc = np.ascontiguousarray(kk[:, cont])
    qc, kc, hc, x_exp = scaled(kc if queries is None else np.ascontiguousarray(qq[:, cont]), kc, h[cont])
    call = pooling.Call(qc, kc, vv, one_d, k, hc, sw, value_exp)
    cat = None
    if catc.size:
        kinds = "".join(vt[j] for j in catc)
        cat = Categorical.build(kinds, kk[:, catc], qq[:, catc], h[catc], ck, levels, catc)
    return Job(call, cat, deg if cont.size else 0, cont, d, x_exp=x_exp)


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


def _group_exclude(
    exclude: NDArray[np.integer] | None, idx: NDArray[np.intp], n: int
) -> NDArray[np.intp] | None:
    """``exclude`` in the numbering of one group's keys ``idx`` (-1 where the left-out key is elsewhere)."""
    if exclude is None:
        return None
    pos = np.full(n + 1, -1, dtype=np.intp)
    pos[idx] = np.arange(idx.size)
    return pos[np.where(exclude >= 0, exclude, n)]


def _plain_sums(job: Job, idx: NDArray[np.intp], ex: NDArray[np.intp] | None, m: int) -> Partials:
    """No continuous column: each query's sums over the group are sums of sample weights (the
    left-out key's term is left out of an exclusive prefix and suffix, never subtracted)."""
    call = job.call
    v = call.values[idx].astype(np.float64)
    w = np.ones(idx.size) if call.sample_weight is None else call.sample_weight[idx].astype(np.float64)
    wv = w[:, None] * v
    weight = np.full(m, w.sum())
    value = np.repeat(wv.sum(axis=0)[None, :], m, axis=0)
    if ex is not None:
        rows = np.nonzero(ex >= 0)[0]
        cw = np.concatenate([[0.0], np.cumsum(w)])
        rw = np.concatenate([np.cumsum(w[::-1])[::-1], [0.0]])
        cv = np.vstack([np.zeros((1, v.shape[1])), np.cumsum(wv, axis=0)])
        rv = np.vstack([np.cumsum(wv[::-1], axis=0)[::-1], np.zeros((1, v.shape[1]))])
        j = ex[rows]
        weight[rows] = cw[j] + rw[j + 1]
        value[rows] = cv[j] + rv[j + 1]
    dt = call.values.dtype
    return Partials(np.zeros(m, dtype=dt), weight.astype(dt), value.astype(dt))


def _group_partials(job: Job, idx: NDArray[np.intp], ex: NDArray[np.intp] | None, backend: str) -> Partials:
    """The continuous partials of one group of keys, exact also for far queries."""
    call = job.call
    m = call.queries.shape[0]
    if call.keys.shape[1] == 0:
        return _plain_sums(job, idx, ex, m)
    sw = None if call.sample_weight is None else call.sample_weight[idx]
    sub = pooling.Call(
        call.queries, call.keys[idx], call.values[idx], call.one_d, call.kernel, call.bandwidth, sw
    )
    parts, choice = pooling.compute_partials(sub, exclude=ex, backend=backend, moments=job.degree,
                                             device=job.device, tol=job.tol, merged=job.cat is not None)
    if job.cat is not None and call.kernel.log_domain and choice.name != "reference":
        # the categorical factors are merged in the log domain after this: queries far from
        # this group get their exact partials (the fast backends may flush them) from the reference
        far = np.nonzero(~(parts.shift >= FAR_LOG_WEIGHT))[0]
        if far.size:
            fix, _ = pooling.compute_partials(
                pooling.Call(call.queries[far], sub.keys, sub.values, False, call.kernel, call.bandwidth, sw),
                exclude=None if ex is None else ex[far],
                backend="reference",
                moments=job.degree,
            )
            for field in ("shift", "weight", "value"):
                getattr(parts, field)[far] = getattr(fix, field)
            for mine, theirs in zip(parts.moments, fix.moments):
                mine[far] = theirs
    return parts


def partials(
    job: Job, exclude: NDArray[np.integer] | None = None, backend: str = "auto", log_factor_power: float = 1.0
) -> Partials:
    """The merged partial sums (with moments) of a job, categorical factors included (raised to
    ``log_factor_power``: 2 for the squared weights of standard errors)."""
    n = job.call.keys.shape[0]
    if job.cat is None:
        return _group_partials(job, np.arange(n), exclude, backend)
    cats, group = job.cat.groups()
    log_f = job.cat.log_factor(job.cat.queries, cats)
    call = job.call
    # every group merges into partials that have seen no key, so that a group whose factor is 0
    # (shift -inf) adds nothing, as merge defines, even when it is the only group
    acc = empty_partials(call.queries.shape[0], call.values.shape[1], call.values.dtype, True,
                         moment_shapes(job.degree, call.keys.shape[1], call.values.shape[1]))
    for g in range(cats.shape[0]):
        idx = np.nonzero(group == g)[0]
        part = _group_partials(job, idx, _group_exclude(exclude, idx, n), backend)
        part.shift = (part.shift + log_factor_power * log_f[:, g]).astype(part.weight.dtype)
        acc = merge(acc, part)
    return acc


def _far_rows(parts: Partials, job: Job) -> NDArray[np.bool_]:
    """Queries whose degree-0 answer is pooling's far limit (plain continuous calls only)."""
    if job.cat is not None or not job.call.kernel.log_domain:
        return np.zeros(parts.shift.shape, dtype=bool)
    return ~(parts.shift >= FAR_LOG_WEIGHT)


def fitted(
    job: Job, parts: Partials, empty: str, exclude: NDArray[np.integer] | None = None
) -> tuple[NDArray[np.floating], LocalFit]:
    """Predictions (m, p) in the values' units (before the one-output squeeze) and the fits."""
    call = job.call
    base = Partials(parts.shift, parts.weight, parts.value)
    out = base.finalize()
    if job.cat is None:
        pooling._fill_empty(out, base, call, empty, exclude)
    else:
        _fill_mixed(out, base, job, empty, exclude)
    fit = finish_local(parts, job.degree, call.bandwidth, out, _far_rows(parts, job))
    if call.value_exp:
        out = np.ldexp(out, call.value_exp).astype(out.dtype, copy=False)
        fit.slope = np.ldexp(fit.slope, call.value_exp)
    return out, fit


def finish_local(
    parts: Partials, degree: int, bandwidth: NDArray[np.floating], out: NDArray[np.floating],
    far: NDArray[np.bool_], where: str = "",
) -> LocalFit:
    """Solve the local systems and write their fits over the degree-0 predictions ``out`` (with
    their ``empty=`` fills) where a system of degree >= 1 is regular and the query is not far;
    one :class:`SingularFitWarning` counts the others (``where`` says which chunk, if any)."""
    fit = solve(parts, degree, bandwidth)
    local = (fit.degree >= 1) & ~far
    out[local] = fit.estimate[local].astype(out.dtype)
    fit.slope[far] = np.nan
    if degree >= 1:
        low = ((fit.degree >= 0) & (fit.degree < degree)) | (far & (parts.weight > 0))
        if low.any():
            warn_at_caller(
                f"{int(low.sum())} of {low.size} queries{where} have a singular local system of degree "
                f"{degree} (too few distinct keys with weight, collinear keys, or a query far from every "
                "key): they got the highest lower degree whose system is regular, degree 0 at worst "
                "(see nadaraya._local)",
                SingularFitWarning,
            )
    return fit


def _fill_mixed(
    out: NDArray[np.floating], base: Partials, job: Job, empty: str, exclude: NDArray[np.integer] | None
) -> None:
    """The ``empty=`` policy with categorical columns: ``"mean"`` pools with the constant kernel
    on the continuous columns (the categorical factors kept; the plain sample-weighted mean
    where they are all 0), ``"nearest"`` takes the nearest key in the continuous columns'
    ``x / h`` (without continuous columns, under the categorical distance); see
    :mod:`nadaraya._fills`. Queries at a category never seen in training where ``lambda = 0``
    are reported as such."""
    from ._fills import fill_values, unseen

    rows = np.nonzero(base.empty)[0]
    if rows.size == 0:
        return
    call = job.call
    new = unseen(job, rows)
    if new.any():
        _report_unseen(job, int(new.sum()), out.shape[0], empty)
    if (~new).any():
        pooling.report_empty(int((~new).sum()), out.shape[0], empty, call.kernel, call.bandwidth)

    def fill(r: NDArray[np.intp]) -> tuple[NDArray[Any], NDArray[np.bool_]]:
        return fill_values(job, r, empty, exclude)

    alone = pooling.fill_empty(out, rows, empty, nearest=fill, mean=fill)
    if alone.size:
        pooling._report_alone(alone, out.shape[0], empty)


def _report_unseen(job: Job, count: int, m: int, empty: str) -> None:
    """Queries whose categories no training key has, in columns where ``lambda = 0``."""
    from .pooling import EmptyWindowWarning

    assert job.cat is not None
    cols = [int(c) for c, lam in zip(np.setdiff1d(np.arange(job.d), job.cont), job.cat.lambdas) if lam == 0]
    what = (f"{count} of {m} queries have a category (or combination of categories) that no training "
            f"key has, in column(s) {cols} where lambda = 0 (only equal categories weigh): no key has "
            "positive weight")
    if empty == "raise":
        raise ValueError(f"{what}; pass empty='nearest', 'mean' or 'nan', or a positive lambda")
    then = {"nan": "their predictions are NaN (empty='nan')",
            "nearest": "they get the nearest training keys' mean value (empty='nearest')",
            "mean": "they get the sample-weighted mean of y (empty='mean')"}[empty]
    warn_at_caller(f"{what}; {then}", EmptyWindowWarning)


def pool(job: Job, empty: str, exclude: NDArray[np.integer] | None = None, backend: str = "auto") -> NDArray:
    """Predictions of a validated job, shaped as :func:`nadaraya.pool` returns them."""
    out, _ = fitted(job, partials(job, exclude, backend), empty, exclude)
    return out[:, 0] if job.call.one_d else out


def gradient(job: Job, empty: str = "nan", backend: str = "auto") -> NDArray[np.float64]:
    """d prediction / d query, (m, d, p), NaN in the categorical columns.

    Degree >= 1: the local slopes (NaN where a query's fit fell back to degree 0). Degree 0:
    the derivative of the ratio ``f = sum w v / sum w``, ``(sum w' v - f sum w') / sum w``;
    with the Gaussian kernel ``w' = w u / h^2`` (``u = k - q``), read off the first moments of
    the same pass; with the others the derivative's rows from the kernel's ``derivative``
    (:func:`nadaraya._smoother.blocks` with ``slope=``) applied to the values.
    """
    call = job.call
    m, p = call.queries.shape[0], call.values.shape[1]
    out = np.full((m, job.d, p), np.nan)
    if job.cont.size == 0:
        return out
    per_x = job.per_x()
    if job.degree >= 1:
        _, fit = fitted(job, partials(job, None, backend), empty)
        out[:, job.cont, :] = fit.slope * per_x[None, :, None]
        return out
    if call.kernel.name != "gaussian":
        from ._smoother import blocks

        values = np.ldexp(call.values.astype(np.float64), call.value_exp)
        for a, col in enumerate(job.cont):
            for q0, q1, rows in blocks(job, slope=a):
                out[q0:q1, col, :] = rows @ values * per_x[a]
        return out
    one = Job(call, job.cat, 1, job.cont, job.d)
    parts = partials(one, None, backend)
    ok = (parts.weight > 0) & ~_far_rows(parts, job)
    s0 = parts.weight[ok].astype(np.float64)
    f = parts.value[ok].astype(np.float64) / s0[:, None]
    s1 = parts.moments[0][ok].astype(np.float64)
    t1 = parts.moments[2][ok].astype(np.float64)
    h2 = call.bandwidth.astype(np.float64) ** 2
    slope = (t1 - s1[:, :, None] * f[:, None, :]) / (h2[None, :, None] * s0[:, None, None])
    slope = slope * per_x[None, :, None]
    if call.value_exp:
        slope = np.ldexp(slope, call.value_exp)
    sub = out[ok]
    sub[:, job.cont, :] = slope
    out[ok] = sub
    return out
