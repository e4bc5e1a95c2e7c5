"""The logistic backend: exact logistic-kernel sums in 1-D, a near window plus Laplacian series for the tails.

The logistic weight ``K(u) = e^-|u| / (1 + e^-|u|)^2`` has heavy tails: every key weighs, and
the fused loop visits all ``m n`` pairs. This backend splits each query's keys at ``|u| = T``:

- **near** (``|u| <= T``): the keys of the window ``[q - T h, q + T h]`` of the sorted keys,
  summed one by one (an ``exp`` per block of keys, :func:`nadaraya.backends._logistic_moments.near`);
- **far** (``|u| > T``): the series ``K(u) = sum_{k >= 1} (-1)^(k+1) k e^(-k |u|)``, whose
  ``k``-th term is a Laplacian weight at bandwidth ``h / k``. The far-left sum of the ``k``-th
  term is ``k e^(-k x) S_k(a)``, with ``a`` the last key left of ``q - T h``, ``x = (q - k_a) / h``
  and ``S_k(a) = sum_{k_j <= k_a} e^(-k (k_a - k_j) / h) s_j y_j`` a one-sided running sum,
  carried key by key with factors at most 1 (nothing overflows, nothing is subtracted) while
  the sorted queries sweep the sorted keys; the far-right sum is the same on the mirrored keys.

**The cut.** The series alternates, and its terms from the ``(K+1)``-th on decrease in size
where ``e^-|u| <= (K + 1) / (K + 2)`` (at ``|u| >= 0.5`` for every ``K``; at the narrowest
``T``, 0.25, for ``K >= 3``, and the cut takes 193 there), so cutting it
after ``K`` terms leaves an error under the first term dropped, ``(K + 1) e^(-(K+1)|u|)``;
against ``K(u) >= e^-|u| / (1 + e^-|u|)^2`` that is a relative error under
``(K + 1) e^(-K|u|) (1 + e^-|u|)^2``. Each query takes the fewest terms that hold this under
:data:`CUT` (``2^-60``) at its nearest far key on each side (``x``; every farther key has a
larger ``|u|`` and a smaller error): every far key's weight is then within ``2^-60`` relative
of its exact weight, each positive (the standard of the truncated Gaussian windows).

**Log domain.** Each query's sums are kept relative to its nearest key (the nearest key that is
not left out): ``shift = -d0``, ``d0`` that key's distance in bandwidths; every term is
``e^(d0 - |u|)`` times a factor at most 1, so a query a million bandwidths from every key gets
its nearest keys' weights, never 0/0 (as the fused and reference backends do). Keys of zero
sample weight are dropped first; sample weights are scaled by a power of two (exact).

**Leave-one-out** (``exclude``): the left-out key is skipped in its query's near window (it is
at ``|u| = 0`` for leave-one-out, always inside); a query whose left-out key lies among its far
keys (another ``exclude``) is summed key by key over all keys with that key masked. Nothing is
subtracted.

The width ``T`` is chosen by cost (:func:`width`): the near window costs about ``2 T`` keys
per bandwidth per query, the far series about ``2 K`` terms per key and query, ``K`` near
``42 / T``. Complexity O(n log n + m log m) to sort, O(m * keys in 2 T h) for the windows and
O((n + m) K) for the series; the windows' sums run on :func:`nadaraya._support.jit.run_ranges`'s
threads, in ranges of queries. float32 inputs are computed in float64 and rounded once at the
end, the weight's binary exponent moved into the shift first (as the laplace backend does).
Local fits (``moments`` up to 2): the same split, the moments carried as in
:mod:`nadaraya.backends._logistic_moments` (an ``exp`` per block of near keys, the series' factors
as powers, every term's moments moved in one vector loop per key, one move per query and side).

Examples
--------
>>> import numpy as np
>>> from nadaraya.kernels import get
>>> from nadaraya.backends import logistic, reference
>>> rng = np.random.default_rng(0)
>>> x = rng.uniform(size=(300, 1)); v = rng.normal(size=(300, 2))
>>> a = logistic.partials(x, x, v, kernel=get("logistic"), bandwidth=np.array([0.01]))
>>> b = reference.partials(x, x, v, kernel=get("logistic"), bandwidth=np.array([0.01]))
>>> bool(np.allclose(a.finalize(), b.finalize(), rtol=1e-12, atol=0))
True
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numpy.typing import NDArray

from nadaraya._support.jit import run_ranges
from nadaraya.backends import _logistic_moments as _moments
from nadaraya.backends._registry import Choice
from nadaraya.backends._sorted import sorted_exclude, sorted_order, sorted_weighted
from nadaraya.kernels import Kernel
from nadaraya.partials import Partials

__all__ = ["CUT", "MAX_DEGREE", "NS", "T_RANGE", "choice", "partials", "supports", "terms", "width"]

#: the largest local polynomial degree (``moments=``) this backend computes
MAX_DEGREE = 2
#: the relative error each far key's weight may carry from the cut series
CUT = 2.0**-60
#: the narrowest and widest near window, in bandwidths each side: below 0.25 the series needs
#: over 193 terms and its alternating terms cancel more (their sizes add up to
#: ``coth(|u| / 2)^2 K(u)``, 65 K(u) at 0.25)
T_RANGE = (0.25, 8.0)
#: below this scaled gap ``x`` a running sum's factor ``exp(-x)`` is applied as ``S + expm1(-x) S``
SMALL = _moments.SMALL


def supports(kernel: Kernel, d: int) -> bool:
    """The logistic kernel in one feature.

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> supports(get("logistic"), 1), supports(get("logistic"), 2), supports(get("gaussian"), 1)
    (True, False, False)
    """
    return kernel.name == "logistic" and d == 1


def terms(x: float) -> int:
    """The fewest terms ``K`` of the series whose cut error ``(K + 1) e^(-K x) (1 + e^-x)^2``,
    relative to the weight of a key ``x`` bandwidths away (and so of every key farther), is at
    most :data:`CUT`; ``x`` at least 0.25, where the terms dropped decrease in size.

    Examples
    --------
    >>> terms(3.0), terms(0.5), terms(40.0)
    (15, 95, 2)
    """
    if not x >= 0.25:
        raise ValueError(f"the series is cut only at x >= 0.25 bandwidths; got x={x!r}")
    k = 1
    while math.log(k + 1) - k * x + 2.0 * math.log1p(math.exp(-x)) > math.log(CUT):
        k += 1
    assert math.exp(-x) <= (k + 1) / (k + 2)  # the terms dropped decrease
    return k


def width(n: int, h: float, span: float) -> float:
    """The near window's half width ``T`` in bandwidths for ``n`` keys spread over ``span``:
    where the window's pairs (``2 T`` times the keys per bandwidth, an ``exp`` each) and the
    series' terms (about ``2 * 42 / T``, a few multiplications each) cost about the same,
    within :data:`T_RANGE`.

    Examples
    --------
    >>> width(200_000, 0.05, 5.0), width(100, 1.0, 100.0)
    (0.25, 5.477225575051661)
    """
    per = n * h / span if span > 0 else float(n)
    return float(min(max(math.sqrt(30.0 / max(per, 1e-300)), T_RANGE[0]), T_RANGE[1]))


@numba.njit(cache=True, nogil=True)
def _carry(state, row, g):  # type: ignore[no-untyped-def]  # pragma: no cover
    """In place: ``state[k] = e^(-(k + 1) g) state[k] + row`` for every term ``k``. The factors
    come without an ``exp`` each: ``m_k = e^(-k g) - 1`` by ``m_(k+1) = m_k + m_1 + m_k m_1``
    (all of one sign, applied as ``S + m S`` while ``k g`` is under :data:`SMALL`, where a
    factor next to 1 would round to an ulp of 1), then ``f_(k+1) = f_k e^-g``."""
    kmax, c = state.shape
    m1 = math.expm1(-g)
    f1 = math.exp(-g)  # not 1 + m1, which rounds e^-g to 0 past a gap of about 37
    mk = m1
    fk = 0.0
    small = True
    for k in range(kmax):
        if small and (k + 1) * g >= SMALL:
            small = False
            fk = math.exp(-(k + 1) * g)
        if small:
            for t in range(c):
                state[k, t] += mk * state[k, t] + row[t]
            mk = mk + m1 + mk * m1
        else:
            for t in range(c):
                state[k, t] = fk * state[k, t] + row[t]
            fk *= f1


@numba.njit(cache=True, nogil=True)
def _far_side(ks, terms_, qs, lo, d0, inv_h, kmax, lead, out):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Add to ``out[i]`` the series' sums over the keys ``0 .. lo[i] - 1`` of each query (their
    far side), queries in the order of ``qs`` with ``lo`` nondecreasing. ``lead``: the cut's
    terms need ``K`` with ``log(K+1) - K x + 2 log1p(e^-x) <= log CUT``, solved per query from
    ``K >= (lead + 2 log1p(e^-x)) / x`` (``lead = -log CUT + log(kmax + 1)``)."""
    c = terms_.shape[1]
    state = np.zeros((kmax, c))
    j = 0
    for i in range(qs.size):
        while j < lo[i]:
            if j > 0:
                _carry(state, terms_[j], (ks[j] - ks[j - 1]) * inv_h)
            else:
                for k in range(kmax):
                    for t in range(c):
                        state[k, t] = terms_[0, t]
            j += 1
        if lo[i] == 0 or d0[i] == np.inf:
            continue
        x = (qs[i] - ks[lo[i] - 1]) * inv_h
        kq = _moments.cut_terms(x, lead, kmax)
        coef = math.exp(-(x - d0[i]))  # e^(d0 - x) <= 1: the nearest key's distance d0 <= x
        b = math.exp(-x)
        for k in range(kq):
            if coef == 0.0:
                break
            sgn = (k + 1) * (1.0 if k % 2 == 0 else -1.0)
            for t in range(c):
                out[i, t] += sgn * coef * state[k, t]
            coef *= b


@numba.njit(cache=True, nogil=True)
def _blocks(ks, inv_h):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Blocks of sorted keys at most one bandwidth wide: each key's block anchor (its first key)
    and ``e^(+-(k_j - k_anchor) / h)``, so that a window's weights take an ``exp`` per block."""
    n = ks.size
    anchor = np.empty(n, dtype=np.int64)
    up = np.empty(n)
    down = np.empty(n)
    a = 0
    for j in range(n):
        g = (ks[j] - ks[a]) * inv_h
        if g > 1.0:
            a = j
            g = 0.0
        anchor[j] = a
        up[j] = math.exp(g)
        down[j] = math.exp(-g)
    return anchor, up, down


#: the cost model, nanoseconds on the shared 2-core machine (measured 2026-12 at n = m = 2e5,
#: keys U(0, 1), h = 0.05 to 0.002, in one run): per pair of a near window, per key or query and
#: series term (each side), per point sorted, and per pair of the fused loop over every pair
NS = {"near_pair": 5.0, "term": 2.0, "point": 60.0, "fused_pair": 30.0}


def choice(queries: NDArray[np.floating], keys: NDArray[np.floating],
           bandwidth: NDArray[np.floating], moments: int = 0) -> Choice | None:
    """This backend for the logistic kernel in 1-D where its modelled cost (:data:`NS`: the near
    windows' pairs counted as for keys spread evenly over their range, the series' terms) is
    under the fused loop's over all pairs; ``None`` otherwise. With the ``moments`` of a local
    fit of degree ``r`` (up to :data:`MAX_DEGREE`) the near pairs and the series' terms cost
    ``1 + r / 10`` times as much (measured: the weights dominate, the powers of ``u`` and the
    moves run vectorised), the fused loop's pairs ``1 + r`` times.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.linspace(0.0, 1.0, 20000)[:, None]
    >>> choice(x, x, np.array([0.01])).name
    'logistic'
    """
    m, n = queries.shape[0], keys.shape[0]
    h = float(np.asarray(bandwidth, dtype=np.float64).reshape(-1)[0])
    if n == 0 or m == 0:
        return None
    k = np.asarray(keys[:, 0], dtype=np.float64)
    span = float(k.max() - k.min())
    t = width(n, h, span)
    share = 1.0 if span <= 0 else min(1.0, 2.0 * t * h / span)
    near = float(m) * n * share
    r = int(moments)
    if r > MAX_DEGREE:
        return None
    cost = ((near * NS["near_pair"] + 2.0 * terms(t) * (n + m) * NS["term"]) * (1 + r / 10)
            + (n + m) * NS["point"])
    exact = float(m) * n * NS["fused_pair"] * (1 + r)
    if cost >= exact:
        return None
    fit = f" with the moments of a degree-{r} local fit" if r else ""
    return Choice("logistic", (
        f"logistic kernel in d=1{fit}: exact sums over each query's keys within {t:.2g} bandwidths "
        f"(about {near / m:.0f} of {n} keys per query), the tails beyond by {terms(t)} terms of the "
        f"series sum_k (-1)^(k+1) k e^(-k|u|) as running sums over the sorted keys, cut where each far "
        f"weight is within 2^-60 of its own; about {exact / cost:.0f}x less work than all pairs"))


def _nearest(ks: NDArray[np.float64], qs: NDArray[np.float64], ex: NDArray[np.int64],
             inv_h: float) -> NDArray[np.float64]:
    """Each query's distance in bandwidths to its nearest key that is not left out (inf: none)."""
    n = ks.size
    left = np.searchsorted(ks, qs, side="right").astype(np.int64) - 1
    right = left + 1
    left = np.where(left == ex, left - 1, left)
    right = np.where(right == ex, right + 1, right)
    with np.errstate(invalid="ignore"):
        dl = np.where(left >= 0, (qs - ks[np.clip(left, 0, max(n - 1, 0))]) * inv_h, np.inf) if n else \
            np.full(qs.size, np.inf)
        dr = np.where(right < n, (ks[np.clip(right, 0, max(n - 1, 0))] - qs) * inv_h, np.inf) if n else \
            np.full(qs.size, np.inf)
    return np.minimum(dl, dr)


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
    half_width: float | None = None,
) -> Partials:
    """Exact partial sums of every query over every key for the logistic kernel in 1-D.

    Same arguments and result as :func:`nadaraya.backends.reference.partials` (``moments`` up
    to :data:`MAX_DEGREE`); ``half_width``: the near window's ``T`` in bandwidths (default :func:`width`; any
    value in :data:`T_RANGE` gives the same sums).

    Raises
    ------
    ValueError
        For ``moments`` above :data:`MAX_DEGREE` or ``half_width`` outside :data:`T_RANGE`.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.kernels import get
    >>> x = np.array([[1.0], [2.0], [3.0]]); v = np.array([[3.0], [5.0], [4.0]])
    >>> p = partials(np.array([[2.5], [1e9]]), x, v, kernel=get("logistic"), bandwidth=np.ones(1))
    >>> p.finalize()[:, 0].round(4).tolist()  # far away: weights e^0, e^-1, e^-2 of 4, 5, 3
    [4.1387, 4.1547]
    >>> float(p.shift[1]) == -(1e9 - 3.0)  # the distance to the nearest key, in the log domain
    True
    """
    r = int(moments)
    if not 0 <= r <= MAX_DEGREE:
        raise ValueError(f"the logistic backend computes moments up to {MAX_DEGREE}; got moments={moments!r}")
    nm = 2 * r + 1
    dtype = queries.dtype
    f64 = np.float64
    m, n, p = queries.shape[0], keys.shape[0], values.shape[1]
    h = float(np.asarray(bandwidth, dtype=f64).reshape(-1)[0])
    inv_h = 1.0 / h
    qs = np.asarray(queries[:, 0], dtype=f64)
    k = np.asarray(keys[:, 0], dtype=f64)
    kept, s, log_scale = sorted_weighted(k, sample_weight)
    ks = np.ascontiguousarray(k[kept])
    ne = ks.size
    rows = np.zeros((ne, nm + (r + 1) * p))
    rows[:, 0] = s
    rows[:, nm:nm + p] = s[:, None] * np.asarray(values, dtype=f64)[kept]
    if half_width is None:
        span = float(ks[-1] - ks[0]) if ne else 0.0
        half_width = width(ne, h, span)
    if not T_RANGE[0] <= half_width <= T_RANGE[1]:
        raise ValueError(f"half_width must lie in {T_RANGE}; got half_width={half_width!r}")
    qorder = sorted_order(qs)
    qs = np.ascontiguousarray(qs[qorder])
    ex = sorted_exclude(exclude, n, kept, m)[qorder]
    d0 = _nearest(ks, qs, ex, inv_h)
    lo = np.searchsorted(ks, qs - half_width * h, side="left").astype(np.int64)
    hi = np.searchsorted(ks, qs + half_width * h, side="right").astype(np.int64)
    big = (ex >= 0) & ((ex < lo) | (ex >= hi))
    out = _sums(ks, rows, qs, lo, hi, ex, d0, big, inv_h, half_width, r, p)
    out[qorder] = out.copy()
    shift = np.empty(m)
    with np.errstate(invalid="ignore"):
        shift[qorder] = np.where(np.isfinite(d0), -d0 + log_scale, -np.inf)
    weight, value = out[:, 0], out[:, nm:nm + p]
    mom: tuple[NDArray[np.floating], ...] = (out[:, 1:nm], out[:, nm + p:])
    if dtype != f64:
        # move the weight's binary exponent into the shift, exactly, before rounding
        mant, expo = np.frexp(weight)
        shift = np.where(weight > 0, shift + expo * math.log(2.0), shift)
        value = np.ldexp(value, -expo[:, None])
        mom = tuple(np.ldexp(x, -expo[:, None]) for x in mom)
        weight = mant
        with np.errstate(over="ignore"):
            shift = shift.astype(dtype)
        weight, value = weight.astype(dtype), value.astype(dtype)
        mom = tuple(x.astype(dtype) for x in mom)
    extra = tuple(mom[0][:, j - 1].reshape((m,) + (1,) * j) for j in range(1, nm)) + tuple(
        mom[1][:, (j - 1) * p:j * p].reshape((m,) + (1,) * j + (p,)) for j in range(1, r + 1))
    return Partials(np.ascontiguousarray(shift), np.ascontiguousarray(weight), np.ascontiguousarray(value),
                    tuple(np.ascontiguousarray(x) for x in extra))


def _sums(ks, rows, qs, lo, hi, ex, d0, big, inv_h, half_width, r, p):  # type: ignore[no-untyped-def]
    """The state rows of the sorted queries: the tails' series on both sides, then the near
    windows (every key for the queries in ``big``)."""
    m, ne, c = qs.size, ks.size, rows.shape[1]
    nm = 2 * r + 1
    out = np.zeros((m, c))
    if not ne:
        return out
    kmax = terms(half_width)
    lead = -math.log(CUT) + math.log(kmax + 1)
    s = np.ascontiguousarray(rows[:, 0])
    sv = np.ascontiguousarray(rows[:, nm:nm + p].T)
    mirrored = np.zeros((m, c))
    flip = np.ascontiguousarray
    sides = ((ks, rows, s, sv, qs, lo, d0, out),
             (flip(-ks[::-1]), rows if r else flip(rows[::-1]), flip(s[::-1]), flip(sv[:, ::-1]),
              flip(-qs[::-1]), flip(ne - hi[::-1]), flip(d0[::-1]), mirrored))
    for k_, rows_, s_, sv_, q_, lo_, d_, o_ in sides:
        if r:
            _moments.far_side(k_, s_, sv_, q_, lo_, d_, inv_h, kmax, lead, r, p, o_)
        else:
            _far_side(k_, rows_, q_, lo_, d_, inv_h, kmax, lead, o_)
    power = np.array([t if t < nm else (t - nm) // p for t in range(c)])
    out += np.where(power % 2 == 1, -1.0, 1.0) * mirrored[::-1]  # u = k - q changes sign
    out[big] = 0.0
    work = (float(np.sum(hi - lo)) + float(np.count_nonzero(big)) * ne) * (c + 3)
    mid = np.searchsorted(ks, qs, side="right").astype(np.int64)
    blocks = _blocks(ks, inv_h)
    run_ranges(_moments.near, (ks, *blocks, s, sv, qs, lo, mid, hi, ex, d0, big, inv_h, r, p), m, (out,),
               work=work)
    return out

