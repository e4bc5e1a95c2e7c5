"""Local polynomial and mixed-data pooling: moment partials per category group, the solve, the fills.

:func:`nadaraya.pool` and :func:`nadaraya.loo_pool` come here for ``degree > 0`` or categorical
columns. The continuous columns go through the chosen backend with the moment sums of the
degree (one pass, one shift); keys are grouped by their categories, each group's partials are
shifted by the log of its categorical factor and merged exactly
(:mod:`nadaraya.local.mixed`). Then :func:`nadaraya.local.solve.solve` fits each query.

Rules beyond :mod:`nadaraya.local.solve`'s: a query with no key of positive weight follows the
``empty=`` policy of degree 0; a log-domain query so far from every key that pooling takes
its far limit (:data:`nadaraya._core.nearest.FAR_LOG_WEIGHT`) gets the Nadaraya-Watson far limit
(degree 0). Both, and every singular local system, are counted in one
:class:`SingularFitWarning` per call.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from nadaraya._core import call as _call
from nadaraya._core import finish as _finish
from nadaraya._core.nearest import FAR_LOG_WEIGHT
from nadaraya._support.validation import warn_at_caller
from nadaraya.backends.reference import moment_shapes
from nadaraya.local.job import MAX_DEGREE, Job, SingularFitWarning, as_degree
from nadaraya.local.solve import RCOND, LocalFit, solve
from nadaraya.partials import Partials, merge
from nadaraya.partials import empty as empty_partials

__all__ = ["MAX_DEGREE", "SingularFitWarning", "as_degree"]

SingularFitWarning.__module__ = "nadaraya"  # public as nadaraya.SingularFitWarning (warning filters)


def _group_exclude(
    exclude: NDArray[np.integer] | None, idx: NDArray[np.intp], n: int
) -> NDArray[np.intp] | None:
    """``exclude`` in the numbering of one group's keys ``idx`` (-1 where the left-out key is elsewhere)."""
    if exclude is None:
        return None
    pos = np.full(n + 1, -1, dtype=np.intp)
    pos[idx] = np.arange(idx.size)
    return pos[np.where(exclude >= 0, exclude, n)]


def _plain_sums(job: Job, idx: NDArray[np.intp] | None, ex: NDArray[np.intp] | None, m: int) -> Partials:
    """No continuous column: each query's sums over the group are sums of sample weights (the
    left-out key's term is left out of an exclusive prefix and suffix, never subtracted)."""
    call = job.call
    rows: Any = slice(None) if idx is None else idx
    v = call.values[rows].astype(np.float64)
    w = (np.ones(v.shape[0]) if call.sample_weight is None
         else call.sample_weight[rows].astype(np.float64))
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


def _group_partials(
    job: Job, idx: NDArray[np.intp] | None, ex: NDArray[np.intp] | None, backend: str
) -> Partials:
    """The continuous partials of one group of keys (``idx``; None: every key, no copies), exact
    also for far queries."""
    call = job.call
    m = call.queries.shape[0]
    if call.keys.shape[1] == 0:
        return _plain_sums(job, idx, ex, m)
    if idx is None:
        sub = call
    else:
        sw = None if call.sample_weight is None else call.sample_weight[idx]
        sub = _call.Call(
            call.queries, call.keys[idx], call.values[idx], call.one_d, call.kernel, call.bandwidth, sw
        )
    parts, choice = _call.compute_partials(sub, exclude=ex, backend=backend, moments=job.degree,
                                             device=job.device, tol=job.tol, merged=job.cat is not None)
    if job.cat is not None and call.kernel.log_domain and choice.name != "reference":
        # the categorical factors are merged in the log domain after this: queries far from
        # this group get their exact partials (the fast backends may flush them) from the reference
        far = np.nonzero(~(parts.shift >= FAR_LOG_WEIGHT))[0]
        if far.size:
            fix, _ = _call.compute_partials(
                _call.Call(call.queries[far], sub.keys, sub.values, False, call.kernel, call.bandwidth,
                           sub.sample_weight),
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
        return _group_partials(job, None, exclude, backend)
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
    job: Job, parts: Partials, empty: str, exclude: NDArray[np.integer] | None = None,
    fit: LocalFit | None = None,
) -> tuple[NDArray[np.floating], LocalFit]:
    """Predictions (m, p) in the values' units (before the one-output squeeze) and the fits
    (``fit``: solved already, then ``parts`` need no moments)."""
    call = job.call
    base = Partials(parts.shift, parts.weight, parts.value)
    out = base.finalize()
    if job.cat is None:
        _finish._fill_empty(out, base, call, empty, exclude)
    else:
        _fill_mixed(out, base, job, empty, exclude)
    fit = finish_local(parts, job.degree, call.bandwidth, out, _far_rows(parts, job), fit=fit)
    if call.value_exp:
        out = np.ldexp(out, call.value_exp).astype(out.dtype, copy=False)
        fit.slope = np.ldexp(fit.slope, call.value_exp)
    return out, fit


def finish_local(
    parts: Partials, degree: int, bandwidth: NDArray[np.floating], out: NDArray[np.floating],
    far: NDArray[np.bool_], where: str = "", fit: LocalFit | None = None,
) -> LocalFit:
    """Solve the local systems and write their fits over the degree-0 predictions ``out`` (with
    their ``empty=`` fills) where a system of degree >= 1 is regular and the query is not far;
    one :class:`SingularFitWarning` counts the others (``where`` says which chunk, if any)."""
    fit = solve(parts, degree, bandwidth) if fit is None else fit
    any_far = bool(far.any())
    local = fit.degree >= 1
    if any_far:
        local &= ~far
        if not fit.slope.flags.writeable:  # one shared row (the constant kernel's one global fit)
            fit.slope = np.array(fit.slope)
        fit.slope[far] = np.nan
    # one pass, no gathered copies (the cast rounds as astype does)
    np.copyto(out, fit.estimate, casting="same_kind", where=local[:, None])
    if degree >= 1:
        low = (fit.degree >= 0) & (fit.degree < degree)
        if any_far:
            low |= far & (parts.weight > 0)
        if low.any():
            warn_at_caller(
                f"{int(low.sum())} of {low.size} queries{where} have a singular local system of degree "
                f"{degree} (too few distinct keys with weight, collinear keys, or a query far from every "
                "key): they got the highest lower degree whose system is regular, degree 0 at worst "
                "(see nadaraya.local.solve)",
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
    :mod:`nadaraya.local.fills`. Queries at a category never seen in training where ``lambda = 0``
    are reported as such."""
    from nadaraya.local.fills import fill_values, unseen

    rows = np.nonzero(base.empty)[0]
    if rows.size == 0:
        return
    call = job.call
    new = unseen(job, rows)
    if new.any():
        _report_unseen(job, int(new.sum()), out.shape[0], empty)
    if (~new).any():
        _finish.report_empty(int((~new).sum()), out.shape[0], empty, call.kernel, call.bandwidth)

    def fill(r: NDArray[np.intp]) -> tuple[NDArray[Any], NDArray[np.bool_]]:
        return fill_values(job, r, empty, exclude)

    alone = _finish.fill_empty(out, rows, empty, nearest=fill, mean=fill)
    if alone.size:
        _finish._report_alone(alone, out.shape[0], empty)


def _report_unseen(job: Job, count: int, m: int, empty: str) -> None:
    """Queries whose categories no training key has, in columns where ``lambda = 0``."""
    from nadaraya._core.finish import EmptyWindowWarning

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
    quick = _constant_fit(job, exclude, backend)
    if quick is None:
        out, _ = fitted(job, partials(job, exclude, backend), empty, exclude)
    elif _uniform(quick[0], quick[1], job.degree):  # the estimates are the predictions
        out = quick[1].estimate
        if job.call.value_exp:
            out = np.ldexp(out, job.call.value_exp)
    else:
        out, _ = fitted(job, quick[0], empty, exclude, quick[1])
    return out[:, 0] if job.call.one_d else out


def _uniform(parts: Partials, fit: LocalFit, degree: int) -> bool:
    """Every query got ``degree`` and has weight, none far: as :func:`fitted` shows (one value
    each, read off the broadcast views of :func:`nadaraya.backends.constant.local_fit`)."""
    one = fit.degree.strides == (0,) and parts.shift.strides == (0,)
    return bool(one and fit.degree.size and int(fit.degree[0]) == degree and parts.weight.min() > 0
                and parts.shift[0] >= FAR_LOG_WEIGHT)


def _constant_fit(
    job: Job, exclude: NDArray[np.integer] | None, backend: str
) -> tuple[Partials, LocalFit] | None:
    """Degree 1 or 2 in one feature on the constant backend: every query's
    fit is the keys' one weighted polynomial (:func:`nadaraya.backends.constant.local_fit`), at
    the degree the rule of :func:`solve` gives each query. None: the call is not one of these.
    The fits' slopes are not computed (pool reads the estimates)."""
    call = job.call
    if (job.cat is not None or job.degree not in (1, 2) or call.keys.shape[1] != 1
            or call.kernel.name != "constant"):
        return None
    choice = _call.choose_backend(call, exclude=exclude, backend=backend, moments=job.degree,
                                  device=job.device, tol=job.tol)
    if choice.name != "constant":
        return None
    from nadaraya.backends import constant

    got = constant.local_fit(call.queries, call.keys, call.values, kernel=call.kernel, degree=job.degree,
                             rcond=RCOND, solve=lambda parts: solve(parts, job.degree, call.bandwidth),
                             sample_weight=call.sample_weight, exclude=exclude, slopes=False)
    if got is None:
        return None
    base, (estimate, slope, used, inv00) = got
    fit = LocalFit(estimate, slope[:, None, :], used, inv00)
    return base, fit


def gradient(job: Job, empty: str = "nan", backend: str = "auto") -> NDArray[np.float64]:
    """d prediction / d query, (m, d, p), NaN in the categorical columns.

    Degree >= 1: the local slopes (NaN where a query's fit fell back to degree 0). Degree 0:
    the derivative of the ratio ``f = sum w v / sum w``, ``(sum w' v - f sum w') / sum w``;
    with the Gaussian kernel ``w' = w u / h^2`` (``u = k - q``), read off the first moments of
    the same pass; with the others the derivative's rows from the kernel's ``derivative``
    (:func:`nadaraya.local.smoother.blocks` with ``slope=``) applied to the values.
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
        from nadaraya.local.smoother import blocks

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
