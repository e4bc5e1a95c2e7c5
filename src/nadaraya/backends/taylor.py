"""The taylor backend: Gaussian sums in 1-D within a stated tolerance, by Taylor series about box centres.

**What it guarantees.** Called with ``tol``, every prediction ``value / weight`` it returns is
within ``tol * max_i |v_i|`` of the exact one (per value column ``v``), on every query. To get
there, each of its sums ``S_v = sum_i s_i w_i v_i`` (and the weight, ``v = 1``) is within
``eps W max|v|`` of the exact sum, ``eps = tol / 2.1`` and ``W = sum_i s_i w_i``; then
``|S_v / W_hat - S_v / W| <= 2 eps max|v| / (1 - eps) < tol max|v|``. The bound covers the
two approximations below; floating-point rounding comes on top, as for every backend (the
method keeps it near a direct sum's: see the amplification below), and ``tol`` below
:data:`MIN_TOL` is refused.

**How.** In units of the bandwidth, the queries are cut into boxes of half-width :data:`RHO`.
For a query at ``a`` from its box's centre ``c`` (``|a| <= RHO``) and a key at ``u`` from it,

    exp(-(a - u)^2 / 2) = exp(-a^2 / 2) * exp(-u^2 / 2) * sum_k (a u)^k / k!,

so the box's queries share the sums ``T_k = sum_i s_i v_i exp(-u_i^2 / 2) u_i^k / k!`` over its
keys, and each query costs one polynomial in ``a``. Per box:

1. keys farther than ``R`` bandwidths from every query of the box are dropped. They weigh at
   most ``exp(-R^2 / 2) s_i`` each; ``R^2 = D^2 + 2 log(3 sum_i s_i / (eps s_j))`` with ``s_j``
   a key at most ``D`` bandwidths from every query of the box (the best of the two keys next
   to its centre), so that all of them together stay below ``eps / 3`` of ``W`` (``W >= s_j
   exp(-D^2 / 2)``);
2. the series stops after ``p`` terms. With ``Z = RHO (RHO + R)`` bounding ``|a u|`` over the
   kept keys, the remainder of each key's term is at most ``Z^p / p! e^Z`` times the term
   itself (Lagrange's remainder of ``exp(x)``, ``e^xi x^p / p!`` with ``xi`` between 0 and
   ``x``, is at most ``|x|^p / p!`` times ``e^x`` for ``x >= 0`` and times ``e^|x|`` below);
   ``p`` is the smallest with that below ``eps / 3``.

**Rounding.** A key's share of the series is computed to within a few ulps of
``exp(-(|a| - |u|)^2 / 2)``, which exceeds its weight by up to ``e^(2 Z)`` for keys on the far
side of the box centre. So the boxes are made narrow enough (at most :data:`RHO`) that a box next
to its keys has ``e^(2 Z)`` times ``MAX_TERMS / 2 + 8`` ulps under ``eps / 3``; a box whose ``Z``
passes that (queries far from every key), or whose ``p`` would pass :data:`MAX_TERMS`, goes to
the exact truncated backend (:mod:`nadaraya.backends.truncated`: only the keys in each query's
window, in the log domain, so a far query keeps its nearest key, as everywhere).

**Leave-one-out** (``exclude``): the left-out key's share of the box's series is recomputed the
same way and subtracted; where that share's terms are so large against the rest of the sum that
their rounding could pass ``eps / 3``, the query is computed exactly instead.

Cost: sorting the keys and the queries, then ``O(p)`` per query and ``O(p)`` per (key, box)
visit, about ``(1 + R / RHO) n p`` in all, whatever the bandwidth; parallel over ranges of a
box's keys and over the queries.

Examples
--------
>>> import numpy as np
>>> from nadaraya.kernels import get
>>> from nadaraya.backends import reference, taylor
>>> rng = np.random.default_rng(0)
>>> x = rng.uniform(0, 5, (2000, 1)); v = np.sin(x)
>>> a = taylor.partials(x, x, v, kernel=get("gaussian"), bandwidth=np.array([0.05]), tol=1e-10)
>>> b = reference.partials(x, x, v, kernel=get("gaussian"), bandwidth=np.array([0.05]))
>>> bool(np.abs(a.finalize() - b.finalize()).max() <= 1e-10 * np.abs(v).max())
True
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from .._jit import exp_flushed, run_ranges
from ..kernels import Kernel
from ..partials import Partials

__all__ = ["MAX_TERMS", "MIN_TOL", "RHO", "partials", "plan", "supports"]

#: the boxes' half-width, in bandwidths
RHO = 0.4
#: the most series terms a box takes; a box that would need more goes to the exact truncated sums
MAX_TERMS = 64
#: the smallest tolerance offered (below it rounding, not the series, would set the error)
MIN_TOL = 1e-12
#: keys per chunk of a box's window (their powers stay in cache)
CHUNK = 512
#: the most keys one task sums (a wide box's window is split so that every core has work)
SEGMENT = 65536
#: the bytes of series sums held at once (boxes are taken in batches within it)
BATCH = 32 * 2**20
_ROUND = 2.0**-53


def supports(kernel: Kernel, d: int) -> bool:
    """The Gaussian kernel in one feature.

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> supports(get("gaussian"), 1), supports(get("gaussian"), 2), supports(get("epanechnikov"), 1)
    (True, False, False)
    """
    return kernel.name == "gaussian" and d == 1


@numba.njit(cache=True, nogil=True)
def _terms(z: float, bound: float) -> int:  # pragma: no cover - compiled
    """The fewest terms ``p`` with ``z^p / p! e^z <= bound`` (``MAX_TERMS + 1``: none)."""
    b = math.exp(z)
    for p in range(MAX_TERMS + 1):
        if b <= bound:
            return p
        b *= z / (p + 1)
    return MAX_TERMS + 1


def plan(n: int, m: int, tol: float, span: float) -> dict[str, float]:
    """What the method expects for ``n`` keys and ``m`` queries spread over ``span`` bandwidths
    (unit sample weights, keys next to every box): the drop radius ``R``, the terms ``p`` and
    the (key, box) visits, for the cost model and :func:`nadaraya.backends.explain`.

    Examples
    --------
    >>> p = plan(10**6, 10**6, 1e-10, 5 / 0.001)
    >>> 25 <= p["terms"] <= 40 and 8 < p["radius"] < 11
    True
    """
    eps3 = tol / 2.1 / 3.0
    rho, _ = _box_size(float(n), eps3)
    radius = math.sqrt(rho**2 + 2.0 * math.log(n / eps3))
    terms = _terms(rho * (rho + radius), eps3)
    boxes = min(m, max(1.0, span / (2 * rho)))
    per_box = min(n, n * (2 * (rho + radius)) / max(span, 2 * (rho + radius)))
    return {"rho": rho, "radius": radius, "terms": terms, "visits": boxes * per_box}


@numba.njit(cache=True, nogil=True)
def _plan_boxes(xs, ss, inv_h, origin, rho, zmax, lc, eps3, ids, b0, b1, lo, hi, terms):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Per box ``b0:b1``: the window of kept keys ``lo:hi`` and the series' terms (0: the box is
    far from the keys and is summed directly)."""
    n = xs.size
    width = 2.0 * rho / inv_h
    for b in range(b0, b1):
        c = origin + (ids[b] + 0.5) * width
        j = np.searchsorted(xs, c)
        best = -np.inf
        best_d = 0.0
        for t in (j - 1, j):
            if 0 <= t < n:
                dist = abs(xs[t] - c) * inv_h + rho
                score = math.log(ss[t]) - 0.5 * dist * dist
                if score > best:
                    best, best_d = score, dist
        radius = math.sqrt(max(best_d * best_d + 2.0 * (lc - (best + 0.5 * best_d * best_d)), 0.0))
        reach = (rho + radius) / inv_h
        lo[b] = np.searchsorted(xs, c - reach)
        hi[b] = np.searchsorted(xs, c + reach, side="right")
        z = rho * (rho + radius)
        p = _terms(z, eps3)
        terms[b] = 0 if z > zmax or p > MAX_TERMS else p


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})  # reordered sums vectorise
def _moments(xs, ss, vs, inv_h, origin, rho, ids, terms, task_box, task_lo, task_hi,  # type: ignore[no-untyped-def]
             t0, t1, T):  # pragma: no cover - compiled
    """Tasks ``t0:t1``, each a range of one box's keys: their sums
    ``T[t, k] = sum s e^(-u^2 / 2) u^k / k! (1, v)`` for ``k < terms[box]``."""
    ncol = vs.shape[1]
    eu = np.empty(CHUNK)
    uu = np.empty(CHUNK)
    vv = np.empty((ncol, CHUNK))
    width = 2.0 * rho / inv_h
    for task in range(t0, t1):
        b = task_box[task]
        p = terms[b]
        c = origin + (ids[b] + 0.5) * width
        Tt = T[task]
        for k0 in range(task_lo[task], task_hi[task], CHUNK):
            nb = min(CHUNK, task_hi[task] - k0)
            for t in range(nb):
                u = (xs[k0 + t] - c) * inv_h
                uu[t] = u
                eu[t] = ss[k0 + t] * exp_flushed(-0.5 * u * u)
                for col in range(ncol):
                    vv[col, t] = vs[k0 + t, col]
            v0 = vv[0]
            for k in range(p):  # T_k += sum e u^k / k! (1, v_0); then the powers move one step
                step = 1.0 / (k + 1)
                acc_w = 0.0
                acc_v = 0.0
                for t in range(nb):
                    e = eu[t]
                    acc_w += e
                    acc_v += e * v0[t]
                    eu[t] = e * (uu[t] * step)
                Tt[k, 0] += acc_w
                Tt[k, 1] += acc_v
            if ncol > 1:  # the other value columns: the powers again, one column at a time
                for t in range(nb):
                    eu[t] = ss[k0 + t] * exp_flushed(-0.5 * uu[t] * uu[t])
                for k in range(p):
                    step = 1.0 / (k + 1)
                    for col in range(1, ncol):
                        vc = vv[col]
                        acc = 0.0
                        for t in range(nb):
                            acc += eu[t] * vc[t]
                        Tt[k, col + 1] += acc
                    for t in range(nb):
                        eu[t] *= uu[t] * step


@numba.njit(cache=True, nogil=True)
def _evaluate(qs, xs, ss, vs, inv_h, origin, rho, kappa, qbox, ids, lo, hi, terms, T, tb0,  # type: ignore[no-untyped-def]
              ex, off, i0, i1, out_w, out_v, ok):  # pragma: no cover - compiled
    """Queries ``off + i0 : off + i1`` (sorted; ``qbox`` their box, whose sums are
    ``T[box - tb0]``): the series in ``a``, the left-out key's share taken off, or the direct
    sums of a far box."""
    ncol = vs.shape[1]
    width = 2.0 * rho / inv_h
    for i in range(off + i0, off + i1):
        b = qbox[i]
        p = terms[b]
        Tb = T[b - tb0]
        if p == 0:  # far from the keys: the exact truncated sums take it (see _exact)
            ok[i] = False
            continue
        c = origin + (ids[b] + 0.5) * width
        a = (qs[i] - c) * inv_h
        pref = math.exp(-0.5 * a * a)
        w = Tb[p - 1, 0]
        for k in range(p - 2, -1, -1):
            w = w * a + Tb[k, 0]
        out_w[i] = pref * w
        for col in range(ncol):
            s = Tb[p - 1, col + 1]
            for k in range(p - 2, -1, -1):
                s = s * a + Tb[k, col + 1]
            out_v[i, col] = pref * s
        e = ex[i]
        if e >= 0 and lo[b] <= e < hi[b]:  # the left-out key's share, as the box summed it
            u = (xs[e] - c) * inv_h
            term = ss[e] * exp_flushed(-0.5 * u * u)
            share = 0.0
            size = 0.0  # the share's terms in magnitude: what its rounding scales with
            ak = 1.0
            for k in range(p):
                share += term * ak
                size += abs(term * ak)
                term *= u / (k + 1)
                ak *= a
            share *= pref
            out_w[i] -= share
            for col in range(ncol):
                out_v[i, col] -= share * vs[e, col]
            if not pref * size <= kappa * out_w[i]:
                ok[i] = False
        if not out_w[i] > 0.0:
            ok[i] = False


def _box_size(total: float, eps3: float) -> tuple[float, float]:
    """The boxes' half-width and the largest ``Z`` a box may have: its rounding amplification
    ``e^(2 Z)`` times ``(MAX_TERMS / 2 + 8)`` ulps stays below ``eps3``; boxes are as wide as
    that allows for a key next to them (at most :data:`RHO`)."""
    zmax = 0.5 * math.log(eps3 / ((MAX_TERMS / 2 + 8) * _ROUND))
    radius = math.sqrt(2.0 * math.log(max(total, 1.0) / eps3))
    return min(RHO, 0.9 * zmax / (radius + RHO)), zmax


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
    tol: float = 1e-10,
) -> Partials:
    """Partial sums of the Gaussian kernel in 1-D within ``tol`` (see the module's text).

    ``moments`` must be 0 (plain pooling); ``tol`` at least :data:`MIN_TOL`.

    Raises
    ------
    ValueError
        For a kernel other than the Gaussian or ``d != 1``, ``moments > 0``, or a ``tol``
        outside ``[MIN_TOL, 0.1]``.
    """
    if not supports(kernel, keys.shape[1]):
        raise ValueError(f"backend='taylor' computes the Gaussian kernel in 1-D; got kernel={kernel.name!r} "
                         f"with d={keys.shape[1]}")
    if moments:
        raise ValueError(f"backend='taylor' computes plain pooling (moments=0); got moments={moments!r}")
    if not (isinstance(tol, float | int) and MIN_TOL <= tol <= 0.1):
        raise ValueError(f"tol must be a number from {MIN_TOL:g} to 0.1 for backend='taylor'; got {tol!r}")
    dtype = values.dtype
    m, n, p = queries.shape[0], keys.shape[0], values.shape[1]
    sw = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    live = np.flatnonzero(sw > 0)
    scale_exp = int(np.frexp(sw[live].max())[1]) if live.size else 0
    key_col = keys[live, 0] if live.size < n else keys[:, 0]
    inv_h = 1.0 / float(bandwidth[0])
    eps3 = tol / 2.1 / 3.0
    rho, zmax = _box_size(float(np.ldexp(sw[live], -scale_exp).sum()), eps3)
    origin = float(min(queries[:, 0].min(), key_col.min())) if m and live.size else 0.0
    with ThreadPoolExecutor(2) as sorter:  # the keys' sort and the queries' grouping side by side
        pending = sorter.submit(_by_box, queries[:, 0], origin, inv_h / (2 * rho))
        order = np.argsort(key_col)
        qorder = pending.result()
    if live.size < n:
        order = live[order]
    xs = np.ascontiguousarray(keys[order, 0], dtype=np.float64)
    ss = np.ldexp(sw[order], -scale_exp)  # exact: the largest in [0.5, 1)
    vs = np.ascontiguousarray(values[order], dtype=np.float64)
    qs = np.ascontiguousarray(queries[qorder, 0], dtype=np.float64)
    if exclude is not None:
        position = np.full(n, -1, dtype=np.int64)  # original key -> sorted position (-1: dropped)
        position[order] = np.arange(order.size)
        ex = position[np.asarray(exclude, dtype=np.int64)[qorder]]
    else:
        ex = np.full(m, -1, dtype=np.int64)
    lc = math.log(max(float(ss.sum()), 1e-300) / eps3)
    kappa = eps3 / (8.0 * (MAX_TERMS + 8) * _ROUND)
    shift = np.zeros(m)  # the series' sums are relative to the weights' scale, 2^scale_exp
    w = np.zeros(m)
    val = np.zeros((m, p))
    ok = np.ones(m, dtype=np.bool_)
    if xs.size and m:
        _series(qs, xs, ss, vs, ex, inv_h, origin, (rho, zmax, lc, eps3, kappa), (w, val, ok))
    else:
        ok[:] = False
    shift += scale_exp * math.log(2.0)
    sorted_parts = (shift, w, val)
    out = [np.empty_like(a) for a in sorted_parts]
    for a, b in zip(out, sorted_parts, strict=True):
        a[qorder] = b
    shift, w, val = out
    if not ok.all():  # the queries computed exactly instead, in their own order
        good = np.empty_like(ok)
        good[qorder] = ok
        bad = np.flatnonzero(~good)
        _exact(bad, queries, keys, values, kernel, bandwidth, sample_weight, exclude, shift, w, val)
    if dtype == np.float32:
        top = np.frexp(np.where(w > 0, w, 1.0))[1]
        shift = shift + top * math.log(2.0)
        w, val = np.ldexp(w, -top), np.ldexp(val, -top[:, None])
    return Partials(shift.astype(dtype), w.astype(dtype), val.astype(dtype))


def _by_box(q: NDArray[np.floating], origin: float, per_unit: float) -> NDArray[np.int64]:
    """An order of the queries ``q`` that groups them by box (boxes ``1 / per_unit`` wide from
    ``origin``) in increasing order: a counting sort, O(m), where the boxes are not many more
    than the queries; a sort otherwise."""
    if q.size == 0:
        return np.zeros(0, dtype=np.int64)
    top = (float(q.max()) - origin) * per_unit
    if not top < 4 * q.size + 1024:
        return np.argsort(q)
    ids = np.floor((q.astype(np.float64) - origin) * per_unit).astype(np.int64)
    return _counting_order(ids, int(ids.max()) + 1)


@numba.njit(cache=True, nogil=True)
def _counting_order(ids, count):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The stable order of the integers ``ids`` in ``[0, count)``, by counting."""
    start = np.zeros(count + 1, dtype=np.int64)
    for i in range(ids.size):
        start[ids[i] + 1] += 1
    for b in range(count):
        start[b + 1] += start[b]
    out = np.empty(ids.size, dtype=np.int64)
    for i in range(ids.size):
        out[start[ids[i]]] = i
        start[ids[i]] += 1
    return out


def _series(
    qs: NDArray[np.float64], xs: NDArray[np.float64], ss: NDArray[np.float64], vs: NDArray[np.float64],
    ex: NDArray[np.int64], inv_h: float, origin: float, params: tuple[float, ...], outputs: tuple[Any, ...],
) -> None:
    """Sorted queries against sorted keys, in batches of boxes whose sums fit in :data:`BATCH`
    bytes: plan each box, sum its keys in ranges of at most :data:`SEGMENT` (so that a few wide
    boxes still keep every core busy), add the ranges of a box, evaluate its queries."""
    rho, zmax, lc, eps3, kappa = params
    m = qs.size
    qid = np.floor((qs - origin) * inv_h / (2 * rho)).astype(np.int64)
    starts = np.concatenate([[0], np.flatnonzero(np.diff(qid)) + 1, [m]]).astype(np.int64)
    ids = qid[starts[:-1]]
    nbox = ids.size
    lo, hi, terms = np.zeros(nbox, np.int64), np.zeros(nbox, np.int64), np.zeros(nbox, np.int64)
    run_ranges(_plan_boxes, (xs, ss, inv_h, origin, rho, zmax, lc, eps3, ids), nbox, (lo, hi, terms))
    qbox = np.repeat(np.arange(nbox), np.diff(starts))
    ncol = vs.shape[1] + 1
    pmax = max(1, int(terms.max()))
    per_batch = max(1, BATCH // (8 * pmax * ncol * max(1, -(-int((hi - lo).max()) // SEGMENT))))
    for b0 in range(0, nbox, per_batch):
        b1 = min(nbox, b0 + per_batch)
        span = np.where(terms[b0:b1] > 0, hi[b0:b1] - lo[b0:b1], 0)
        count = np.maximum(1, -(-span // SEGMENT))  # every box gets a task, empty or not
        first = np.concatenate([[0], np.cumsum(count)[:-1]])
        task_box = np.repeat(np.arange(b0, b1), count)
        within = np.arange(task_box.size) - np.repeat(first, count)
        task_lo = lo[task_box] + within * SEGMENT
        task_hi = np.minimum(task_lo + SEGMENT, np.where(terms[task_box] > 0, hi[task_box], lo[task_box]))
        T = np.zeros((task_box.size, pmax, ncol))
        run_ranges(_moments, (xs, ss, vs, inv_h, origin, rho, ids, terms, task_box, task_lo, task_hi),
                   task_box.size, (T,))
        box_T = np.add.reduceat(T, first, axis=0) if task_box.size > b1 - b0 else T
        q0, q1 = int(starts[b0]), int(starts[b1])
        run_ranges(_evaluate, (qs, xs, ss, vs, inv_h, origin, rho, kappa, qbox, ids, lo, hi, terms,
                               box_T, b0, ex, q0), q1 - q0, outputs)


def _exact(
    rows: NDArray[np.int64], queries: NDArray[np.floating], keys: NDArray[np.floating],
    values: NDArray[np.floating], kernel: Kernel, bandwidth: NDArray[np.floating],
    sample_weight: NDArray[np.floating] | None, exclude: NDArray[np.integer] | None,
    shift: NDArray[np.float64], w: NDArray[np.float64], val: NDArray[np.float64],
) -> None:
    """The exact partials of queries ``rows`` (in boxes far from every key, or whose left-out key
    carried the sum), written in place: the truncated backend's, which visits only the keys
    within each query's window."""
    from . import truncated

    ex = None if exclude is None else np.asarray(exclude)[rows]
    parts = truncated.partials(
        queries[rows].astype(np.float64), keys.astype(np.float64), values.astype(np.float64), kernel=kernel,
        bandwidth=bandwidth.astype(np.float64),
        sample_weight=None if sample_weight is None else sample_weight.astype(np.float64), exclude=ex)
    shift[rows], w[rows], val[rows] = parts.shift, parts.weight, parts.value
