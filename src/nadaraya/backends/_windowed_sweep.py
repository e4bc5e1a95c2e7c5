"""Compiled sweep of the windowed backend for polynomial kernels: edges walked over sorted queries (numba)."""

from __future__ import annotations

import numpy as np
from numba import njit

from nadaraya.backends._windowed_jit import _bounds, _csx, _defer, _reached, _triage


@njit(cache=True)
def _sort_bucket(qs, j0, j1, lo_v, inv_h, lq, lp, cnt):  # pragma: no cover - compiled
    """The queries ``qs[j0:j1]`` of one bucket of width ``h`` starting at ``lo_v``, sorted into
    ``lq`` with their positions in ``lp``: a counting sort into about one sub-cell per query,
    then an insertion sort of the nearly sorted result (a merge sort when sub-cells crowd)."""
    nq = j1 - j0
    ns = nq
    for s in range(ns + 1):
        cnt[s] = 0
    scale = inv_h * ns
    crowd = 0
    for j in range(j0, j1):
        f = (np.float64(qs[j]) - lo_v) * scale
        k = 0 if not f >= 0.0 else (ns - 1 if f >= ns - 1 else int(f))
        cnt[k + 1] += 1
        crowd = max(crowd, cnt[k + 1])
    if crowd > 32:
        order = np.argsort(qs[j0:j1], kind="mergesort")
        for r in range(nq):
            lp[r] = j0 + order[r]
            lq[r] = qs[j0 + order[r]]
        return
    for s in range(ns):
        cnt[s + 1] += cnt[s]
    for j in range(j0, j1):
        f = (np.float64(qs[j]) - lo_v) * scale
        k = 0 if not f >= 0.0 else (ns - 1 if f >= ns - 1 else int(f))
        r = cnt[k]
        cnt[k] = r + 1
        lq[r] = qs[j]
        lp[r] = j
    for r in range(1, nq):
        v = lq[r]
        pv = lp[r]
        i = r - 1
        while i >= 0 and lq[i] > v:
            lq[i + 1] = lq[i]
            lp[i + 1] = lp[i]
            i -= 1
        lq[i + 1] = v
        lp[i + 1] = pv


@njit(cache=True, inline="always")
def _scatter(out, res, lp, qidx, nq):  # pragma: no cover - compiled
    """The rows ``0 .. nq - 1`` of a bucket's results ``res`` (the sorted queries at the bucket
    positions ``lp``) to the queries' own rows ``qidx[lp]`` of ``out`` (m, columns): one
    contiguous row a query (a line or two of cache, where a column each would store to one line
    a column), ``res`` reused (in cache); the caller reads ``out.T`` as columns (views)."""
    for r in range(nq):
        j = qidx[lp[r]]
        for c in range(out.shape[1]):
            out[j, c] = res[r, c]


@njit(cache=True, inline="always")
def _store(res, r, S, h, p, degree):  # pragma: no cover - compiled
    """Row ``r`` of ``res``: the moment sweeps' columns (those of
    :func:`nadaraya.backends._windowed_moments._columns` in 1-D) from ``S`` (moment, column), the
    moments in units of ``h``; ``p`` outputs, a local polynomial of ``degree``."""
    res[r, 0] = S[0, 0]
    for cc in range(p):
        res[r, 1 + cc] = S[0, 1 + cc]
    ha = 1.0
    for aa in range(1, 2 * degree + 1):
        ha *= h
        res[r, p + aa] = S[aa, 0] * ha
        if aa <= degree:
            for cc in range(p):
                res[r, 1 + p + 2 * degree + (aa - 1) * p + cc] = S[aa, 1 + cc] * ha


#: keys tested at once when a window edge is walked forward (a vector compare and a count)
_STEP = 8


@njit(cache=True, inline="always")
def _walk(q, xs, inv, i, out):  # pragma: no cover - compiled
    """From ``i``, the first key that has :func:`~._windowed_jit._reached` the window's start
    (``out`` False) or its end (``out`` True), the keys sorted and ``i`` not past it:
    :data:`_STEP` keys counted at a time, no branch per key (``out`` is a constant at every
    call, folded away by the inlining)."""
    n = xs.shape[0]
    while i + _STEP <= n:
        f = 0
        for k in range(_STEP):
            f += not _reached(q, xs[i + k], inv, out)
        i += f
        if f < _STEP:
            return i
    while i < n and not _reached(q, xs[i], inv, out):
        i += 1
    return i


def sweep_loop(nf: int, p: int):  # type: ignore[no-untyped-def]
    """:func:`window_sums` for a kernel that is one polynomial even in ``u`` (no split), with
    buckets of width ``h``: O(1) per query. ``nf`` (moments) and ``p`` (outputs) are frozen
    closure constants, so LLVM unrolls the moment loops and keeps the running prefix in
    registers; numba's on-disk cache keys on their values.

    Each bucket's queries are sorted (:func:`_sort_bucket`), the prefix moments ``t^j`` (``t =
    (x - centre) / h`` about the bucket's centre, ``|t| <= 3/2``) of the keys of its cell and
    the two neighbours are tabulated, and the window edges are walked forward query by query
    with the reference's test; a window is then the difference of two rows of the table (two
    differences around the excluded key). The prefix never runs over more than three cells,
    so nothing cancels when ``|x| >> h``; windows whose weight sum is below ``threshold``
    times the prefix weight up to the window's end are left for a direct sum (NaN weight), as
    are windows of at most ``direct_max`` keys and those whose edges rounding put outside
    the three cells.
    """
    NF = nf
    NC = p + 1

    @njit(cache=True, nogil=True)
    def sweep_sums(
        t0, t1, qs, xs, inv, x0, h, inv_h, cs, ncell, start, tasks, values, sw, excl, coef, direct_max,
        threshold, res, lo_out, hi_out,
    ):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
        """The tasks ``t0 .. t1 - 1``; arguments and results as :func:`window_sums`'."""
        has_sw = sw.shape[0] > 0
        has_excl = excl.shape[0] > 0
        nqmax = 1
        nkmax = 1
        for b in range(tasks[t0], tasks[t1]):
            nqmax = max(nqmax, start[b + 1] - start[b])
            nkmax = max(nkmax, _csx(cs, b + 1, ncell) - _csx(cs, b - 2, ncell))
        lq = np.empty(nqmax, qs.dtype)
        lp = np.empty(nqmax, np.int64)
        cnt = np.empty(nqmax + 1, np.int64)
        P = np.empty((nkmax + 1, NF, NC))
        acoef = np.empty(NF)
        for b in range(tasks[t0], tasks[t1]):
            j0 = start[b]
            j1 = start[b + 1]
            if j0 == j1:
                continue
            c = b - 1  # -1 and ncell: below and above every key (their windows lie in cells 0, ncell - 1)
            _sort_bucket(qs, j0, j1, x0 + c * h, inv_h, lq, lp, cnt)
            # prefix moments of the keys of cells c - 1 .. c + 1 about the centre of cell c
            k0 = _csx(cs, c - 1, ncell)
            k1 = _csx(cs, c + 2, ncell)
            centre = x0 + (c + 0.5) * h
            for j in range(NF):
                for cc in range(NC):
                    P[0, j, cc] = 0.0
            for i in range(k1 - k0):
                t = (np.float64(xs[k0 + i]) - centre) * inv_h
                gj = sw[k0 + i] if has_sw else 1.0
                for j in range(NF):
                    P[i + 1, j, 0] = P[i, j, 0] + gj
                    for cc in range(NC - 1):
                        P[i + 1, j, cc + 1] = P[i, j, cc + 1] + gj * values[k0 + i, cc]
                    gj *= t
            # the sorted queries: both window edges only move forward
            lo = k0
            hi = k0
            prev = lq[0]
            for r in range(j1 - j0):
                q = lq[r]
                jq = lp[r]
                if not q >= prev:  # out of order (NaN): walk again from the start
                    lo = k0
                    hi = k0
                prev = q
                lo = _walk(q, xs, inv, lo, False)
                hi = _walk(q, xs, inv, hi, True)  # not after lo: two independent chains
                glo = lo
                ghi = hi
                if lo == k0 and k0 > 0 and (q - xs[k0 - 1]) * inv <= 1.0:  # rounding: window starts earlier
                    glo, ghi = _bounds(q, xs, inv, c, cs, ncell)
                e = excl[jq] if has_excl else -1
                Q = (np.float64(q) - centre) * inv_h
                if not _triage(res, lo_out, hi_out, jq, glo, ghi, e, direct_max, k0, k1,
                               abs(Q) <= 0.5 + 2.0**-20):
                    continue
                inside = glo <= e < ghi
                for jj in range(NF):
                    sa = 0.0
                    for rr in range(NF - 1 - jj, -1, -1):  # Horner in Q
                        sa = sa * Q + coef[0, jj, rr]
                    acoef[jj] = sa
                a = glo - k0
                z = ghi - k0
                for cc in range(NC):
                    sa = 0.0
                    for jj in range(NF):
                        if inside:  # leave-one-out: the parts [lo, e) and (e, hi)
                            mom = (P[e - k0, jj, cc] - P[a, jj, cc]) + (P[z, jj, cc] - P[e - k0 + 1, jj, cc])
                        else:
                            mom = P[z, jj, cc] - P[a, jj, cc]
                        sa += acoef[jj] * mom
                    res[jq, cc] = sa
                if not res[jq, 0] > threshold * P[z, 0, 0]:
                    _defer(res, lo_out, hi_out, jq, glo, ghi)

    return sweep_sums
