"""The smoother matrix of a local fit, by blocks of queries: the effective weights a_i(x) themselves.

A local polynomial fit with a fixed bandwidth is linear in the values, ``f(x) = sum_i a_i(x)
y_i`` (and so are its slopes). When many value vectors share one design -- the thousand
responses of a bootstrap -- it pays to compute the rows ``a(x)`` once per block of queries and
apply them to all the vectors by one matrix product (BLAS), instead of streaming every vector
through the kernel sums. Rows are computed as the reference backend computes weights (product
kernels in the log domain with each row's exact maximum; categorical factors per pair), then
``a_i = w_i b(z_i)^T M^-1 e_0`` (or ``e_a / h_a`` for a slope), each query at the degree the
solve's rule gives its system (:func:`nadaraya.local.solve.used_degree`, at the threshold of the
dtype the call's sums are held in): the highest regular lower degree where the asked one is
singular, as for the predictions and their variances.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray

from nadaraya._core.nearest import FAR_LOG_WEIGHT
from nadaraya._support.config import get_config
from nadaraya.backends.reference import block_weights
from nadaraya.local import job as _job
from nadaraya.local.solve import monomials, used_degree
from nadaraya.partials import Partials

__all__ = ["blocks"]


def _weights(
    job: _job.Job, q0: int, q1: int, far: list[NDArray[np.bool_]] | None = None
) -> NDArray[np.float64]:
    """Unnormalised weights (b, n), each row divided by its largest: the reference backend's
    block weights (:func:`nadaraya.backends.reference.block_weights`) times the categorical
    factors. ``far`` receives which rows' largest log weight is below ``FAR_LOG_WEIGHT``."""
    call, k = job.call, job.call.kernel
    q = call.queries[q0:q1].astype(np.float64)
    keys = call.keys.astype(np.float64)
    inv_h = 1.0 / call.bandwidth.astype(np.float64)
    sw = None if call.sample_weight is None else call.sample_weight.astype(np.float64)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        log_sw = None if sw is None or not k.log_domain else np.log(sw)
        w = block_weights(q, keys, k, inv_h, log_sw, sw)  # log w in the log domain
        log_f = None if job.cat is None else job.cat.log_factor(job.cat.queries[q0:q1], job.cat.keys)
        if k.log_domain:
            if log_f is not None:
                w += log_f
            top = w.max(axis=1, keepdims=True)
            if far is not None:
                far.append(~(top[:, 0] >= FAR_LOG_WEIGHT))
            w -= np.where(np.isfinite(top), top, 0.0)
            np.exp(w, out=w)
        elif log_f is not None:
            w *= np.exp(log_f)
    return w


def _rows(
    job: _job.Job, q0: int, q1: int, slope: int | None, empty: str | None = None
) -> NDArray[np.float64]:
    """Rows ``q0:q1`` of the smoother (``slope=None``) or of the slope along continuous column
    ``slope``; with ``empty``, the smoother's rows of the queries that a prediction answers by
    the far limit or an ``empty=`` fill are those fallbacks' (:mod:`nadaraya.local.fills`)."""
    if empty is None or slope is not None:
        return _local_rows(job, q0, q1, slope)
    from nadaraya.local.fills import fallback_weights

    far: list[NDArray[np.bool_]] = []
    out = _local_rows(job, q0, q1, None, far)
    if job.cat is None and job.call.kernel.log_domain:
        back = np.nonzero(far[0])[0] if far else np.zeros(0, dtype=np.intp)
    else:
        back = np.nonzero(~np.isfinite(out).all(axis=1) | ~(np.abs(out).sum(axis=1) > 0))[0]
    if back.size:
        out[back] = fallback_weights(job, q0 + back, empty)
    return out


def _local_rows(
    job: _job.Job, q0: int, q1: int, slope: int | None, far: list[NDArray[np.bool_]] | None = None
) -> NDArray[np.float64]:
    """:func:`_rows` of the queries' own local fits (NaN where a window is empty)."""
    w = _weights(job, q0, q1, far)
    total = w.sum(axis=1)
    live = total > 0
    if job.degree == 0 and slope is None and live.all():
        return np.divide(w, total[:, None], out=w)
    h = job.call.bandwidth.astype(np.float64)
    b, n = w.shape
    out = np.full((b, n), np.nan)
    u = job.call.keys[None, :, :].astype(np.float64) - job.call.queries[q0:q1, None, :].astype(np.float64)
    degree = job.degree
    if degree == 0:
        if slope is None:
            out[live] = w[live] / total[live, None]
            return out
        k = job.call.kernel
        z = -u[:, :, slope] / h[slope]
        with np.errstate(invalid="ignore", divide="ignore"):
            if k.log_domain:
                dw = w * k.derivative(z) / h[slope]  # type: ignore[misc]
            else:
                prof = k.profile(z)
                dw = np.where(prof > 0, w / np.where(prof > 0, prof, 1.0), 0.0) * k.derivative(z) / h[slope]  # type: ignore[misc]
        s0 = total[live, None]
        a = w[live] / s0
        out[live] = (dw[live] - a * dw[live].sum(axis=1, keepdims=True)) / s0
        return out
    basis = monomials(degree, h.size)
    z = u / h
    B = np.stack([np.prod(z[:, :, list(mo)], axis=2) if mo else np.ones((b, n)) for mo in basis], axis=2)
    Bw = B * (w / np.where(live, total, 1.0)[:, None])[:, :, None]
    M = np.einsum("bnp,bnq->bpq", Bw, B)
    level = used_degree(_as_partials(M, live, degree, h.size), degree, np.ones(h.size), job.call.keys.dtype)
    target = 0 if slope is None else 1 + slope
    for r in range(degree, 0, -1):
        now = level == r
        if now.any():
            size = len(monomials(r, h.size))
            e = np.zeros((int(now.sum()), size, 1))
            e[:, target, 0] = 1.0
            c = np.linalg.solve(M[now][:, :size, :size], e)[:, :, 0]
            rows = np.einsum("bnp,bp->bn", Bw[now][:, :, :size], c)
            out[now] = rows / (h[slope] if slope is not None else 1.0)
    flat = level == 0
    if slope is None and flat.any():  # degree 0 at worst
        out[flat] = w[flat] / total[flat, None]
    return out


def _as_partials(M: NDArray[np.float64], live: NDArray[np.bool_], degree: int, d: int) -> Partials:
    """Partials whose local systems at bandwidth 1 are ``M`` (b, P, P), the normalised systems in
    ``z``: weight 1 (0 where no key has weight, ``live``), each moment sum of order ``j`` (in
    the layout of :func:`nadaraya.backends.reference.moment_shapes`) the entry of ``M`` that
    holds the same monomial, no values. The solve reads ``M`` back from them unchanged (its
    corner, ``sum w / sum w``, as exactly 1)."""
    b, size = M.shape[0], M.shape[1]
    flat = M.reshape(b, size * size)
    moments = [flat[:, at].reshape((b,) + (d,) * j) for j, at in enumerate(_entries(degree, d), start=1)]
    moments += [np.zeros((b,) + (d,) * j + (1,)) for j in range(1, degree + 1)]
    return Partials(np.zeros(b), live.astype(np.float64), np.zeros((b, 1)), tuple(moments))


@functools.lru_cache(maxsize=32)
def _entries(degree: int, d: int) -> tuple[NDArray[np.intp], ...]:
    """For each order ``j`` of :func:`_as_partials`' moments, the flat index into ``M`` (P, P) of
    each entry of the moment tensor (its monomial split into a row of degree at most ``degree``
    and the rest)."""
    size = len(monomials(degree, d))
    at = {mono: a for a, mono in enumerate(monomials(degree, d))}
    out = []
    for j in range(1, 2 * degree + 1):
        half = min(j, degree)
        out.append(np.array([at[idx[:half]] * size + at[idx[half:]]
                             for idx in map(tuple, map(sorted, itertools.product(range(d), repeat=j)))],
                            dtype=np.intp))
    return tuple(out)


def blocks(
    job: _job.Job, slope: int | None = None, memory: float | None = None, empty: str | None = None
) -> Iterator[tuple[int, int, NDArray[np.float64]]]:
    """``(q0, q1, rows)`` for consecutive blocks of queries, each ``rows`` (q1 - q0, n) within
    ``memory`` MiB (default the working memory) with its scratch: the smoother's rows, or a
    slope's (NaN where it is not defined). With ``empty`` (the ``empty=`` policy), the rows are
    those of the predictions as returned: the far limit and the fills included.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.local import job as _job
    >>> x = np.linspace(0, 1, 11)
    >>> job = _job.prepare(x[:3], x, 2 * x, kernel="gaussian", bandwidth=0.3, sample_weight=None,
    ...                    degree=1, var_types=None, categorical_kernel="classic")
    >>> _, _, A = next(blocks(job))
    >>> bool(np.allclose(A @ (2 * x), [0.0, 0.2, 0.4], atol=1e-12)), A.sum(axis=1).round(12).tolist()
    (True, [1.0, 1.0, 1.0])
    """
    m, n = job.call.queries.shape[0], job.call.keys.shape[0]
    width = len(monomials(job.degree, job.cont.size)) + max(1, job.cont.size) + 4
    budget = get_config()["working_memory"] if memory is None else memory
    step = max(1, int(budget * 2**20 // (8 * n * width)))
    for q0 in range(0, m, step):
        q1 = min(m, q0 + step)
        yield q0, q1, _rows(job, q0, q1, slope, empty)
