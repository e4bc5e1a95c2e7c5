"""Sample weights over many decades in the 1-D truncated backend: bands of keys by weight, merged.

The dense cells (:mod:`nadaraya.backends._truncated_cells`) take sample weights whose ``log(s_max
/ s_min)`` is at most ``CELLS_SPREAD``: each key's factor carries ``s / s_max``, and their ``L``
is widened by the spread. Wider spreads are split here into **bands** of keys by the logarithm
of their weight, ``B = ceil(spread / (CELLS_SPREAD - 1/2))`` bands of equal width ``w = spread /
B`` (:func:`split`), each within the cells' spread; every band is summed on its own (its dense
cells, and key by key where they do not serve) and the bands' partials are merged exactly, the
one with the smaller shift rescaled by ``exp(shift_b - shift)`` (:func:`merge_rows`, as
:func:`nadaraya.partials.merge`).

**The guarantee.** Every band is summed with the ``L`` of *all* the kept keys, ``L = 60 ln 2 +
ln n`` (not of its own ``n_b``): a key it skips weighs less than ``2^-60 / n`` of the band's
largest term, which is at most the query's largest term ``M``. A query also skips a whole band
where the band's largest possible term is below ``2^-60 / n`` of a term it holds
(:func:`bounds`): for each band, the two nearest keys on each side of the query (the left-out key
of leave-one-out never among them) give a lower bound of its largest term, and the nearest key's
distance ``u_b`` an upper bound ``log s_max,b - u_b^2 / 2`` of every term of the band; a band
whose upper bound is below the largest lower bound (over all bands) minus ``L + 1`` is skipped.
Every skipped key, in a skipped band or skipped inside one, weighs less than ``2^-60 / n`` of
``M``, so together they weigh less than ``2^-60`` of it, as the module text of
:mod:`nadaraya.backends.truncated` states for every query.

**Cost.** A query takes the bands within about ``L + w`` of its heaviest near term: at most
``2 + (L + 1) / w`` bands whatever the spread (three at ``n = 2e5``; fewer where the spread is
narrower, or the heavy keys are far), so the cost grows with the bands a query takes, not with
the spread; :func:`shares` gives the cost model the bands' shares of the keys.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numba
import numpy as np
from numpy.typing import NDArray

from nadaraya.backends._sorted import sorted_exclude, sorted_order
from nadaraya.backends._truncated_grid import log_ratio
from nadaraya.backends._truncated_sums import bound, gallop

__all__ = ["banded", "bounds", "merge_rows", "shares", "split"]


def split(ls: NDArray[np.float64], spread: float, limit: float) -> tuple[NDArray[np.int64], int]:
    """Each key's band (0 the heaviest) by its log weight ``ls``, and the number of bands: equal
    bands of ``log`` width at most ``limit - 1/2`` over ``spread = max(ls) - min(ls)``.

    Examples
    --------
    >>> import numpy as np
    >>> band, count = split(np.log(np.array([1.0, 1e-20, 1e-5, 1e-40])), 40 * np.log(10.0), 30.0)
    >>> band.tolist(), count
    ([0, 1, 0, 3], 4)
    """
    count = max(1, math.ceil(spread / (limit - 0.5)))
    width = spread / count
    top = float(ls.max()) if ls.size else 0.0
    band = np.floor((top - ls) / width).astype(np.int64) if width > 0 else np.zeros(ls.size, dtype=np.int64)
    return np.minimum(band, count - 1), count


@numba.njit(cache=True, nogil=True)
def bounds(ks, ls, ls_max, qs, eb, el, band, inv_h, lower, upper):  # type: ignore[no-untyped-def]  # pragma: no cover
    """For the sorted keys ``ks`` of the band ``band`` (log weights ``ls``, their largest ``ls_max``)
    and the queries ``qs`` (best in sorted order: each search starts at the previous position), raise
    ``lower`` to the largest log weight of the two nearest keys on each side and set ``upper`` to
    ``ls_max - u_near^2 / 2`` (``-inf`` where the band holds no other key); query ``i`` leaves out
    the band's key ``el[i]`` where ``eb[i]`` is this band (none where ``eb`` is empty)."""
    n = ks.size
    pos = 0
    for i in range(qs.size):
        q = qs[i]
        e = el[i] if eb.size and eb[i] == band else -1
        pos = gallop(ks, q, min(pos, n - 1), False)
        best, u2min = bound(ks, ls, q, e, inv_h, pos)  # the two nearest keys on each side
        lower[i] = max(lower[i], best)
        upper[i] = ls_max - 0.5 * u2min


@numba.njit(cache=True, nogil=True)
def merge_rows(shift, out, at, sub_shift, sub_out):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Merge the rows ``sub_out`` under ``sub_shift`` into the rows ``at`` of ``out`` under ``shift``
    (in place): the larger shift stays, the other side is rescaled by ``exp(its shift - it)``
    (``-inf`` on both sides: nothing seen, zero rows), as :func:`nadaraya.partials.merge` does.

    Examples
    --------
    >>> import numpy as np
    >>> shift, out = np.array([0.0, -np.inf]), np.array([[1.0, 2.0], [0.0, 0.0]])
    >>> at, sub = np.array([0, 1]), np.array([[1.0, 1.0], [0.0, 0.0]])
    >>> merge_rows(shift, out, at, np.array([np.log(2.0), -np.inf]), sub)
    >>> shift.round(6).tolist(), out.round(6).tolist()
    ([0.693147, -inf], [[1.5, 2.0], [0.0, 0.0]])
    """
    for i in range(at.size):
        o = at[i]
        old, sub = shift[o], sub_shift[i]
        if sub == -np.inf:
            continue
        if old == -np.inf:
            shift[o] = sub
            for c in range(out.shape[1]):
                out[o, c] = sub_out[i, c]
            continue
        if sub > old:
            keep = math.exp(old - sub)
            shift[o] = sub
            for c in range(out.shape[1]):
                out[o, c] = out[o, c] * keep + sub_out[i, c]
        else:
            add = math.exp(sub - old)
            for c in range(out.shape[1]):
                out[o, c] += sub_out[i, c] * add

def banded(queries: NDArray[np.floating], keys: NDArray[np.floating], values: NDArray[np.floating],
           sample_weight: NDArray[np.floating], exclude: NDArray[np.integer] | None, h: float, r: int,
           limit: float, rows_of: Callable[..., tuple[NDArray[np.float64], NDArray[np.float64]]],
           order_of: Callable[..., NDArray[np.integer]]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Every query's shift and row (weight, values, the moments of degree ``r``; float64, the
    queries' order) over the bands of keys by weight (:func:`split` with ``limit``), each band's
    from ``rows_of(queries, keys, values, sample_weights, left-out keys, L)`` (1-D arrays, the keys
    sorted, ``L`` that of all kept keys), for the queries that do not skip it (:func:`bounds`),
    merged (:func:`merge_rows`); ``order_of(queries, lo, hi)``: keys whose stable order visits the
    queries in about sorted order."""
    f64 = np.float64
    m, n, p = queries.shape[0], keys.shape[0], values.shape[1]
    k = np.asarray(keys[:, 0], dtype=f64)
    sw = np.asarray(sample_weight, dtype=f64)
    pos = np.nonzero(sw > 0)[0]
    kept = pos[sorted_order(k[pos])]
    ks, ls, vals = k[kept], np.log(sw[kept]), np.asarray(values, dtype=f64)[kept]
    ex = sorted_exclude(exclude, n, kept, m)
    qs = np.asarray(queries[:, 0], dtype=f64)
    big_l = log_ratio(kept.size)
    band, count = split(ls, float(ls.max() - ls.min()), limit)
    # the bands' bounds visit the queries in the order of their buckets (each search from the previous
    # position), and so do their rows
    order = np.argsort(order_of(qs, float(ks[0]), float(ks[-1])), kind="stable")
    qo = np.ascontiguousarray(qs[order])
    members = [np.flatnonzero(band == b) for b in range(count)]
    where = np.full(kept.size, -1, dtype=np.int64)
    for idx in members:
        where[idx] = np.arange(idx.size)
    eo = ex[order]
    eb, el = (band[np.maximum(eo, 0)], where[np.maximum(eo, 0)]) if exclude is not None else (eo[:0], eo[:0])
    eb = np.where(eo >= 0, eb, -1) if exclude is not None else eb
    lower, upper = np.full(m, -np.inf), np.empty(m)
    bound = [(np.ascontiguousarray(ks[idx]), np.ascontiguousarray(ls[idx]),
              float(ls[idx].max()) if idx.size else 0.0) for idx in members]
    for b, idx in enumerate(members):
        if idx.size:
            bounds(*bound[b], qo, eb, el, b, 1.0 / h, lower, upper)
    shift, out = np.full(m, -np.inf), np.zeros((m, 1 + p + 2 * r + r * p))
    for b, idx in enumerate(members):
        if idx.size == 0:
            continue
        bounds(*bound[b], qo, eb, el, b, 1.0 / h, np.full(m, -np.inf), upper)
        if r:  # the moments' terms carry |u|^(2r) (bandwidths), as the cells' and windows' reach does:
            # the band's largest w |u|^(2r) is below exp(ls_max_b + max over u >= u_near of
            # (2r ln u - u^2 / 2)), the maximum at u^2 = 2r where the nearest key is nearer
            u2 = np.maximum(2.0 * (bound[b][2] - upper), 2.0 * r)
            with np.errstate(invalid="ignore"):  # no key of the band (u2 = inf): skipped as before
                upper = np.where(np.isfinite(u2), bound[b][2] + r * np.log(u2) - 0.5 * u2, upper)
        # every term of the band is below 2^-60 / n of one the query holds: skipped (one nat of margin)
        take = order[np.flatnonzero(upper >= lower - big_l - 1.0)]
        if take.size == 0:
            continue
        e = ex[take]
        ex_b = np.where((e >= 0) & (band[np.maximum(e, 0)] == b), where[np.maximum(e, 0)], -1)
        merge_rows(shift, out, take, *rows_of(qs[take], bound[b][0], vals[idx], sw[kept][idx], ex_b, big_l))
    return shift, out


def shares(sample_weight: NDArray[np.floating] | None, limit: float) -> tuple[tuple[float, float], ...]:
    """For the cost model, the bands a query may take (the heaviest first, at most ``2 + (L + 1) /
    w``; one within ``limit`` of log spread), each as ``(share, reach)``: its share of the keys of
    positive weight, and how much wider its cells' and windows' reach is than without sample
    weights, ``sqrt(1 + spread_b / L)`` (their ``L`` widened by its own log spread). A band's work is priced
    as ``reach`` times the least of the cells' work and its share of the windows' pairs.

    Examples
    --------
    >>> import numpy as np
    >>> shares(None, 128.0), shares(np.array([1.0, 1.0, 0.0]), 128.0)
    (((1.0, 1.0),), ((1.0, 1.0),))
    >>> [(a, round(b, 3)) for a, b in shares(np.r_[1e-20, np.ones(9)], 128.0)]  # one band, 46 of log wide
    [(1.0, 1.432)]
    >>> len(shares(np.exp(np.linspace(0.0, 690.0, 1000)), 128.0))  # 6 bands of 115, 2 taken
    2
    """
    if sample_weight is None:
        return ((1.0, 1.0),)
    sw = np.asarray(sample_weight, dtype=np.float64)
    ls = np.log(sw[sw > 0])
    if ls.size == 0:
        return ((1.0, 1.0),)
    big_l = log_ratio(ls.size)
    spread = float(ls.max() - ls.min())
    if spread <= limit:
        return ((1.0, math.sqrt(1.0 + spread / big_l)),)
    band, count = split(ls, spread, limit)
    width = spread / count
    out = []
    for b in range(min(count, 2 + math.floor((big_l + 1.0) / width))):
        part = ls[band == b]
        wide = float(part.max() - part.min()) if part.size else 0.0
        out.append((part.size / ls.size, math.sqrt(1.0 + wide / big_l)))
    return tuple(out)
