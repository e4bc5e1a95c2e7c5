"""The laplace backend: exact Laplacian-kernel sums in 1-D in O((n + m) log n) by fast sum updating.

The Laplacian weight ``exp(-|q - k| / h)`` factors on each side of a query: for the keys left
of ``q`` (``k <= q``), ``exp(-(q - k) / h) = exp(-(q - a) / h) exp(-(a - k) / h)`` with ``a``
the nearest key left of ``q``. So the sum over those keys is one running sum over the sorted
keys, read at the query's position, times one factor for the query's distance to ``a`` (the
fast sum updating of Langrene and Warin, 2019, that R's FKSUM uses for kernels of the form
polynomial times ``exp(-|u|)``). The keys right of ``q`` (``k > q``) are the left keys of the
mirrored problem (keys and queries negated, order reversed), summed by the same code.

**Exact.** The running sums follow ``S_j = exp(-(k_j - k_{j-1}) / h) S_{j-1} + s_j v_j``:
factors at most 1, so nothing overflows, and every term of the weight is positive, so nothing
cancels (the cumulative sums of ``exp(k / h)`` and ``exp(-k / h)`` that a textbook version
would subtract overflow for ``|k| > 709 h`` and cancel elsewhere). Each side's sum is kept
relative to its nearest key and the query's distance to that key, ``(q - a) / h``, goes into
the partials' ``shift`` in the log domain: a query a million bandwidths from every key gets
exactly its nearest keys' weights, never 0/0. Keys of zero sample weight are dropped first
(they add nothing), so the nearest key on a side always carries weight. Sample weights are
scaled by a power of two (exact) so that the largest is in ``[0.5, 1)``. The rounding error of
a running sum is that of a sum of positive terms, about ``sqrt(n)`` ulps in the worst
realistic case; tests hold 1e-12 relative against the reference backend.

**Leave-one-out** (``exclude``): a query whose left-out key ``e`` is its nearest key on a side
reads the running sum one key further (``S_{e-1}``); otherwise, where ``e`` lies strictly
inside the query's side (duplicate keys, or any other ``exclude``), the side's sum is split at
``e``: the running sum up to ``e - 1``, carried to the nearest key, plus the sum over the keys
between ``e`` and the nearest key, read from a segment tree of right-anchored block sums in
O(log n). The left-out term is never subtracted.

**Moments** (``moments = r``, local polynomial fits): the sums ``sum w u^j`` (``j <= 2 r``)
and ``sum w u^j v`` (``j <= r``) with ``u = k - q`` ride on the same recursion, FKSUM-style:
each running sum is kept about its own anchor key ``a``, ``sum w (k - a)^j``, and moved to a
new anchor ``a'`` by the binomial expansion ``(k - a') = (k - a) + (a - a')``. On the left
side ``k - a <= 0`` and ``a - a' <= 0``, so every term of the expansion of a weight moment has
the sign ``(-1)^j``: nothing cancels, and ``(k - a) exp(-(a - k) / h)`` stays below ``h``.

Complexity: O(n log n) to sort the keys (skipped when they are sorted), O(m log n) to place
the queries (above :data:`SORT_QUERIES_ABOVE` keys the queries are sorted first, O(m log m),
so that the running sums are read in order), O(n + m) for the sums (O((n + m) r^2 (1 + p))
with moments), plus O(log n) per query and O(n) memory for the segment tree when
leave-one-out needs a split (duplicate keys). Single-threaded numba code (``cache=True``,
``nogil=True``). Measured at n = m = 1e6 (keys U(0, 5), any bandwidth) on the shared 2-core
machine: about 0.33 s, 6x the time ``np.sort`` takes to sort the keys; the two sorts (keys and
queries) are half of it.

float32 inputs are computed in float64 and rounded once at the end, the weight's binary
exponent moved into the shift first (as the fused backend does).

Examples
--------
>>> import numpy as np
>>> from nadaraya.kernels import get
>>> from nadaraya.backends import laplace, reference
>>> rng = np.random.default_rng(0)
>>> x = rng.uniform(size=(50, 1)); v = rng.normal(size=(50, 2))
>>> a = laplace.partials(x, x, v, kernel=get("laplacian"), bandwidth=np.array([0.1]))
>>> b = reference.partials(x, x, v, kernel=get("laplacian"), bandwidth=np.array([0.1]))
>>> bool(np.allclose(a.finalize(), b.finalize(), rtol=1e-12, atol=0))
True
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numpy.typing import NDArray

from nadaraya.backends._sorted import sorted_exclude, sorted_order, sorted_weighted
from nadaraya.kernels import Kernel
from nadaraya.partials import Partials

__all__ = ["MAX_DEGREE", "SORT_QUERIES_ABOVE", "partials", "supports"]

#: the largest local polynomial degree (``moments=``) this backend computes
MAX_DEGREE = 2
#: above this many keys the queries are sorted first, so that the running sums (which then
#: outgrow the caches) are read in order: 3-5x faster at a million keys and queries
SORT_QUERIES_ABOVE = 2**15


def supports(kernel: Kernel, d: int) -> bool:
    """The Laplacian kernel in one feature.

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> supports(get("laplacian"), 1), supports(get("laplacian"), 2), supports(get("gaussian"), 1)
    (True, False, False)
    """
    return kernel.name == "laplacian" and d == 1


# -- the jitted pieces ------------------------------------------------------------------------
#
# A state row holds, about an anchor key a: the weight moments M_j = sum w (k - a)^j for
# j = 0 .. 2r (M_0 the weight), then the value moments MV_j = sum w (k - a)^j v for j = 0 .. r,
# p columns each (MV_0 the weighted values): width 2r + 1 + (r + 1) p.


#: below this scaled gap ``x`` a factor ``exp(-x)`` is applied as ``S + expm1(-x) S``: a factor
#: rounded to a double next to 1 carries an error of up to half an ulp of 1, not of ``x``, and a
#: million of them add up (NumPy's SIMD exp, biased by -0.1 ulp there, lost 3e-12 of the sums)
SMALL = 0.25


@numba.njit(cache=True)
def _factor(x):  # type: ignore[no-untyped-def]  # pragma: no cover
    """What :func:`_scaled` needs for ``exp(-x)``, ``x >= 0``: ``expm1(-x)`` below :data:`SMALL`."""
    return math.expm1(-x) if x < SMALL else math.exp(-x)


@numba.njit(cache=True, inline="always")
def _scaled(y, x, fac):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``y exp(-x)`` with ``fac = _factor(x)``."""
    return y + fac * y if x < SMALL else fac * y


@numba.njit(cache=True)
def _carry(row, g, x, fac, r, p, binom):  # type: ignore[no-untyped-def]  # pragma: no cover
    """In place: move ``row`` from anchor ``a`` to ``a' = a - g`` and multiply it by
    ``exp(-x)`` (``fac = _factor(x)``).

    ``M'_j = exp(-x) sum_t C(j, t) g^(j - t) M_t``; j descends so the sums read unchanged entries.
    """
    nm = 2 * r + 1
    if r == 0:
        for t in range(row.size):
            row[t] = _scaled(row[t], x, fac)
        return
    for j in range(nm - 1, -1, -1):
        acc = row[j]
        gp = 1.0
        for t in range(j - 1, -1, -1):
            gp *= g
            acc += binom[j, t] * gp * row[t]
        row[j] = _scaled(acc, x, fac)
    for c in range(p):
        for j in range(r, -1, -1):
            acc = row[nm + j * p + c]
            gp = 1.0
            for t in range(j - 1, -1, -1):
                gp *= g
                acc += binom[j, t] * gp * row[nm + t * p + c]
            row[nm + j * p + c] = _scaled(acc, x, fac)


@numba.njit(cache=True, inline="always")
def _carry_small(src, i, dst, k, g, x, fac, r, p):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``dst[k]`` = :func:`_carry` of ``src[i]`` for ``r`` 1 or 2 (``dst[k]`` may be ``src[i]``):
    each ``M'_j = M_j + C(j, j-1) g M_(j-1) + ... + g^j M_0`` summed in the order of the general
    loop, then scaled; index arithmetic only (no views, no calls: this is the running sums' step)."""
    g2 = g * g
    m0, m1, m2 = src[i, 0], src[i, 1], src[i, 2]
    if r == 1:
        dst[k, 2] = _scaled(m2 + 2.0 * g * m1 + g2 * m0, x, fac)
        dst[k, 1] = _scaled(m1 + g * m0, x, fac)
        dst[k, 0] = _scaled(m0, x, fac)
        for c in range(p):
            v0, v1 = src[i, 3 + c], src[i, 3 + p + c]
            dst[k, 3 + p + c] = _scaled(v1 + g * v0, x, fac)
            dst[k, 3 + c] = _scaled(v0, x, fac)
        return
    g3 = g2 * g
    g4 = g3 * g
    m3, m4 = src[i, 3], src[i, 4]
    dst[k, 4] = _scaled(m4 + 4.0 * g * m3 + 6.0 * g2 * m2 + 4.0 * g3 * m1 + g4 * m0, x, fac)
    dst[k, 3] = _scaled(m3 + 3.0 * g * m2 + 3.0 * g2 * m1 + g3 * m0, x, fac)
    dst[k, 2] = _scaled(m2 + 2.0 * g * m1 + g2 * m0, x, fac)
    dst[k, 1] = _scaled(m1 + g * m0, x, fac)
    dst[k, 0] = _scaled(m0, x, fac)
    for c in range(p):
        v0, v1, v2 = src[i, 5 + c], src[i, 5 + p + c], src[i, 5 + 2 * p + c]
        dst[k, 5 + 2 * p + c] = _scaled(v2 + 2.0 * g * v1 + g2 * v0, x, fac)
        dst[k, 5 + p + c] = _scaled(v1 + g * v0, x, fac)
        dst[k, 5 + c] = _scaled(v0, x, fac)


@numba.njit(cache=True, nogil=True)
def _gaps(ks, inv_h):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The scaled gaps ``x_j = (k_j - k_{j-1}) / h`` of sorted keys and their factors (index 0 unused)."""
    n = ks.size
    x = np.zeros(n)
    fac = np.zeros(n)
    for j in range(1, n):
        x[j] = (ks[j] - ks[j - 1]) * inv_h
        fac[j] = _factor(x[j])
    return x, fac


@numba.njit(cache=True, nogil=True)
def _prefix(ks, own, x, fac, r, p, binom):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Running sums over sorted keys, row j about key j: ``S_j = carry(S_{j-1}) + terms_j``; a
    key's terms are its weight and values (``own``, (n, 1 + p)), its moments about itself 0."""
    n = own.shape[0]
    nm = 2 * r + 1
    c = nm + (r + 1) * p
    pre = np.empty((n, c))
    if n == 0:
        return pre
    for t in range(c):
        pre[0, t] = 0.0
    pre[0, 0] = own[0, 0]
    for cc in range(p):
        pre[0, nm + cc] = own[0, 1 + cc]
    if 0 < r <= 2:
        _prefix_small(ks, own, x, fac, r, p, pre)
        return pre
    for j in range(1, n):
        xj, fj = x[j], fac[j]
        if r == 0:  # the row is (weight, values): own's layout
            if xj < SMALL:
                for t in range(c):
                    y = pre[j - 1, t]
                    pre[j, t] = y + (fj * y + own[j, t])
            else:
                for t in range(c):
                    pre[j, t] = fj * pre[j - 1, t] + own[j, t]
        else:
            row = pre[j]
            for t in range(c):
                row[t] = pre[j - 1, t]
            _carry(row, ks[j - 1] - ks[j], xj, fj, r, p, binom)
            row[0] += own[j, 0]
            for cc in range(p):
                row[nm + cc] += own[j, 1 + cc]
    return pre


@numba.njit(cache=True, nogil=True)
def _prefix_small(ks, own, x, fac, r, p, pre):  # type: ignore[no-untyped-def]  # pragma: no cover
    """:func:`_prefix`'s rows ``1 ..`` for ``r`` 1 or 2 (row 0 set): the same sums in the same
    order as :func:`_carry`, the weight's moments carried in registers from row to row. A key's
    own terms are nonzero only in the weight and value columns (its moments about itself are 0),
    so only those are added (``own``, (n, 1 + p))."""
    n = own.shape[0]
    m0, m1, m2 = pre[0, 0], pre[0, 1], pre[0, 2]
    m3 = pre[0, 3] if r == 2 else 0.0
    m4 = pre[0, 4] if r == 2 else 0.0
    nm = 2 * r + 1
    for j in range(1, n):
        xj, fj = x[j], fac[j]
        g = ks[j - 1] - ks[j]
        g2 = g * g
        if r == 2:
            g3 = g2 * g
            g4 = g3 * g
            m4 = _scaled(m4 + 4.0 * g * m3 + 6.0 * g2 * m2 + 4.0 * g3 * m1 + g4 * m0, xj, fj)
            m3 = _scaled(m3 + 3.0 * g * m2 + 3.0 * g2 * m1 + g3 * m0, xj, fj)
            pre[j, 4] = m4
            pre[j, 3] = m3
        m2 = _scaled(m2 + 2.0 * g * m1 + g2 * m0, xj, fj)
        m1 = _scaled(m1 + g * m0, xj, fj)
        m0 = _scaled(m0, xj, fj) + own[j, 0]
        pre[j, 2] = m2
        pre[j, 1] = m1
        pre[j, 0] = m0
    for cc in range(p):  # each value column's moments in registers, one pass each
        v0, v1 = pre[0, nm + cc], pre[0, nm + p + cc]
        v2 = pre[0, nm + 2 * p + cc] if r == 2 else 0.0
        for j in range(1, n):
            xj, fj = x[j], fac[j]
            g = ks[j - 1] - ks[j]
            if r == 2:
                v2 = _scaled(v2 + 2.0 * g * v1 + (g * g) * v0, xj, fj)
                pre[j, nm + 2 * p + cc] = v2
            v1 = _scaled(v1 + g * v0, xj, fj)
            v0 = _scaled(v0, xj, fj) + own[j, 1 + cc]
            pre[j, nm + p + cc] = v1
            pre[j, nm + cc] = v0


@numba.njit(cache=True, nogil=True)
def _tree(ks, terms, inv_h, r, p, binom):  # type: ignore[no-untyped-def]  # pragma: no cover
    """A segment tree of block sums, each about its block's last key (``anchor``); leaves at
    ``size + j``, padding leaves empty with the last key as anchor."""
    n, c = terms.shape
    size = 1
    while size < n:
        size *= 2
    node = np.zeros((2 * size, c))
    anchor = np.empty(2 * size, dtype=np.int64)
    for j in range(size):
        anchor[size + j] = min(j, n - 1)
        if j < n:
            for t in range(c):
                node[size + j, t] = terms[j, t]
    tmp = np.empty(c)
    for i in range(size - 1, 0, -1):
        a, b = anchor[2 * i], anchor[2 * i + 1]
        anchor[i] = b
        for t in range(c):
            tmp[t] = node[2 * i, t]
        x = (ks[b] - ks[a]) * inv_h
        _carry(tmp, ks[a] - ks[b], x, _factor(x), r, p, binom)
        for t in range(c):
            node[i, t] = tmp[t] + node[2 * i + 1, t]
    return node, anchor, size


@numba.njit(cache=True)
def _absorb(out, at, node, anchor, t, ks, inv_h, r, p, binom):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``out`` (about key ``at``, or empty if ``at < 0``) plus node ``t`` (about a later key)."""
    b = anchor[t]
    if at >= 0:
        x = (ks[b] - ks[at]) * inv_h
        _carry(out, ks[at] - ks[b], x, _factor(x), r, p, binom)
    for s in range(out.size):
        out[s] += node[t, s]
    return b


@numba.njit(cache=True)
def _segment(out, lo, hi, node, anchor, size, ks, inv_h, r, p, binom, stack):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``out`` = the sum over keys ``lo .. hi`` (inclusive) about key ``hi``, in O(log n) nodes
    combined from left to right."""
    for s in range(out.size):
        out[s] = 0.0
    at = -1
    a, b = lo + size, hi + size + 1
    ns = 0
    while a < b:
        if a & 1:
            at = _absorb(out, at, node, anchor, a, ks, inv_h, r, p, binom)
            a += 1
        if b & 1:
            b -= 1
            stack[ns] = b
            ns += 1
        a >>= 1
        b >>= 1
    for s in range(ns - 1, -1, -1):
        at = _absorb(out, at, node, anchor, stack[s], ks, inv_h, r, p, binom)


@numba.njit(cache=True, nogil=True)
def _side(ks, pre, node, anchor, size, qs, last, ex, inv_h, r, p, binom, dist, out):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Each query's sum over the keys ``0 .. last[i]`` (its side, nearest last) but key
    ``ex[i]``, about the query (``u = k - q``) and under the factor ``exp(-dist[i])``."""
    c = pre.shape[1]
    tmp = np.empty(c)
    stack = np.empty(128, dtype=np.int64)
    for i in range(qs.size):
        a = last[i]
        e = ex[i]
        row = out[i]
        if e == a:
            a -= 1
        if a < 0:
            dist[i] = np.inf
            for t in range(c):
                row[t] = 0.0
            continue
        if (e < 0 or e > a) and 0 < r <= 2:  # read and moved to the query in one step
            _carry_small(pre, a, out, i, ks[a] - qs[i], 0.0, 0.0, r, p)
            dist[i] = (qs[i] - ks[a]) * inv_h
            continue
        if e < 0 or e > a:
            for t in range(c):
                row[t] = pre[a, t]
        else:  # split at the left-out key e, strictly inside the side
            _segment(row, e + 1, a, node, anchor, size, ks, inv_h, r, p, binom, stack)
            if e >= 1:
                for t in range(c):
                    tmp[t] = pre[e - 1, t]
                x = (ks[a] - ks[e - 1]) * inv_h
                _carry(tmp, ks[e - 1] - ks[a], x, _factor(x), r, p, binom)
                for t in range(c):
                    row[t] += tmp[t]
        if r > 0:
            _carry(row, ks[a] - qs[i], 0.0, 0.0, r, p, binom)
        dist[i] = (qs[i] - ks[a]) * inv_h


@numba.njit(cache=True, nogil=True)
def _combine(dl, sl, dr, sr, r, p, order, shift, out):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Both sides under one shift, written to entry ``order[i]`` of ``shift`` and row
    ``order[i]`` of ``out``; the mirrored side's odd powers of ``u`` change sign."""
    nm = 2 * r + 1
    m, c = sl.shape
    for i in range(m):
        o = order[i]
        d = min(dl[i], dr[i])
        if d == np.inf:
            shift[o] = -np.inf
            for t in range(c):
                out[o, t] = 0.0
            continue
        shift[o] = -d
        fl = math.exp(d - dl[i])
        fr = math.exp(d - dr[i])
        for t in range(c):
            j = t if t < nm else (t - nm) // p
            right = -sr[i, t] if j % 2 else sr[i, t]
            out[o, t] = fl * sl[i, t] + fr * right


@numba.njit(cache=True, nogil=True)
def _lines(out):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``out`` (m, c) as (c, m), one line per sum, in one pass (the rows read in order)."""
    m, c = out.shape
    lines = np.empty((c, m))
    for i in range(m):
        for t in range(c):
            lines[t, i] = out[i, t]
    return lines


# -- the driver ---------------------------------------------------------------------------------


def _one_side(ks, own, gaps, qs, last, ex, inv_h, r, p, binom):  # type: ignore[no-untyped-def]
    """One side's distances and state rows (builds the segment tree only if a split needs it)
    from the keys' weights and weighted values ``own`` (n, 1 + p)."""
    nm = 2 * r + 1
    m, c = qs.size, nm + (r + 1) * p
    pre = _prefix(ks, own, *gaps, r, p, binom)
    if np.any((ex >= 0) & (ex < last)):
        terms = np.zeros((own.shape[0], c))  # each key's full row of terms (its moments 0)
        terms[:, 0] = own[:, 0]
        terms[:, nm:nm + p] = own[:, 1:]
        node, anchor, size = _tree(ks, terms, inv_h, r, p, binom)
    else:
        node, anchor, size = np.zeros((1, c)), np.zeros(1, dtype=np.int64), 1
    dist = np.empty(m)
    out = np.empty((m, c))
    _side(ks, pre, node, anchor, size, qs, last, ex, inv_h, r, p, binom, dist, out)
    return dist, out


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
    """Exact partial sums of every query over every key for the Laplacian kernel in 1-D.

    Same arguments and result as :func:`nadaraya.backends.reference.partials`; ``moments`` up
    to :data:`MAX_DEGREE`.

    Raises
    ------
    ValueError
        For another kernel or more than one feature, or ``moments`` above :data:`MAX_DEGREE`.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.kernels import get
    >>> x = np.array([[1.0], [2.0], [3.0]]); v = np.array([[3.0], [5.0], [4.0]])
    >>> p = partials(np.array([[2.5], [1e9]]), x, v, kernel=get("laplacian"), bandwidth=np.ones(1))
    >>> p.finalize()[:, 0].round(4).tolist()  # far away: weights e^0, e^-1, e^-2 of 4, 5, 3
    [4.267, 4.1547]
    >>> float(p.shift[1]) == -(1e9 - 3.0)  # the distance to the nearest key, in the log domain
    True
    """
    moments = int(moments)  # checked against CAPABILITIES by nadaraya.backends.compute
    dtype = queries.dtype
    r = int(moments)
    m, n, p = queries.shape[0], keys.shape[0], values.shape[1]
    nm = 2 * r + 1
    c = nm + (r + 1) * p
    f64 = np.float64
    inv_h = float(1.0 / np.asarray(bandwidth, dtype=f64)[0])
    qs = np.ascontiguousarray(queries[:, 0], dtype=f64)
    k = np.asarray(keys[:, 0], dtype=f64)
    kept, s, log_scale = sorted_weighted(k, sample_weight)
    ne = kept.size
    ks = np.ascontiguousarray(k[kept])
    own = np.empty((ne, 1 + p))  # each key's weight and weighted values
    own[:, 0] = s
    own[:, 1:] = s[:, None] * np.asarray(values, dtype=f64)[kept]
    binom = np.array([[math.comb(j, t) for t in range(nm)] for j in range(nm)], dtype=f64)
    # queries in sorted order (when the keys outgrow the caches): the running sums are then
    # read in order, not at random
    qorder = sorted_order(qs) if ne > SORT_QUERIES_ABOVE else None
    if qorder is not None:
        qs = qs[qorder]
    last = np.searchsorted(ks, qs, side="right").astype(np.int64) - 1
    ex = sorted_exclude(exclude, n, kept, m)
    if qorder is not None:
        ex = ex[qorder]
    x, fac = _gaps(ks, inv_h)
    dl, sl = _one_side(ks, own, (x, fac), qs, last, ex, inv_h, r, p, binom)
    # the keys right of each query (k > q): the keys left of -q among the mirrored keys, whose
    # gaps are the same in reverse order
    dr, sr = _one_side(np.ascontiguousarray(-ks[::-1]), np.ascontiguousarray(own[::-1]),
                       (np.concatenate([x[:1], x[:0:-1]]), np.concatenate([fac[:1], fac[:0:-1]])),
                       -qs, ne - 2 - last,
                       np.where(ex >= 0, ne - 1 - ex, -1), inv_h, r, p, binom)
    shift = np.empty(m)
    rows = np.empty((m, c))
    _combine(dl, sl, dr, sr, r, p, np.arange(m) if qorder is None else qorder, shift, rows)
    out = _lines(rows)
    if log_scale:
        shift += log_scale
    weight, value = out[0], out[nm:nm + p].T
    # the moments, one line of ``out`` each: views of shape (m, 1, ..., 1[, p])
    mom = [out[j].reshape((m,) + (1,) * j) for j in range(1, nm)]
    mom += [out[nm + j * p:nm + (j + 1) * p].T.reshape((m,) + (1,) * j + (p,)) for j in range(1, r + 1)]
    if dtype != f64:
        # move the weight's binary exponent into the shift, exactly, before rounding
        mant, expo = np.frexp(weight)
        shift = np.where(weight > 0, shift + expo * math.log(2.0), shift)
        value = np.ldexp(value, -expo[:, None])
        mom = [np.ldexp(x, -expo.reshape((m,) + (1,) * (x.ndim - 1))) for x in mom]
        weight = mant
        with np.errstate(over="ignore"):
            shift = shift.astype(dtype)
        weight, value = weight.astype(dtype), value.astype(dtype)
        mom = [x.astype(dtype) for x in mom]
    return Partials(np.ascontiguousarray(shift), np.ascontiguousarray(weight), np.ascontiguousarray(value),
                    tuple(np.ascontiguousarray(x) for x in mom))
