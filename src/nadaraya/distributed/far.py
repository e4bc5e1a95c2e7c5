"""Far queries on Dask: partials relative to an anchor key per shard, and their exact merges."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from nadaraya._core.nearest import FAR_LOG_WEIGHT, _unit_coords, own_positions
from nadaraya.backends.reference import _moment_sums, moment_shapes
from nadaraya.distributed.backend import block, count_arrays
from nadaraya.kernels import Kernel
from nadaraya.kernels import get as get_kernel
from nadaraya.partials import Partials, merge


@dataclass
class _Far:
    """Which queries of a Partials are far from every key seen, and their anchor.

    For a row in ``rows`` the Partials hold the log weights *relative to the anchor key*
    (``log w_i - log w_anchor``), computed by the kernel's ``log_ratio`` from differences of
    keys, so they keep every digit where the absolute log weights (near -1e300, or
    overflowed) would not. ``anchor_log`` is the anchor's absolute log weight (``-inf`` where
    it overflows), used when the row meets a chunk where it is not far.
    """

    rows: NDArray[np.bool_]
    query: NDArray[np.float64]
    anchor: NDArray[np.float64]
    anchor_lsw: NDArray[np.float64]
    anchor_log: NDArray[np.float64]

    @classmethod
    def none(cls, m: int, d: int) -> _Far:
        nan = np.full((m, d), np.nan)
        return cls(np.zeros(m, bool), nan, nan.copy(), np.zeros(m), np.full(m, -np.inf))


def _register_size() -> None:
    """Let dask count a far-query record by its arrays' bytes, as the backend counts Partials."""
    from dask.sizeof import sizeof

    sizeof.register(_Far)(count_arrays)


_register_size()


def far_block(
    q: NDArray[np.floating],
    k: NDArray[np.floating],
    v: NDArray[np.floating],
    sw: NDArray[np.floating] | None,
    exclude: NDArray[np.integer] | str | None,
    *,
    kernel: str,
    bandwidth: NDArray[np.float64],
    engine: str,
    moments: int = 0,
    tol: float | None = None,
) -> tuple[Partials, _Far | None]:
    """The task of predictions: the backend's :func:`~nadaraya.distributed.backend.block`, then the
    queries of a log-domain kernel that are far from every key of this chunk get partials
    relative to an anchor key (see :class:`_Far`), so that chunks far from a query still
    merge exactly; with ``moments`` (a local polynomial degree) their moment sums too, under
    the same relative weights; ``tol`` as for the block."""
    parts = block(q, k, v, sw, exclude, kernel=kernel, bandwidth=bandwidth, engine=engine, moments=moments,
                  tol=tol)
    if q.shape[0] == 0 or k.shape[0] == 0:
        return parts, None
    if isinstance(exclude, str):
        exclude = np.arange(q.shape[0])
    return _far_rows(parts, q, k, v, sw, exclude, get_kernel(kernel), bandwidth, moments)


def _log_ratio(kern: Kernel, q: Any, a: Any, b: Any, h: Any) -> Any:
    """``log K(key b) - log K(key a)`` for queries ``q`` (rows), summed over features, by the
    kernel's ``log_ratio``; where that overflows (``(q - a) / h`` beyond the float range), from
    the far-field form of the kernel in log magnitudes (:func:`_far_log_ratio`)."""
    with np.errstate(all="ignore"):
        lr = kern.log_ratio((q - a) / h, (a - b) / h).sum(axis=-1)  # type: ignore[misc]
        bad = ~np.isfinite(lr)
        if bad.any():
            q, a, b = np.broadcast_arrays(q, a, b)
            lr[bad] = _far_log_ratio(q[bad], a[bad], b[bad], h, float(getattr(kern, "far_power", 2.0)))
    return lr


def _signed_log_sum(sign: Any, logmag: Any) -> Any:
    """``sum_j sign_j exp(logmag_j)`` over the last axis, overflowing only to +-inf."""
    top = logmag.max(axis=-1)
    safe = np.where(np.isfinite(top), top, 0.0)
    total = (sign * np.exp(logmag - safe[..., None])).sum(axis=-1)
    return np.where(total == 0, 0.0, total * np.exp(safe))


def _far_log_ratio(q: Any, a: Any, b: Any, h: Any, power: float) -> Any:
    """``log K(key b) - log K(key a)`` far from both keys: ``-(|u_b|^2 - |u_a|^2) / 2`` for
    ``power`` 2 (the Gaussian), ``|u_a| - |u_b|`` for ``power`` 1 (Laplacian, logistic), with
    every product taken as a sum of logs so nothing overflows before the sum over features."""
    log2, lh = math.log(2.0), np.log(h)
    if power == 2.0:  # -(a - b)(q - (a + b) / 2) / h^2, in halves and quarters
        x, y = 0.5 * a - 0.5 * b, 0.5 * q - 0.25 * a - 0.25 * b
        sign = -np.sign(x) * np.sign(y)
        logmag = np.log(np.abs(x)) + np.log(np.abs(y)) + 2.0 * log2 - 2.0 * lh
    else:  # (|q - a| - |q - b|) / h: the keys' difference where both are on one side of q
        da_, db_ = 0.5 * q - 0.5 * a, 0.5 * q - 0.5 * b
        same = (da_ >= 0) == (db_ >= 0)
        diff = np.where(same, np.where(da_ >= 0, 0.5 * b - 0.5 * a, 0.5 * a - 0.5 * b),
                        np.abs(da_) - np.abs(db_))
        sign = np.sign(diff)
        logmag = np.log(np.abs(diff)) + log2 - lh
    logmag = np.where(sign == 0, -np.inf, logmag)
    return _signed_log_sum(sign, logmag)


def _far_partials(
    q: NDArray[np.floating],
    k: NDArray[np.floating],
    v: NDArray[np.floating],
    sw: NDArray[np.floating] | None,
    exclude: NDArray[np.integer] | None,
    kern: Kernel,
    bandwidth: NDArray[np.floating],
    moments: int = 0,
) -> tuple[Partials, NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Partials of queries over one chunk's keys relative to an anchor key per query (the
    nearest in the kernel's ``far_power`` distance, moved to the largest weight), as
    :func:`nadaraya.pooling` recomputes far queries; with the anchors and their log weights.
    Rows with no usable key get ``shift = -inf``. ``moments``: the moment sums of that
    degree under the same weights, with the exact differences ``k - q`` in float64 (the
    reference backend's sums, :func:`nadaraya.backends.reference.moment_shapes`)."""
    m, p = q.shape[0], v.shape[1]
    n, d = k.shape
    mom = tuple(np.zeros((m, *shape)) for shape in moment_shapes(moments, d, p))
    ok = np.arange(n) if sw is None else np.nonzero(sw > 0)[0]
    keys = k[ok].astype(np.float64)
    vals = v[ok].astype(np.float64)
    h = np.asarray(bandwidth, dtype=np.float64)
    lsw = np.zeros(ok.size) if sw is None else np.log(sw[ok].astype(np.float64))
    shift, weight, value = np.full(m, -np.inf), np.zeros(m), np.zeros((m, p))
    anchor_idx = np.zeros(m, dtype=np.intp)
    if ok.size == 0:
        return Partials(shift, weight, value, mom), np.full((m, d), np.nan), np.zeros(m), np.full(m, -np.inf)
    qq = q.astype(np.float64)
    zq, zk = _unit_coords(qq, keys, h)
    power = float(getattr(kern, "far_power", 2.0))
    step = max(1, (32 * 2**20) // (8 * 4 * max(d, 1) ** (1 + 2 * moments) * ok.size))
    with np.errstate(all="ignore"):
        for r0 in range(0, m, step):
            r = slice(r0, min(m, r0 + step))
            dist = (np.abs(zq[r, None, :] - zk[None, :, :]) ** power).sum(axis=2)
            if exclude is not None:
                dist[own_positions(ok, exclude[r])] = np.inf
            usable = np.isfinite(dist)
            anchor = np.argmin(dist, axis=1)

            def relative(anchor: NDArray[np.intp], r: slice = r, usable: Any = usable) -> Any:
                lr = _log_ratio(kern, qq[r, None, :], keys[anchor][:, None, :], keys[None, :, :], h)
                lr += lsw[None, :] - lsw[anchor][:, None]
                lr[np.isnan(lr) | ~usable] = -np.inf
                return lr

            lr = relative(anchor)
            for i in np.nonzero((lr > 0).any(axis=1))[0]:
                # the anchor should hold the largest weight: a tournament over the keys that beat
                # it (exact comparisons; distances in floats may tie where weights do not)
                best = int(anchor[i])
                for c in np.nonzero(lr[i] > 0)[0]:
                    gain = _log_ratio(kern, qq[r][i, None], keys[best, None], keys[c, None], h)[0]
                    if gain + lsw[c] - lsw[best] > 0:
                        best = int(c)
                anchor[i] = best
            lr = relative(anchor)
            lr[np.isposinf(lr)] = 0.0  # cannot be ordered in float64: counted as a tie
            top = lr.max(axis=1)
            w = np.exp(lr - np.where(np.isfinite(top), top, 0.0)[:, None])
            shift[r], weight[r], value[r], anchor_idx[r] = top, w.sum(axis=1), w @ vals, anchor
            if moments:
                for mine, sums in zip(mom, _moment_sums(w, qq[r], keys, vals, moments)):
                    mine[r] = sums
        a = keys[anchor_idx]
        alog = kern.log_profile((qq - a) / h).sum(axis=1) + lsw[anchor_idx]  # type: ignore[misc]
    alog[np.isnan(alog)] = -np.inf
    return Partials(shift, weight, value, mom), a, lsw[anchor_idx], alog


def _far_rows(
    parts: Partials,
    q: NDArray[np.floating],
    k: NDArray[np.floating],
    v: NDArray[np.floating],
    sw: NDArray[np.floating] | None,
    exclude: NDArray[np.integer] | None,
    kern: Kernel,
    bandwidth: NDArray[np.floating],
    moments: int = 0,
) -> tuple[Partials, _Far | None]:
    """Replace the partials of the queries far from every key of this chunk (largest log
    weight below the single-machine path's limit, or overflowed) by partials relative to an
    anchor key (their moment sums of degree ``moments`` too), marked in a :class:`_Far`;
    None where there are none."""
    if not kern.log_domain or getattr(kern, "log_ratio", None) is None:
        return parts, None
    with np.errstate(invalid="ignore"):
        rows = np.nonzero(~(parts.shift >= FAR_LOG_WEIGHT) | ~(parts.weight > 0))[0]
    if rows.size == 0:
        return parts, None
    rel, anchor, alsw, alog = _far_partials(q[rows], k, v, sw, None if exclude is None else exclude[rows],
                                            kern, bandwidth, moments)
    found = np.isfinite(rel.shift)  # rows with no usable key stay empty
    rows, idx = rows[found], np.nonzero(found)[0]
    if rows.size == 0:
        return parts, None
    m, d = q.shape
    out = Partials(parts.shift.copy(), parts.weight.copy(), parts.value.copy(),
                   tuple(s.copy() for s in parts.moments))
    out.shift[rows], out.weight[rows], out.value[rows] = rel.shift[idx], rel.weight[idx], rel.value[idx]
    for mine, theirs in zip(out.moments, rel.moments):
        mine[rows] = theirs[idx]
    far = _Far.none(m, d)
    far.rows[rows] = True
    far.query[rows] = q[rows]
    far.anchor[rows], far.anchor_lsw[rows], far.anchor_log[rows] = anchor[idx], alsw[idx], alog[idx]
    return out, far


def _merge_far(
    a: tuple[Partials, _Far | None], b: tuple[Partials, _Far | None], kern: Kernel, h: NDArray[np.floating]
) -> tuple[Partials, _Far | None]:
    """Merge two chunks' partials where some rows may be far (relative to an anchor). Exact:
    a row far in both is rebased onto the anchor of larger weight; a row far in one only is
    turned back into absolute log weights (the other chunk's keys dominate it)."""
    (pa, fa), (pb, fb) = a, b
    if fa is None and fb is None:
        return merge(pa, pb), None
    m, d = pa.value.shape[0], (fa or fb).query.shape[1]  # type: ignore[union-attr]
    fa, fb = fa or _Far.none(m, d), fb or _Far.none(m, d)
    both = fa.rows & fb.rows
    sa, sb = pa.shift.copy(), pb.shift.copy()
    # far on one side only: where the other side saw no key it stays far (merging adds nothing);
    # where the other saw keys that are not far, it becomes absolute (dominated by them)
    keep_a, keep_b = fa.rows & ~fb.rows & ~(pb.weight > 0), fb.rows & ~fa.rows & ~(pa.weight > 0)
    one_a, one_b = fa.rows & ~fb.rows & ~keep_a, fb.rows & ~fa.rows & ~keep_b
    sa[one_a] += fa.anchor_log[one_a]
    sb[one_b] += fb.anchor_log[one_b]
    rows = both | keep_a | keep_b
    far = _Far(rows, fa.query.copy(), fa.anchor.copy(), fa.anchor_lsw.copy(), fa.anchor_log.copy())
    for field in ("query", "anchor", "anchor_lsw", "anchor_log"):
        getattr(far, field)[keep_b] = getattr(fb, field)[keep_b]
    if both.any():
        i = np.nonzero(both)[0]
        rel = _log_ratio(kern, fa.query[i], fa.anchor[i], fb.anchor[i], np.asarray(h, np.float64))
        rel = rel + fb.anchor_lsw[i] - fa.anchor_lsw[i]  # log w(anchor b) - log w(anchor a)
        lost = np.isnan(rel)  # features pulling by +-inf (overflowed): the nearer anchor wins
        if lost.any():
            power = float(getattr(kern, "far_power", 2.0))
            da_ = _log_dist(fa.query[i[lost]], fa.anchor[i[lost]], h, power)
            db_ = _log_dist(fa.query[i[lost]], fb.anchor[i[lost]], h, power)
            rel[lost] = np.where(db_ < da_, np.inf, -np.inf)
        take_b = rel > 0
        sa[i[take_b]] -= rel[take_b]
        sb[i[~take_b]] += rel[~take_b]
        j = i[take_b]
        far.anchor[j], far.anchor_lsw[j], far.anchor_log[j] = fb.anchor[j], fb.anchor_lsw[j], fb.anchor_log[j]
    merged = merge(Partials(sa, pa.weight, pa.value, pa.moments),
                   Partials(sb, pb.weight, pb.value, pb.moments))
    return merged, (far if rows.any() else None)


def _merge_all_far(
    *items: tuple[Partials, _Far | None], kernel: str, bandwidth: NDArray[np.floating]
) -> tuple[Partials, _Far | None]:
    """One merge task of predictions: left to right."""
    kern = get_kernel(kernel)
    acc = items[0]
    for item in items[1:]:
        acc = _merge_far(acc, item, kern, bandwidth)
    return acc


def _log_dist(q: NDArray[Any], k: NDArray[Any], h: NDArray[Any], power: float = 2.0) -> NDArray[np.float64]:
    """``log sum_j |(q_j - k_j) / h_j| ** power`` per row (the log squared distance by
    default), without overflow."""
    q, k, h = (np.asarray(a, dtype=np.float64) for a in (q, k, h))
    with np.errstate(divide="ignore", invalid="ignore"):
        lu = power * (np.log(np.abs(0.5 * q - 0.5 * k)) + math.log(2.0) - np.log(h))
        top = lu.max(axis=-1)
        safe = np.where(np.isfinite(top), top, 0.0)
        return np.where(np.isfinite(top), safe + np.log(np.exp(lu - safe[..., None]).sum(axis=-1)), top)
