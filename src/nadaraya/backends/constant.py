"""The constant backend: exact sums of the constant kernel (average pooling) in O(n + m), any d.

The constant kernel weighs every key by its sample weight alone, whatever its distance to the
query. So a query's weight and value sums are global sums, the same for every query, and the
moments of a local polynomial fit, ``sum_k s_k (k - q)^(x)j`` (``j <= 2 r``) and
``sum_k s_k (k - q)^(x)j (x) v_k`` (``j <= r``), are global moments moved to the query.

**Moments.** Each feature is centred on the keys' weighted mean ``c`` and scaled by a power of
two ``t`` at or above its spread (exact): ``a = (k - c) / t``. The monomial moments
``M_b = sum_k s_k a^b`` (``|b| <= 2 r``, ``b`` a multi-index over the features) are summed once;
a query's monomial moment about itself follows from the binomial expansion of
``(k - q) / t = a + e``, ``e = (c - q) / t``: ``sum_k s_k (a + e)^g = sum_(b <= g) C(g, b)
e^(g - b) M_b``, then times ``t^g``; each tensor entry of the moments is the monomial of its
index counts. Every input of that expansion is a correctly rounded difference from ``c``, so a
key at 1e6 with a spread of 1e-3 keeps its digits; the terms of the expansion are bounded by
``sum_k s_k (|a| + |e|)^|g|``, a few times the sum of ``|k - q|^|g|`` that the reference's own
rounding is relative to (``2^|g|`` at worst).

**Sums.** Every column is summed with its rounding errors carried alongside (Knuth's TwoSum:
the error of a sum is about one rounding of the result, not ``n`` of them). **Leave-one-out**
(``exclude``): the sum over the keys before ``e`` (a pass up the keys) plus the sum over the keys
after it (a pass down), each compensated and rounded once, added once: the left-out term is
masked, never subtracted.

**Local fits** (:func:`local_fit`, degree 1 and 2 in one feature): with constant weights every
query's local system is the keys' one weighted least-squares problem written about the query,
so the fit at ``q`` is the keys' one polynomial evaluated at ``q``, with no moments per query;
each query's degree stays the per-query rule's (:mod:`nadaraya.backends._constant_fit`).

Sample weights are scaled by a power of two (exact) so that the largest is in ``[0.5, 1)``;
its exponent goes into the partials' ``shift`` (``-inf`` where no key has weight: a single key
left out). float32 inputs are computed in float64 and rounded once at the end.

Examples
--------
>>> import numpy as np
>>> from nadaraya.kernels import get
>>> from nadaraya.backends import constant, reference
>>> rng = np.random.default_rng(0)
>>> x = rng.uniform(size=(50, 2)); v = rng.normal(size=(50, 2))
>>> kw = dict(kernel=get("constant"), bandwidth=np.ones(2), exclude=np.arange(50), moments=1)
>>> a = constant.partials(x, x, v, **kw)
>>> b = reference.partials(x, x, v, **kw)
>>> bool(np.allclose(a.moments[1], b.moments[1], rtol=1e-12, atol=0))
True
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from nadaraya._support.jit import run_ranges
from nadaraya.backends._constant_fit import (
    at_degree,
    by_left_out,
    fit_rows,
    loo_rows,
    loo_rows1,
)
from nadaraya.kernels import Kernel
from nadaraya.partials import Partials

__all__ = ["BLOCK", "MAX_DEGREE", "local_fit", "partials", "supports"]

#: the largest local polynomial degree (``moments=``) this backend computes
MAX_DEGREE = 3


def supports(kernel: Kernel, d: int) -> bool:
    """The constant kernel in any number of features.

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> supports(get("constant"), 1), supports(get("mean"), 7), supports(get("boxcar"), 1)
    (True, True, False)
    """
    return kernel.name == "constant" and d >= 1


# -- the jitted pieces ----------------------------------------------------------------------------
#
# A key's terms: its weight moments s a^b for the monomials b of total degree up to 2 r (in the
# order of _monomials: by total degree, the constant first), then its value moments s a^b v for
# the first kv of them (total degree up to r), p columns each. A query's row of moments about
# itself has the same layout; rows are written to ``out`` (c, m), one line per moment.


@numba.njit(cache=True, nogil=True, inline="always")
def _fill(buf, x, i, centre, inv, parent, feature, first, v, kv):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``buf`` = the terms of point ``i`` of ``x`` (n, d): ``first a^b`` with ``a = (x_i - centre)
    inv`` (each monomial its ``parent`` times ``a[feature]``), then ``first a^b v_i`` for the
    first ``kv`` monomials (``v`` (n, p); none where ``kv`` is 0)."""
    nk, p = parent.size, v.shape[1]
    buf[0] = first
    for k in range(1, nk):
        j = feature[k]
        buf[k] = buf[parent[k]] * ((x[i, j] - centre[j]) * inv[j])
    for k in range(kv):
        for c in range(p):
            buf[nk + k * p + c] = buf[k] * v[i, c]


@numba.njit(cache=True, nogil=True, inline="always")
def _add(acc, comp, buf):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """``acc += buf`` with each rounding error (Knuth's TwoSum, without branches) added to ``comp``."""
    for t in range(buf.size):
        a, x = acc[t], buf[t]
        y = a + x
        z = y - a
        comp[t] += (a - (y - z)) + (x - z)
        acc[t] = y


#: keys and queries taken together (their terms then run over a block, in SIMD lanes)
BLOCK = 128


@numba.njit(cache=True, nogil=True)
def _sums(keys, s, v, centre, inv, parent, feature, kv):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The compensated sums of the keys' terms, each rounded once: the keys in blocks of
    :data:`BLOCK`, lane ``b`` of each block summed in its own lane with its rounding errors
    carried alongside (TwoSum), the lanes then summed likewise."""
    n, nk, p = keys.shape[0], parent.size, v.shape[1]
    c = nk + kv * p
    acc, comp, buf = np.zeros((c, BLOCK)), np.zeros((c, BLOCK)), np.empty((c, BLOCK))
    for i0 in range(0, n, BLOCK):
        nb = min(BLOCK, n - i0)
        for b in range(nb):
            buf[0, b] = s[i0 + b]
        for k in range(1, nk):
            j, src = feature[k], parent[k]
            for b in range(nb):
                buf[k, b] = buf[src, b] * ((keys[i0 + b, j] - centre[j]) * inv[j])
        for k in range(kv):
            for cc in range(p):
                for b in range(nb):
                    buf[nk + k * p + cc, b] = buf[k, b] * v[i0 + b, cc]
        for t in range(c):
            for b in range(nb):
                a, x = acc[t, b], buf[t, b]
                y = a + x
                z = y - a
                comp[t, b] += (a - (y - z)) + (x - z)
                acc[t, b] = y
    out = np.empty(c)
    for t in range(c):
        a, e = 0.0, 0.0
        for b in range(BLOCK):
            x = acc[t, b]
            y = a + x
            z = y - a
            e += comp[t, b] + ((a - (y - z)) + (x - z))
            a = y
        out[t] = a + e
    return out


@numba.njit(cache=True, nogil=True)
def _moved(queries, centre, inv, parent, feature, pairs, coef, unscale, kv, p, rows, lo, hi, out):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Every query's moments about itself, into ``out`` (c, m; it may be ``rows``), from its
    moments about the centre: ``rows`` (c, m), or (c, 1) shared by every query. Each moves by
    ``sum_b C(g, b) e^(g - b) row_b`` over the pairs ``(g, b, g - b)`` of ``pairs`` (coefficients
    ``coef``) with ``e = (centre - q) / t`` (``inv`` is ``-1 / t``), then times ``unscale[g] =
    t^g``; queries ``lo:hi`` (threads take disjoint ranges) in blocks of :data:`BLOCK`."""
    nk, c = parent.size, rows.shape[0]
    shared = rows.shape[1] == 1
    pw = np.empty((nk, BLOCK))
    acc = np.empty((c, BLOCK))
    for i0 in range(lo, hi, BLOCK):
        nb = min(BLOCK, hi - i0)
        for b in range(nb):
            pw[0, b] = 1.0
        for k in range(1, nk):
            j, src = feature[k], parent[k]
            for b in range(nb):
                pw[k, b] = pw[src, b] * ((queries[i0 + b, j] - centre[j]) * inv[j])
        acc[:, :nb] = 0.0
        for t in range(pairs.shape[0]):
            g, s, dg = pairs[t, 0], pairs[t, 1], pairs[t, 2]
            for cc in range(1 + p if g < kv else 1):
                dst = g if cc == 0 else nk + g * p + cc - 1
                col = s if cc == 0 else nk + s * p + cc - 1
                if shared:
                    f = coef[t] * rows[col, 0]
                    for b in range(nb):
                        acc[dst, b] += f * pw[dg, b]
                else:
                    f = coef[t]
                    for b in range(nb):
                        acc[dst, b] += f * pw[dg, b] * rows[col, i0 + b]
        for t in range(c):
            u = unscale[t if t < nk else (t - nk) // p]
            for b in range(nb):
                out[t, i0 + b] = acc[t, b] * u


@numba.njit(cache=True, nogil=True)
def _left_out(keys, s, v, centre, inv, parent, feature, kv, ex):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Each query's moments about the centre over every key but ``ex[i]`` (all keys where
    ``ex[i] < 0``), (c, m): the compensated sum over the keys before it (a pass up the keys) plus
    the compensated sum over the keys after it (a pass down), each rounded once, added once:
    the left-out term is never subtracted."""
    n, m = keys.shape[0], ex.size
    c = parent.size + kv * v.shape[1]
    rows = np.empty((c, m))
    # the queries by left-out key (a counting sort); those that leave none out take the total
    start, order = by_left_out(ex, n)
    acc, comp, buf = np.zeros(c), np.zeros(c), np.empty(c)
    for e in range(n):
        for j in range(start[e], start[e + 1]):
            for t in range(c):
                rows[t, order[j]] = acc[t] + comp[t]
        _fill(buf, keys, e, centre, inv, parent, feature, s[e], v, kv)
        _add(acc, comp, buf)
    for i in range(m):
        if ex[i] < 0:
            for t in range(c):
                rows[t, i] = acc[t] + comp[t]
    acc[:] = 0.0
    comp[:] = 0.0
    for e in range(n - 1, -1, -1):
        for j in range(start[e], start[e + 1]):
            for t in range(c):
                rows[t, order[j]] += acc[t] + comp[t]
        _fill(buf, keys, e, centre, inv, parent, feature, s[e], v, kv)
        _add(acc, comp, buf)
    return rows


# -- the plan: monomials, their expansion, their places in the tensors ----------------------------


def _monomials(d: int, top: int) -> list[tuple[int, ...]]:
    """The exponent tuples of the monomials in ``d`` features of total degree up to ``top``, by
    total degree (the constant first)."""
    out = []
    for g in range(top + 1):
        for combo in itertools.combinations_with_replacement(range(d), g):
            out.append(tuple(combo.count(j) for j in range(d)))
    return out


def _expansion(mono: list[tuple[int, ...]]) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """The monomials ``(g, b, g - b)`` (their indices), ``b <= g`` componentwise, and the
    coefficients ``prod C(g_j, b_j)``, for :func:`_moved`."""
    index = {b: i for i, b in enumerate(mono)}
    pairs, coef = [], []
    for gi, g in enumerate(mono):
        for b in itertools.product(*(range(x + 1) for x in g)):
            pairs.append((gi, index[b], index[tuple(x - y for x, y in zip(g, b, strict=True))]))
            coef.append(float(math.prod(math.comb(x, y) for x, y in zip(g, b, strict=True))))
    return np.array(pairs, dtype=np.int64).reshape(-1, 3), np.array(coef, dtype=np.float64)


def _parents(mono: list[tuple[int, ...]]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """For each monomial but the constant, one of degree one less and the feature that
    multiplies it (the lowest feature of the monomial), for :func:`_fill`."""
    index = {b: i for i, b in enumerate(mono)}
    parent, feature = np.zeros(len(mono), dtype=np.int64), np.zeros(len(mono), dtype=np.int64)
    for i, b in enumerate(mono[1:], start=1):
        j = next(f for f, x in enumerate(b) if x)
        parent[i] = index[tuple(x - (f == j) for f, x in enumerate(b))]
        feature[i] = j
    return parent, feature


def _places(mono: list[tuple[int, ...]], d: int, j: int) -> NDArray[np.intp]:
    """For each entry of a ``(d,) * j`` tensor (C order), the monomial of its index counts."""
    index = {b: i for i, b in enumerate(mono)}
    return np.array([index[tuple(idx.count(f) for f in range(d))]
                     for idx in itertools.product(range(d), repeat=j)], dtype=np.intp)


def _centre(k: NDArray[np.float64], s: NDArray[np.float64]) -> tuple[NDArray[np.float64], ...]:
    """The keys' weighted mean per feature, and a power of two at or above their spread about it."""
    total = float(s.sum())
    d = k.shape[1]
    c, scale = np.zeros(d), np.ones(d)
    for j in range(d):  # column by column: reductions along axis 0 of a narrow array are slow
        col = k[:, j]
        # a plain product and pairwise sum: a BLAS dot wakes its threads (milliseconds on a busy machine)
        mean = float((s * col).sum()) / total if total > 0 else float(col.mean()) if col.size else 0.0
        c[j] = mean if math.isfinite(mean) else 0.0
        spread = max(float(col.max()) - c[j], c[j] - float(col.min())) if col.size else 0.0
        if spread > 0:
            scale[j] = math.ldexp(1.0, math.frexp(spread)[1])
    return c, scale


# -- the driver -----------------------------------------------------------------------------------


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
    """Exact partial sums of every query over every key for the constant kernel.

    Same arguments and result as :func:`nadaraya.backends.reference.partials` (``bandwidth``
    is not used: the constant kernel's weights do not depend on the distance); ``moments`` up
    to :data:`MAX_DEGREE`.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.kernels import get
    >>> x = np.array([[1.0], [2.0], [4.0]]); v = np.array([[3.0], [5.0], [4.0]])
    >>> p = partials(x, x, v, kernel=get("constant"), bandwidth=np.ones(1), exclude=np.arange(3))
    >>> p.finalize()[:, 0].tolist()
    [4.5, 3.5, 4.0]
    >>> p = partials(np.array([[0.0]]), x, v, kernel=get("constant"), bandwidth=np.ones(1), moments=1)
    >>> float(p.moments[0][0, 0]), float(p.moments[2][0, 0, 0])  # sum (k - q), sum (k - q) v
    (7.0, 29.0)
    """
    r = int(moments)  # checked against CAPABILITIES by nadaraya.backends.compute
    dtype = queries.dtype
    f64 = np.float64
    m, p = queries.shape[0], values.shape[1]
    d = keys.shape[1]
    k = np.asarray(keys, dtype=f64)
    s, log_scale = _weights(sample_weight, k.shape[0])
    centre, scale = _centre(k, s)
    mono = _monomials(d, 2 * r)
    kv = len(_monomials(d, r))
    parent, feature = _parents(mono)
    pairs, coef = _expansion(mono)
    unscale = np.prod(scale[None, :] ** np.array(mono, dtype=np.int64).reshape(-1, d), axis=1)
    q = np.ascontiguousarray(queries, dtype=f64)
    v = np.ascontiguousarray(values, dtype=f64)
    k = np.ascontiguousarray(k)
    inv = 1.0 / scale  # powers of two: exact (and -inv turns q - c into e = (c - q) / t)
    plan = (centre, inv, parent, feature)
    if exclude is None:
        rows = _sums(k, s, v, *plan, kv)[:, None]
        out = np.empty((rows.shape[0], m))
    else:
        ex = np.asarray(exclude, dtype=np.int64)
        out = rows = _left_out(k, s, v, *plan, kv, np.where((ex >= 0) & (ex < k.shape[0]), ex, -1))
    run_ranges(_moved, (q, centre, -inv, parent, feature, pairs, coef, unscale, kv, p, rows), m, (out,),
               grain=4 * BLOCK, work=float(m) * pairs.shape[0] * (1 + p))
    return _finish(out, mono, kv, d, p, r, log_scale, dtype)


def _weights(sample_weight: NDArray[np.floating] | None, n: int) -> tuple[NDArray[np.float64], float]:
    """The keys' weights scaled by a power of two (the largest in [1/2, 1)) and the log of the
    factor taken out; unscaled, with log 0, where no weight is positive."""
    if sample_weight is None:
        return np.ones(n), 0.0
    s = np.asarray(sample_weight, dtype=np.float64)
    if not (s.size and s.max() > 0):
        return s, 0.0
    top = int(np.frexp(s.max())[1])
    return np.ldexp(s, -top), top * math.log(2.0)


def local_fit(
    queries: NDArray[np.floating], keys: NDArray[np.floating], values: NDArray[np.floating], *,
    kernel: Kernel, degree: int, rcond: float, solve: Callable[[Partials], Any],
    sample_weight: NDArray[np.floating] | None = None, exclude: NDArray[np.integer] | None = None,
    slopes: bool = True,
) -> tuple[Partials, tuple[NDArray[np.float64], ...]] | None:
    """The local fits of ``degree`` 1 or 2 in one feature as the keys' one weighted polynomial
    (:mod:`nadaraya.backends._constant_fit`), without moments per query, computed and decided in
    float64 (float32 inputs are read as float64, and the results are float64: the caller rounds
    them once, as :func:`nadaraya.local.job.prepare` arranges for float32 calls).

    Each query's degree is the one the per-query rule gives (reciprocal condition of its scaled
    system at least ``rcond``, else the highest lower degree): decided here where the bounds of
    :mod:`nadaraya.backends._constant_fit` clear ``rcond``; elsewhere by ``solve`` (the rule
    itself, e.g. ``lambda parts: nadaraya.local.solve.solve(parts, degree, h)``, returning a
    :class:`~nadaraya.local.solve.LocalFit`) on those queries' partials with moments (:func:`partials`).
    The fits are the polynomial's at that degree (the rule's own where the keys' distribution
    is degenerate: no spread, or its mean far from its centre). Where the rule's moments in the
    keys' units overflow or underflow (keys spread over 1e100 at degree 2, 1e200 at degree 1),
    it falls back to a lower degree; the one polynomial, made about the keys' mean, does not.

    Returns ``(base, (estimate, slope, degree, inverse00))``: ``base`` the degree-0 partials of
    every query (as :func:`partials` gives them), the fits in the fields of ``LocalFit``
    (``slope`` (m, p) per unit of the feature). ``slopes=False``: slope and inverse00 are not
    computed (NaN, read-only), and ``base`` and ``degree`` may be read-only views. None where no
    key has weight (every query is the rule's).

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.kernels import get
    >>> from nadaraya.local.solve import solve
    >>> x = np.array([[0.0], [1.0], [2.0]]); y = np.array([[1.0], [3.0], [5.0]])
    >>> rule = lambda parts: solve(parts, 1, np.ones(1))
    >>> base, (est, slope, used, inv00) = local_fit(np.array([[4.0]]), x, y, kernel=get("constant"), degree=1,
    ...                                             rcond=1e-10, solve=rule)
    >>> float(est[0, 0]), float(slope[0, 0]), int(used[0])  # y = 1 + 2 x, at x = 4
    (9.0, 2.0, 1)
    """
    f64 = np.float64
    m, p = queries.shape[0], values.shape[1]
    k = np.ascontiguousarray(keys, dtype=f64)
    s, log_scale = _weights(sample_weight, k.shape[0])
    if not (s.size and s.max() > 0):
        return None
    if k.shape[0] == 0:
        return None
    centre, scale = _centre(k, s)
    c0, inv = float(centre[0]), 1.0 / float(scale[0])
    v = np.ascontiguousarray(values, dtype=f64)
    nk = 2 * degree + 1
    if exclude is None:
        mono = _monomials(1, 2 * degree)
        parent, feature = _parents(mono)
        rows = _sums(k, s, v, centre, 1.0 / scale, parent, feature, degree + 1)[None, :]
    else:
        ex = np.asarray(exclude, dtype=np.int64)
        if ex.size and ex.max() >= k.shape[0]:
            ex = np.where(ex < k.shape[0], ex, -1)
        if p == 1:
            rows = loo_rows1(k, s, v, c0, inv, degree, ex)
        else:
            rows = loo_rows((k[:, 0] - c0) * inv, s, v, degree, ex)
    q = np.ascontiguousarray(np.asarray(queries)[:, 0], dtype=f64)
    # the degrees in int8 (a tenth of the memory), widened below unless every query got ``degree``
    est, used = np.empty((m, p)), np.empty(m, dtype=np.int8)
    slope, inv00 = (np.empty((m, p)), np.empty(m)) if slopes else (np.empty((0, p)), np.empty(0))
    wide = 0.0  # decided in float64 (float32 moments would decide far queries on noise)
    run_ranges(fit_rows, (rows, q, c0, degree, float(rcond), wide, inv), m, (est, slope, used, inv00),
               grain=4 * BLOCK, work=60.0 * m)
    low, high = (int(used.min()), int(used.max())) if m else (degree, degree)
    if low == high == degree and not slopes:
        used = np.broadcast_to(np.int64(degree), (m,))
    else:
        used = used.astype(np.int64)
    rest = np.flatnonzero(used <= -2) if low <= -2 else np.zeros(0, dtype=np.intp)
    if rest.size:
        sw = None if sample_weight is None else np.asarray(sample_weight, dtype=f64)
        parts = partials(np.asarray(queries[rest], dtype=f64), k, v, kernel=kernel, bandwidth=np.ones(1),
                         sample_weight=sw, moments=degree,
                         exclude=None if exclude is None else np.asarray(exclude)[rest])
        sub = solve(parts)
        degs = np.asarray(sub.degree, dtype=np.int64)
        redo = (used[rest] == -2) & (degs >= 0)  # a regular distribution: its polynomial at the rule's degree
        used[rest], est[rest] = degs, sub.estimate
        if slopes:
            slope[rest], inv00[rest] = sub.slope[:, 0], sub.inverse00
        if redo.any():
            at_degree(rows, q, c0, degree, inv, rest[redo], degs[redo], est, slope, inv00)
    if not slopes:
        slope, inv00 = np.broadcast_to(np.nan, (m, p)), np.broadcast_to(np.nan, (m,))
    if rows.shape[0] == 1:
        weight = np.broadcast_to(rows[0, 0], (m,))
        value = np.broadcast_to(rows[:, nk:nk + p], (m, p))
    else:
        weight, value = rows[:, 0], rows[:, nk:nk + p]
    if slopes:
        weight, value = np.ascontiguousarray(weight), np.ascontiguousarray(value)
    if not slopes and m and weight.min() > 0:
        shift = np.broadcast_to(log_scale, (m,))
    else:
        shift = np.where(weight > 0, log_scale, -np.inf)
    return Partials(shift, weight, value), (est, slope, used, inv00)


@numba.njit(cache=True, nogil=True)
def _narrow_shift(weight, shift):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Per row, the weight's binary exponent ``e`` moved into the shift (``wide = shift + e log 2``,
    where the weight is positive), that rounded to float32, and the factor that carries the
    rounding into the sums, ``exp(wide - float32(wide)) 2^-e`` (``2^-e`` where the shift is not
    finite in float32); one pass, a row whose shift and binade are the last row's reusing its
    results (the constant kernel's rows mostly share both)."""
    m = weight.size
    shift32 = np.empty(m, dtype=np.float32)
    factor = np.empty(m)
    ln2 = math.log(2.0)
    lo, hi, last, s32, f = 1.0, 0.0, 0.0, np.float32(0.0), 1.0  # the last binade [lo, hi) and shift
    for i in range(m):
        w = weight[i]
        if not (lo <= w < hi and shift[i] == last):
            e = math.frexp(w)[1] if w > 0 else 0
            lo, hi = (math.ldexp(0.5, e), math.ldexp(1.0, e)) if w > 0 else (1.0, 0.0)
            last = shift[i]
            wide = last + e * ln2
            s32 = np.float32(wide)
            gap = wide - np.float64(s32)
            f = math.ldexp(math.exp(gap if math.isfinite(gap) else 0.0), -e)
        shift32[i] = s32
        factor[i] = f
    return shift32, factor


def _finish(out: NDArray[np.float64], mono: list[tuple[int, ...]], kv: int, d: int, p: int, r: int,
            log_scale: float, dtype: np.dtype) -> Partials:
    """The partials from each query's monomial moments (``out``, (c, m)): the shift, the tensors,
    ``dtype``."""
    nk, m = len(mono), out.shape[1]
    weight = out[0]
    shift = np.where(weight > 0, log_scale, -np.inf)
    value = out[nk:nk + p].T

    def rows(a: NDArray[np.float64], j: int) -> NDArray[np.float64]:
        """The lines of ``a`` of a ``(d,) * j`` tensor's entries (a view in 1-D: no copy)."""
        at = _places(mono, d, j)
        return a[at[0]:at[0] + 1] if at.size == 1 else a[at]

    extra = [rows(out, j).T.reshape((m,) + (d,) * j) for j in range(1, 2 * r + 1)]
    mv = out[nk:].reshape(kv, p, m)
    extra += [rows(mv, j).transpose(2, 0, 1).reshape((m,) + (d,) * j + (p,)) for j in range(1, r + 1)]
    if dtype != np.float64:
        # move the weight's binary exponent into the shift, exactly; round the shift, carry its
        # rounding into the sums (in float64), then round the sums once
        shift32, factor = _narrow_shift(weight, shift)

        def rounded(x: NDArray[np.float64]) -> NDArray[np.floating]:
            return (x * factor.reshape((m,) + (1,) * (x.ndim - 1))).astype(dtype)

        return Partials(shift32, rounded(weight), rounded(value), tuple(rounded(x) for x in extra))
    return Partials(np.ascontiguousarray(shift), np.ascontiguousarray(weight), np.ascontiguousarray(value),
                    tuple(np.ascontiguousarray(x) for x in extra))
