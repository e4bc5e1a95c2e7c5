"""Exact 1-D Gaussian sums over cells: a pair of dense cells shares one series, short enough to be exact.

The truncated backend (:mod:`nadaraya.backends.truncated`) sums each query's window key by key:
one exponential per pair, 4 000 pairs per query at a million keys on ``[0, 5]`` and ``h = 0.001``.
Where keys and queries are dense this module does the same sums with far fewer exponentials.

**Cells.** Keys (sorted) and queries fall into cells of width ``c = RHO h`` on one grid. For a
query ``q`` in cell ``Q`` (centre ``c_Q``) and a key ``x`` in cell ``B`` (centre ``c_B``), with
``a = (q - c_Q) / h``, ``b = (x - c_B) / h``, ``e = (q - c_B) / h`` and ``D = (c_Q - c_B) / h``,

    ``-(q - x)^2 / 2h^2 = -e^2 / 2 + (D b - b^2 / 2) + a b``,

so the weight is ``exp(-e^2 / 2) exp(D b - b^2 / 2) exp(a b)``: a factor of the query, a factor of the key,
and the cross term ``exp(a b)`` with ``|a b| <= t = RHO^2 / 4``. Its Taylor series ``sum_k a^k b^k / k!`` is
cut after ``K`` terms (:func:`terms`), where the remainder is at most ``2^-60`` of the cross term itself: each
weight is computed to a relative ``2^-60`` before rounding, finer than its own rounding (``2^-53``). The pair
of cells then costs, per column, ``K`` sums over the keys (``sum_x v_x exp(D b - b^2 / 2) b^k / k!``) and
``K`` multiply-adds per query (Horner in ``a``), and one exponential per key and per query: ``(|Q| + |B|)``
exponentials where the window sums take ``|Q| |B|``. No cancellation beyond ``exp(2 t)`` (3.1 at ``RHO =
1.5``; the moments' wider cells below: 23): the rounding of each sum stays within a small multiple of
``2^-53`` times the sum of its terms' absolute values, as for the window sums.

**Rounding.** Far from the origin the cells' centres and the offsets from them round by up to an ulp of the
data: ``t`` takes that margin (in bandwidths), and where it would pass ``RHO^2`` there are no cells.

**Which keys.** A query whose nearest key is within one bandwidth has a shift ``-u_near^2 / 2`` of at least
``-1/2`` and a window of radius ``R = sqrt(1 + 2 L)`` bandwidths at most (``L`` of
:func:`nadaraya.backends._truncated_grid.log_ratio`); the cells within ``ceil(R / RHO)`` of its own hold every
key of its window, and a few more (which only makes the sum more exact). Far pairs of cells take fewer terms:
where every weight of the pair is far below the query's largest, an error under ``2^-60 / n`` of that largest
per key suffices, as the windows' own cut (:func:`nadaraya.backends._truncated_sums.pair_terms`); a pair whose
terms are all below it is left out, as the windows leave out such keys.

**Which pairs.** Per pair of cells, the series when its estimated cost is lower than the pair's ``|Q| |B|``
exponentials, the key-by-key sums otherwise. A query of ``Q`` that leaves out a key of ``B`` (leave-one-out)
takes the series of the keys before that key and of those after it, from running moments added key by key from
either end: its term is never added, and nothing is subtracted. Per query cell, the cells when their estimated
cost is lower than the queries' windows; otherwise (and for queries farther than one bandwidth from every key)
the window sums of the truncated backend.

**Sample weights** ``s_x``: each key's factor ``exp(D b - b^2 / 2)`` is multiplied by ``s'_x = s_x / s_max <=
1`` (once, before the sums over the keys), so the weight, the values, every moment and leave-one-out's walks
carry the weights with no new sums; the key-by-key pairs add ``log s'_x`` to each exponent. A query's shift
stays ``-u_near^2 / 2`` (the rows' shift is ``log s_max`` more), still at or above every weighted term. What
changes is the lower bound of the query's largest term: at least ``s'_min exp(-NEAR^2 / 2)`` (its nearest key
within a bandwidth may be the lightest), so the reach and the far pairs' cut
(:func:`nadaraya.backends._truncated_sums.pair_terms`) take ``L + log(s_max / s_min)`` for ``L``: every
left-out or truncated term is still under ``2^-60 / n`` of the query's largest. The truncated backend serves
the cells only where ``log(s_max / s_min)`` is at most 128 (its ``CELLS_SPREAD``; wider spreads in bands of
keys by weight, each within it): then the light keys' factors (at least ``e^-128``) and every term kept (at
least ``e^-(128 + L)`` of the shift) stay far above the underflow, and the reach grows from about 10.4 to 19.1
bandwidths at most (at ``n = 2e5``). The moments' ``k - q`` is ``h (b - s)``, each exact to an ulp of ``h``,
weighted or not: a moment's error is a few ulps of ``sum w (|k - q| + h)^j``.

**Moments** of a local fit of degree ``r`` (1 or 2): the ``j``-th derivative in ``a`` of the pair's series
``sum_x G_x exp(a b)`` is ``sum_x G_x b^j exp(a b)``, so each query's Horner pass carries its derivatives up
to ``2 r`` (the weight) and ``r`` (each value): ``sum w b^j`` with no more sums over the keys. With ``(k - q)
/ h = b - s``, ``s = a + D``, the moments ``sum w (k - q)^j`` follow binomially (``emit`` of
:mod:`nadaraya.backends._truncated_sums`); the key sums take ``2 r`` more terms, so that the ``2 r``-th
derivative's remainder is under ``2^-60`` too, and the cells reach as far as the moments' windows. A query's
passes then cost about ``2 r + 1 + (r + 1) p`` Horner columns against ``1 + p`` for plain pooling (four terms
per pass over the queries), so with moments the cells are wider, :data:`RHO_MOMENTS` bandwidths, where the
keys span :data:`WIDE_CELLS` of them or more: fewer pairs of cells per query (11 against 17 at ``n = 2e5``),
each a few terms longer, and half the exponentials (only where the centres' rounding leaves ``|a|, |b|``
within 1.1 of ``RHO_MOMENTS / 2``). The cancellation bound grows to ``exp(2 t)`` = 23 (``t = 1.5625``), still
a small multiple of the rounding. The moments about a query come from powers about a centre up to ``c`` away,
so each is rounded relative to ``sum w (|k - q| + 2 c)^j``, not its own ``sum w |k - q|^j``: every query's
moments are certified afterwards (``_uncertain``, to ``2^-36`` of their own sums of ``|terms|``), and the
queries they do not hold for (keys clustered well inside a cell about the query) are summed key by key. With
leave-one-out, the query cell's own key cell is summed as :data:`SUB` sub-cells (keys within ``RHO_MOMENTS /
(2 SUB)`` of their centre, queries within ``RHO_MOMENTS / 2``: ``t = 0.52``, 17 terms): the walks over the
keys, which cost per key and term, take no more terms than at :data:`RHO`. The walks' queries take their
Horner passes together, a chunk at a time, each with its own coefficients. Measured through
:func:`nadaraya.pool` at n = m = 2e5, h = 0.01, one thread: degree 1 and 2 cost about 1.15x and 1.45x degree 0
(1.2-1.3x and 1.5x with leave-one-out)."""

from __future__ import annotations

import functools
import math

import numba
import numpy as np
from numpy.typing import NDArray

from nadaraya._support.jit import exp_flushed, run_ranges, threads_for
from nadaraya.backends._sorted import _bucket_pairs, counting_order, runs
from nadaraya.backends._truncated_sums import (
    BITS,
    BLOCK,
    FASTMATH,
    emit,
    horner,
    horner_each,
    pair_terms,
    part,
    terms,
)

__all__ = ["BITS", "NEAR", "RHO", "RHO_MOMENTS", "SPARSE", "SUB", "WIDE_CELLS", "priced_terms", "sums",
           "terms", "worth"]

#: cell width in bandwidths
RHO = 1.5
#: cell width in bandwidths for the moments of a local fit of degree 1 or 2 (with leave-one-out
#: too, its own cell in sub-cells): each query's Horner passes carry 3-5 series per value column
#: against one, so fewer, wider pairs of cells pay (local linear 1.15x degree 0, one thread)
RHO_MOMENTS = 2.5
#: with moments and leave-one-out, a query cell's own key cell is summed in this many sub-cells
SUB = 3
#: the wider cells where the keys span this many of them at least (with fewer, each query meets
#: every cell anyway, and the longer series cost more: h = 0.3 on [0, 1])
WIDE_CELLS = 4.0
#: queries whose nearest key is within this many bandwidths ride on cells
NEAR = 1.0
#: below this many keys per cell on average, no cells (with as many queries, the cells pay from about 25)
SPARSE = 16.0
#: the cost model, in nanoseconds on one thread (measured 2026-11): a key-by-key pair (an
#: exponential and its sums; and per value column), a query's call of the key-by-key loop, a
#: series pair's fixed part (and per column), and its keys' and queries' (and per term and column)
_PAIR = (1.05, 0.1)
_CALL = 30.0
_FIXED = (150.0, 50.0)
_POINT = (3.5, 0.12)
#: queries per chunk of the Horner passes (their rows of derivatives stay in L1)
_CHUNK = 256
#: leave-one-out's walks over a cell's keys and its queries, per term and column (both sides)
_WALK = 2.0


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH)
def _series(ks, vt, sw, s0, s1, qs, ex, top, mem, cq, cb, inv_h, nt, r, consts, scratch, acc):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Add the keys ``s0 .. s1 - 1`` (cell centre ``cb``) to the rows ``acc`` of the queries
    ``mem`` (cell centre ``cq``) by the series of the cross term, with the moments of degree
    ``r`` (the series' derivatives in ``a``: ``horner`` of :mod:`nadaraya.backends._truncated_sums`); a
    query that leaves out one of these keys takes the keys before it and after it (:func:`_walk`),
    never its term. ``sw``: the keys' sample weights over the largest (empty: none), a factor of
    each key's terms."""
    tb, t0, bb, mom, aq, fq, fm, npf, pd, tmp, cut, who = scratch
    p = vt.shape[0]
    nb = s1 - s0
    dd = (cq - cb) * inv_h
    kb = ks[s0:s1]
    for j in range(nb):
        b = (kb[j] - cb) * inv_h
        bb[j] = b
        tb[j] = exp_flushed(dd * b - 0.5 * b * b)
    if sw.size:  # each key's factor carries its weight: the value and moment sums with it
        for j in range(nb):
            tb[j] *= sw[s0 + j]
    for j in range(nb):
        t0[j] = tb[j]
    for k in range(nt):
        s = 0.0
        for j in range(nb):
            s += tb[j]
        mom[k, 0] = s
        for c in range(p):
            vb = vt[c, s0:s1]
            s = 0.0
            for j in range(nb):
                s += tb[j] * vb[j]
            mom[k, 1 + c] = s
        f = 1.0 / (k + 1)
        for j in range(nb):
            tb[j] *= bb[j] * f
    nq = mem.size
    split = 0
    for i in range(nq):
        q = qs[mem[i]]
        aq[i] = (q - cq) * inv_h
        e = (q - cb) * inv_h
        fq[i] = exp_flushed(-0.5 * e * e - top[mem[i]])
        fm[i] = fq[i]
        if s0 <= ex[mem[i]] < s1:
            fm[i] = 0.0  # masked: this query takes these keys from _walk
            split += 1
    if r:
        for i in range(nq):
            npf[0, i] = 1.0
        for k in range(1, 2 * r + 1):
            f = -1.0 / k
            for i in range(nq):
                npf[k, i] = npf[k - 1, i] * (aq[i] + dd) * f
    for i0 in range(0, nq if split < nq else 0, _CHUNK):  # chunks whose Horner rows stay in L1 (none
        i1 = min(nq, i0 + _CHUNK)  # where every query leaves out one of these keys: _walk serves them all)
        for c in range(p + 1):
            jmax = 0 if r == 0 else (2 * r if c == 0 else r)
            horner(mom, nt, c, jmax, aq[i0:i1], i1 - i0, pd)
            emit(pd, c, jmax, p, r, npf[:, i0:i1], fm[i0:i1], i1 - i0, consts, tmp, acc[:, i0:i1])
    if split:
        split = 0
        for i in range(nq):
            if fm[i] == 0.0 and s0 <= ex[mem[i]] < s1:
                cut[split] = ex[mem[i]] - s0
                who[split] = i
                split += 1
        order = np.argsort(cut[:split])
        _walk(vt, s0, nb, t0, bb, cut[:split][order], who[:split][order], aq, fq, npf, nt, r, consts, mom, pd,
              tmp, acc)


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH)
def _walk(vt, s0, nb, t0, bb, cut, who, aq, fq, npf, nt, r, consts, run, pd, tmp, acc):  # type: ignore[no-untyped-def]  # pragma: no cover
    """For the queries ``who`` leaving out the cell's keys ``cut`` (ascending, offsets from
    ``s0``): the series of the keys before the cut plus that of those after it, from running
    moments (added key by key, from the left and from the right: no subtraction); the left
    coefficients are kept per query and the right ones added to them, and the queries take
    their Horner passes together, a chunk at a time (each with its own coefficients)."""
    p = vt.shape[0]
    ns = cut.size
    inv = np.empty(nt)
    for k in range(nt):
        inv[k] = 1.0 / (k + 1)
    keep = np.empty((ns, nt, p + 1))
    size = min(ns, _CHUNK) if r else 0
    nd = npf.shape[0] if r else 0
    # a chunk's coefficients, per column and term the queries in a row (padded: rows 2 KiB apart
    # would share a few sets of the L1 cache, and each query writes one entry of every row)
    co = np.empty((p + 1, nt, size + 8))
    aw = np.empty(size)
    fw = np.empty(size)
    nw = np.empty((nd, size))
    accw = np.empty((acc.shape[0], size))
    for side in range(2):
        run[:, :] = 0.0
        j = 0 if side == 0 else nb - 1
        for at_r in range(ns):
            at = at_r if side == 0 else ns - 1 - at_r
            stop = cut[at]
            while (side == 0 and j < stop) or (side == 1 and j > stop):
                t = t0[j]
                b = bb[j]
                for k in range(nt):
                    run[k, 0] += t
                    for c in range(p):
                        run[k, 1 + c] += t * vt[c, s0 + j]
                    t *= b * inv[k]
                j += 1 if side == 0 else -1
            both = keep[at]
            if side == 0:
                both[:, :] = run[:nt, :]
                continue
            i = who[at]
            if r == 0:  # no moments: one Horner pass per column, in scalars, at once
                a = aq[i]
                for c in range(p + 1):
                    v = both[nt - 1, c] + run[nt - 1, c]
                    for k in range(nt - 2, -1, -1):
                        v = v * a + (both[k, c] + run[k, c])
                    acc[c, i] += fq[i] * v
                continue
            slot = at_r % size
            for k in range(nt):
                for c in range(p + 1):
                    co[c, k, slot] = both[k, c] + run[k, c]
            aw[slot] = aq[i]
            fw[slot] = fq[i]
            for e in range(nd):
                nw[e, slot] = npf[e, i]
            if slot == size - 1 or at == 0:
                _chunk(co, slot + 1, who, at, aw, fw, nw, nt, p, r, consts, pd, tmp, accw, acc)


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH)
def _chunk(co, n, who, at, aw, fw, nw, nt, p, r, consts, pd, tmp, accw, acc):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The Horner passes of a walk's ``n`` queries ``who[at + n - 1], .. who[at]`` (in that
    order in the chunk) over their own coefficients ``co``, added to their columns of ``acc``."""
    accw[:, :n] = 0.0
    for c in range(p + 1):
        jmax = 0 if r == 0 else (2 * r if c == 0 else r)
        horner_each(co[c], 0, nt, jmax, aw, n, pd)
        emit(pd, c, jmax, p, r, nw, fw, n, consts, tmp, accw)
    for m in range(n):
        i = who[at + n - 1 - m]
        for s in range(acc.shape[0]):
            acc[s, i] += accw[s, m]


@numba.njit(cache=True, nogil=True)
def _sub_cells(ks, vt, sw, s0, s1, qs, ex, top, mem, cq, cb, width, sub, inv_h, nt, r, consts, scratch, acc):  # type: ignore[no-untyped-def]  # pragma: no cover
    """:func:`_series` of the keys ``s0 .. s1 - 1`` of a cell ``width`` wide (centre ``cb``) as
    ``sub`` sub-cells of equal width, each about its own centre, with ``nt`` terms."""
    left = cb - 0.5 * width
    step = width / sub
    for k in range(sub):
        s2 = s1 if k == sub - 1 else s0 + np.searchsorted(ks[s0:s1], left + (k + 1) * step)
        if s2 > s0:
            centre = left + (k + 0.5) * step
            _series(ks, vt, sw, s0, s2, qs, ex, top, mem, cq, centre, inv_h, nt, r, consts, scratch, acc)
        s0 = s2


@numba.njit(cache=True, nogil=True)
def _costs(nq, nb, split, p, nt, r):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """A pair of cells' estimated nanoseconds, ``(key by key, by the series)``: ``nq`` queries,
    ``nb`` keys, ``split`` queries leaving out one of those keys (they walk them twice), ``p``
    value columns, ``nt`` terms, the moments of degree ``r`` (the key-by-key sums carry
    ``1 + 2 r`` products per pair and column; each query's Horner ``2 r + 1`` and ``r + 1``
    passes of the weight's and each value's series)."""
    ncol = p + 1
    qcol = 2 * r + 1 + (r + 1) * p
    keyed = nq * (nb * (_PAIR[0] + _PAIR[1] * p) * (1 + r) + _CALL)
    series = (_FIXED[0] + _FIXED[1] * qcol + nb * (_POINT[0] + _POINT[1] * nt * ncol)
              + nq * (_POINT[0] + _POINT[1] * nt * qcol))
    if split:
        series += (nb + split) * _WALK * nt * ncol + split * _POINT[1] * nt * qcol
    return keyed, series


@numba.njit(cache=True, nogil=True)
def _cells(ks, vt, kid, kst, big_b, qs, ex, lo, hi, top, mem, qid, qst, g0, width, inv_h, nts, r, sub, nt_sub,
           edges, dest, sw, lw, a, b, out, done):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Rows of ``out`` for the query cells of the ranges ``a .. b - 1`` (range ``r`` holds the
    cells ``edges[r] .. edges[r + 1] - 1``) that the cells serve; ``done`` marks them.
    ``big_b``: the most keys a cell holds; ``r`` the moments' degree; query ``i``'s row is
    ``dest[i]`` (``i`` where ``dest`` is empty); ``sw`` and ``lw`` the keys' sample weights over the
    largest and their logarithms (empty: none)."""
    p = vt.shape[0]
    ncol = p + 1
    width_out = out.shape[1]
    pair = (_PAIR[0] + _PAIR[1] * p) * (1 + r)
    reach = nts.size - 1
    most = nts.max()
    h = 1.0 / inv_h
    hfact = np.empty(2 * r + 1)
    inv_fact = np.empty(2 * r + 1)
    hfact[0] = 1.0
    inv_fact[0] = 1.0
    for j in range(1, 2 * r + 1):
        hfact[j] = hfact[j - 1] * h * j
        inv_fact[j] = inv_fact[j - 1] / j
    consts = (hfact, inv_fact)
    buf = np.empty(BLOCK)
    du = np.empty(BLOCK)
    pw = np.empty(BLOCK)
    big_q = 1
    for c in range(edges[a], edges[b]):
        big_q = max(big_q, qst[c + 1] - qst[c])
    tb = np.empty(big_b)
    t0 = np.empty(big_b)
    bb = np.empty(big_b)
    mom = np.empty((most, ncol))
    aq = np.empty(big_q)
    fq = np.empty(big_q)
    fm = np.empty(big_q)
    npf = np.empty((2 * r + 1, big_q))
    pd = np.empty((2 * r + 1, big_q))
    tmp = np.empty(big_q)
    acc = np.empty((width_out, big_q))  # a query per column: the Horner passes run over queries
    row = np.empty(width_out)
    cut = np.empty(big_q, dtype=np.int64)
    who = np.empty(big_q, dtype=np.int64)
    scratch = (tb, t0, bb, mom, aq, fq, fm, npf, pd, tmp, cut, who)
    direct = np.empty(2 * reach + 1, dtype=np.bool_)
    for c in range(edges[a], edges[b]):
        i0 = qst[c]
        nq = qst[c + 1] - i0
        cm = mem[i0:i0 + nq]
        jq = qid[c]
        b0 = np.searchsorted(kid, jq - reach)
        b1 = np.searchsorted(kid, jq + reach, side="right")
        window = 0.0
        for i in range(nq):
            window += (hi[cm[i]] - lo[cm[i]]) * pair + _CALL
        cost = 0.0
        for j in range(b0, b1):
            s0, s1 = kst[j], kst[j + 1]
            split = 0
            for i in range(nq):
                if s0 <= ex[cm[i]] < s1:
                    split += 1
            keyed, series = _costs(nq, s1 - s0, split, p, nts[abs(kid[j] - jq)], r)
            direct[j - b0] = keyed <= series
            cost += min(keyed, series)
        if not cost < window:
            done[c] = False
            continue
        done[c] = True
        acc[:, :nq] = 0.0
        cq = g0 + (jq + 0.5) * width
        for j in range(b0, b1):
            s0, s1 = kst[j], kst[j + 1]
            if not direct[j - b0]:
                cb = g0 + (kid[j] + 0.5) * width
                if sub > 1 and kid[j] == jq:  # its own cell in sub-cells: shorter walks (see sums)
                    _sub_cells(ks, vt, sw, s0, s1, qs, ex, top, cm, cq, cb, width, sub, inv_h, nt_sub, r,
                               consts, scratch, acc)
                    continue
                nt = nts[abs(kid[j] - jq)]
                _series(ks, vt, sw, s0, s1, qs, ex, top, cm, cq, cb, inv_h, nt, r, consts, scratch, acc)
                continue
            for i in range(nq):
                e = ex[cm[i]]
                t = top[cm[i]]
                row[:] = 0.0
                if s0 <= e < s1:
                    part(ks, lw, vt, qs[cm[i]], inv_h, t, s0, e, r, buf, du, pw, row)
                    part(ks, lw, vt, qs[cm[i]], inv_h, t, e + 1, s1, r, buf, du, pw, row)
                else:
                    part(ks, lw, vt, qs[cm[i]], inv_h, t, s0, s1, r, buf, du, pw, row)
                for s in range(width_out):
                    acc[s, i] += row[s]
        moved = dest.size > 0
        for i in range(nq):
            o = dest[cm[i]] if moved else cm[i]
            for s in range(width_out):
                out[o, s] = acc[s, i]


def _half(scale: float, h: float, spread: float = math.inf, rho: float = RHO) -> float:
    """The most ``|a|`` and ``|b|`` of cells ``rho`` bandwidths wide, in bandwidths, for data within
    ``scale`` of 0; data ``spread`` wide in one cell centred on their middle: half that, and the
    centre's rounding."""
    if spread < rho * h:
        rounding = 8.0 * max(scale, rho * h) * 2.0**-52
        return min(_half(scale, h, rho=rho), (0.5 * spread * (1.0 + 1e-9) + rounding) / h)
    return rho / 2.0 * (1.0 + 1e-9) + 8.0 * scale * 2.0**-52 / h


def _gridded(n: int, spread: float, width: float) -> bool:
    """Whether cells ``width`` wide over keys ``spread`` wide hold :data:`SPARSE` keys or more
    on average, and are not too many to index."""
    return n > 0 and n * width >= SPARSE * spread and spread / width < 2.0**40


def sums(ks: NDArray[np.float64], vt: NDArray[np.float64], qs: NDArray[np.float64], ex: NDArray[np.int64],
         lo: NDArray[np.int64], hi: NDArray[np.int64], top: NDArray[np.float64], h: float, big_l: float,
         out: NDArray[np.float64], r: int = 0, dest: NDArray[np.int64] | None = None,
         sw: NDArray[np.float64] | None = None, lw: NDArray[np.float64] | None = None) -> NDArray[np.bool_]:
    """Write the rows of ``out`` (weight, then the ``p`` values, then the ``2 r + r p`` moments
    of a local fit of degree ``r``, as :func:`nadaraya.backends._rows.assemble` reads them) of
    the queries that the cells serve, and return which they are.

    ``ks`` the sorted keys, ``vt`` their values (``p >= 1`` rows), ``qs`` the queries, ``ex``
    each one's left-out key among the sorted keys (-1 for none), ``lo``, ``hi`` and ``top`` their
    windows and shifts (:mod:`nadaraya.backends.truncated`), ``big_l`` its ``L``. Rows of the
    queries not served are left as they are. With ``dest``, query ``i``'s row is ``dest[i]``
    (the rows straight in another order). ``sw``: the keys' sample weights over the largest (at
    most 1) and ``lw`` their logarithms, where there are sample weights; ``top`` is then each
    query's unweighted shift ``-u_near^2 / 2`` and ``big_l`` is widened by ``log(s_max / s_min)``
    (the module text); the rows' shift is ``log s_max`` more.

    Examples
    --------
    >>> import numpy as np
    >>> ks = np.linspace(0.0, 1.0, 4001); qs = ks.copy(); vt = np.ones((1, ks.size))
    >>> lo, hi = np.searchsorted(ks, qs - 0.105), np.searchsorted(ks, qs + 0.105)  # h = 0.01
    >>> out = np.zeros((ks.size, 2)); none = np.full(ks.size, -1)
    >>> done = sums(ks, vt, qs, none, lo, hi, np.zeros(ks.size), 0.01, 55.0, out)
    >>> bool(done.all()), bool(np.allclose(out[:, 1], out[:, 0], rtol=1e-14))
    (True, True)
    """
    m, n = qs.size, ks.size
    done = np.zeros(m, dtype=bool)
    # with moments and keys over WIDE_CELLS wide cells or more, wider cells (fewer pairs of cells per
    # query); where queries leave out a key, its own cell's keys in SUB sub-cells (shorter walks)
    wide = r and n and float(ks[-1] - ks[0]) >= WIDE_CELLS * RHO_MOMENTS * h
    if wide:  # and only where the centres' rounding leaves |a|, |b| near RHO_MOMENTS / 2
        scale = max(abs(float(ks[0])), abs(float(ks[-1])), float(np.abs(qs).max()) if m else 0.0)
        wide = _half(scale, h, rho=RHO_MOMENTS) <= 1.1 * RHO_MOMENTS / 2
    rho = RHO_MOMENTS if wide else RHO
    sub = SUB if wide and bool((ex >= 0).any()) else 1
    width = rho * h
    if m == 0 or not _gridded(n, float(ks[-1] - ks[0]) if n else 0.0, width):
        return done
    near = np.flatnonzero(top >= -0.5 * NEAR**2)
    if near.size == 0:
        return done
    inv_w = 1.0 / width
    ends = (min(float(ks[0]), float(qs[near].min())), max(float(ks[-1]), float(qs[near].max())))
    middle = ends[1] - ends[0] < width  # one cell centred on the data's middle: fewer terms (_half)
    g0 = 0.5 * (ends[0] + ends[1]) - 0.5 * width if middle else float(ks[0])
    kid, kst = runs(np.floor((ks - g0) * inv_w).astype(np.int64))
    qc = np.floor((qs[near] - g0) * inv_w).astype(np.int64)
    low = int(qc.min())
    span = int(qc.max()) - low + 1
    order = counting_order(qc - low, span) if span <= 4 * (m + n) else np.argsort(qc, kind="stable")
    mem = np.ascontiguousarray(near[order])
    qid, qst = runs(qc[order])
    # |a| and |b| are at most RHO / 2, plus the rounding of a cell's centre and of the offsets from
    # it (far from the origin a centre's ulp may be a sizeable part of h); too many terms: no cells
    one = middle and kid.size == qid.size == 1 and kid[0] == qid[0] == 0
    half = _half(max(abs(ends[0]), abs(ends[1])), h, ends[1] - ends[0] if one else math.inf, rho)
    if half > rho:
        return done
    nts = pair_terms(half, big_l, r, rho, NEAR)
    # a sub-cell's keys are within half / sub of its centre (and the rounding), its queries within half
    nt_sub = terms(half * _half(max(abs(ends[0]), abs(ends[1])), h, math.inf, rho / sub)) + 2 * r
    served = np.zeros(qid.size, dtype=bool)
    cells = qid.size
    chunks = np.linspace(0, cells, min(cells, 64 * numba.get_num_threads()) + 1).astype(np.int64)
    with threads_for(float((hi - lo).sum()) * 4.0 * (1 + r)):
        none = np.empty(0)
        args = (ks, vt, kid, kst, int(np.diff(kst).max()), qs, ex, lo, hi, top, mem, qid, qst, g0, width,
                1.0 / h, nts, r, sub, nt_sub, chunks, np.empty(0, dtype=np.int64) if dest is None else dest,
                none if sw is None else sw, none if lw is None else lw)
        run_ranges(_cells, args, chunks.size - 1, (out, served), grain=1)
    done[mem[np.repeat(served, np.diff(qst))]] = True
    if r:  # the moments' binomial shift from the cells' centres to the queries, certified per query
        rows = np.flatnonzero(done)
        done[rows[_uncertain(out, rows if dest is None else dest[rows], vt.shape[0], r, half * h)]] = False
    return done


#: the moments' rounding, per query: at most ``_ROUND * 2^-53`` times ``sum w (|k - q| + 2 c)^j``
#: (a key's offset from its cell's centre at most ``c``; the series' cancellation ``exp(2 t) <= 23``
#: times the sums' own), and certified where that is under ``_HOLD`` times ``sum w |k - q|^j``
_ROUND = 2.0**9
_HOLD = 2.0**-36


def _uncertain(out: NDArray[np.float64], rows: NDArray[np.int64], p: int, r: int,
               c: float) -> NDArray[np.bool_]:
    """Which of the ``rows`` of ``out`` (weight, ``p`` values, the ``2 r`` weight moments ``M_j =
    sum w (k - q)^j``, ...) the cells' moments do not hold to ``_HOLD``: for even ``j`` (2 and
    ``2 r``) Minkowski's inequality bounds ``sum w (|k - q| + 2 c)^j`` by ``(M_j^(1/j) + 2 c
    M_0^(1/j))^j``, so the rounding is within ``_HOLD M_j`` where ``_ROUND 2^-53 (1 + 2 c (M_0 /
    M_j)^(1/j))^j <= _HOLD``, that is ``(2 c)^j M_0 <= ((_HOLD / (_ROUND 2^-53))^(1/j) - 1)^j
    M_j``; the odd moments lie between their even neighbours (``sum w |k - q|^j <= (M_(j-1)
    M_(j+1))^(1/2)``). Keys clustered well within ``c`` of a query fail: they are summed key by
    key. The columns are tested whole (contiguous), then read at ``rows``."""
    m0 = out[:, 0]
    bad = ~(m0 > 0)
    limit = _HOLD / (_ROUND * 2.0**-53)
    for j in sorted({2, 2 * r}):
        mj = out[:, p + j]
        room = (limit ** (1.0 / j) - 1.0) ** j / (2.0 * c) ** j
        with np.errstate(invalid="ignore", over="ignore"):
            bad |= ~(mj > 0) | ~(m0 <= room * mj)
    return bad[rows]


#: queries sampled by :func:`worth` for their density, drawn from ``default_rng(1)`` (kept per count)
_SAMPLE = 8192
_drawn = functools.lru_cache(maxsize=8)(lambda m: np.random.default_rng(1).integers(0, m, _SAMPLE))
@functools.lru_cache(maxsize=64)
def _offset_terms(half: float, big_l: float) -> tuple[tuple[int, float], ...]:
    """:func:`pair_terms` of degree 0: ``((terms, pairs of a query cell, offsets -reach .. reach), ...)``."""
    count: dict[int, float] = {}
    for o, nt in enumerate(pair_terms(half, big_l, 0, RHO, NEAR).tolist()):
        count[nt] = count.get(nt, 0.0) + (1.0 if o == 0 else 2.0)
    return tuple(sorted(count.items()))


def priced_terms(scale: float, h: float, big_l: float) -> tuple[tuple[int, float], ...] | None:
    """The terms :func:`worth` prices per pair of cells, with the pairs of a query cell taking each, for
    data within ``scale`` of 0 (``None``: :func:`sums` makes none), at ``half`` rounded up (no fewer terms).

    Examples
    --------
    >>> priced_terms(1.0, 0.01, 53.8)  # offsets 0 to 4 take 17 terms, 5 takes 16, 6 12, 7 8
    ((8, 2.0), (12, 2.0), (16, 2.0), (17, 9.0))
    """
    half = _half(scale, h)
    return None if half > RHO else _offset_terms(math.ceil(half * 2.0**30) * 2.0**-30, float(big_l))


def worth(sampled: NDArray[np.float64], queries: NDArray[np.float64], keys: NDArray[np.float64], h: float,
          window: NDArray[np.float64], big_l: float) -> NDArray[np.float64]:
    """For the ``sampled`` queries, the key-by-key pairs the cells' work is worth (``inf`` where
    there are no cells), from ``window``, each one's keys within ``sqrt(2 L)`` bandwidths, and
    the queries' density near it (one value column, per the cost model of :func:`sums`, each
    pair of cells at its own terms: :func:`priced_terms`).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.linspace(0.0, 5.0, 10**6)
    >>> window = np.full(2, 2 * np.sqrt(2 * 55.0) * 1e-3 * 2e5)  # about 4200 keys
    >>> bool(worth(x[[1000, 5000]], x, x, 1e-3, window, 55.0).max() < window[0] / 10)
    True
    """
    n, m = keys.size, queries.size
    k0, k1 = (float(keys.min()), float(keys.max())) if n else (0.0, 0.0)
    if m == 0 or not _gridded(n, k1 - k0, RHO * h):
        return np.full(sampled.size, np.inf)
    qs = np.ascontiguousarray(queries if m <= _SAMPLE else queries[_drawn(m)])
    q0, q1 = float(qs.min()), float(qs.max())
    if (priced := priced_terms(max(abs(k0), abs(k1), abs(q0), abs(q1)), h, big_l)) is None:
        return np.full(sampled.size, np.inf)
    radius = math.sqrt(2.0 * big_l) * h
    below, above = sampled - radius, sampled + radius
    if sampled.size and below.max() <= q0 and above.min() >= q1:  # each sample's window holds every query
        near, window = qs.size, window[0] if window.min() == window.max() else window  # alike: floats
    else:  # sorted by buckets where spread (numpy's sort takes 5x as long: 0.2 ms at 8192)
        scale = qs.size / (q1 - q0) if q1 > q0 else 0.0
        xs = _bucket_pairs(qs, q0, scale, qs.size, 32)[1] if 0.0 < scale < math.inf else qs[:0]
        xs = xs if xs.size == qs.size else np.sort(qs)
        near = np.searchsorted(xs, above, side="right") - np.searchsorted(xs, below)
    share = RHO * h / (2.0 * radius)
    kb, qb = window * share, np.maximum(near * (m / qs.size) * share, 1e-9)
    pair = _PAIR[0] + _PAIR[1]
    # _costs(qb, kb, 0, 1, nt, 0) for every sample and pair of cells at once (a call each costs ms)
    keyed = qb * (kb * pair + _CALL)
    fixed, per_term = _FIXED[0] + 2 * _FIXED[1] + (kb + qb) * _POINT[0], (kb + qb) * (_POINT[1] * 2)
    cells = sum(count * np.minimum(keyed, fixed + per_term * nt) for nt, count in priced) / qb
    out = np.where(cells < window * pair + _CALL, cells / pair, np.inf)
    return np.full(sampled.size, out) if out.ndim == 0 else out
