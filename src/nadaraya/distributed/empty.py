"""Empty windows on Dask: nearest-key candidates per shard, and the ``empty=`` policy per query chunk."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from nadaraya._core.call import Call
from nadaraya._core.finish import fill_empty, report_empty
from nadaraya._core.nearest import _nearest, exact_distance
from nadaraya.distributed.far import _log_dist
from nadaraya.distributed.inputs import _zero_weights
from nadaraya.kernels import get as get_kernel
from nadaraya.partials import Partials


def _nearest_block(
    q: NDArray[np.floating],
    k: NDArray[np.floating],
    v: NDArray[np.floating],
    sw: NDArray[np.floating] | None,
    exclude: str | None,
    *,
    bandwidth: NDArray[np.float64],
    kernel: str | None = None,
    engine: str | None = None,
) -> tuple[NDArray[Any], ...]:
    """For ``empty="nearest"``: per query, the nearest usable keys of this chunk (ties
    included, as on one machine): ``(log squared distance (inf if none), sample-weighted sum
    of their values, sum of their weights, one of them, the query)``. The nearest keys do not
    depend on the ``kernel`` and ``engine`` of the other tasks (accepted, unused)."""
    m, p = q.shape[0], v.shape[1]
    logd, vsum, wsum = np.full(m, np.inf), np.zeros((m, p)), np.zeros(m)
    rep, qq = np.full((m, q.shape[1]), np.nan), np.asarray(q, dtype=np.float64)
    if m == 0 or k.shape[0] == 0 or (sw is not None and not (sw > 0).any()):
        return logd, vsum, wsum, rep, qq
    call = Call(q, k, v, False, get_kernel("constant"), bandwidth, sw)
    rows = np.arange(m)
    sets = _nearest(call, rows, None if exclude is None else rows)
    if isinstance(sets, np.ndarray) and sets.dtype.kind == "i":  # one index per row, -1 for none
        sets = [np.array([i]) if i >= 0 else np.empty(0, np.intp) for i in sets]
    for i, near in enumerate(sets):
        if near.size:
            w = np.ones(near.size) if sw is None else sw[near].astype(np.float64)
            vsum[i], wsum[i], rep[i] = w @ v[near].astype(np.float64), w.sum(), k[near[0]]
    found = wsum > 0
    logd[found] = _log_dist(qq[found], rep[found], bandwidth)
    return logd, vsum, wsum, rep, qq


def _nearest_merge(
    *cands: tuple[NDArray[Any], ...], bandwidth: NDArray[np.float64]
) -> tuple[NDArray[Any], ...]:
    """The nearer of candidates; where their distances are within rounding, compared exactly,
    and equally near keys pooled together."""
    logd, vsum, wsum, rep, qq = (a.copy() for a in cands[0])
    for d2, v2, w2, r2, _ in cands[1:]:
        with np.errstate(invalid="ignore"):  # inf - inf where a shard has no usable key
            near = np.abs(d2 - logd) <= 1e-9 * np.maximum(1.0, np.abs(logd))
        close = np.isfinite(d2) & np.isfinite(logd) & near
        better = (d2 < logd) & ~close
        for i in np.nonzero(close)[0]:
            mine, theirs = exact_distance(qq[i], rep[i], bandwidth), exact_distance(qq[i], r2[i], bandwidth)
            if theirs < mine:
                better[i] = True
            elif theirs == mine:
                vsum[i] += v2[i]
                wsum[i] += w2[i]
        logd[better], vsum[better], wsum[better], rep[better] = d2[better], v2[better], w2[better], r2[better]
    return logd, vsum, wsum, rep, qq


def _finish(
    merged: Any,
    fallback: Any,
    positive: Any = True,
    *,
    empty: str,
    one_d: bool,
    start: int,
    kernel: str,
    bandwidth: NDArray[np.float64],
) -> NDArray[np.floating]:
    """Predictions of one query chunk, with the ``empty=`` policy of the single-machine path
    (:func:`nadaraya._core.finish.report_empty` without the warning, which a lazy result cannot
    give at call time, and :func:`nadaraya._core.finish.fill_empty`); ``fallback`` is the
    constant-kernel Partials ("mean": one row for all queries, or one per query for
    leave-one-out) or the nearest candidates ("nearest"); ``positive`` whether some sample
    weight is positive (a ValueError as on one machine where none is)."""
    _zero_weights(positive)
    parts: Partials = merged[0] if isinstance(merged, tuple) else merged
    out = parts.finalize()
    rows = np.nonzero(parts.empty)[0]
    if rows.size == 0:
        return out[:, 0] if one_d else out
    report_empty(rows.size, out.shape[0], empty, get_kernel(kernel), bandwidth,
                 where=f" in the chunk starting at row {start}", warn=False)

    def nearest(rows: NDArray[np.intp]) -> tuple[NDArray[Any], NDArray[np.bool_]]:
        _, vsum, wsum, _, _ = fallback
        found = wsum[rows] > 0
        vals = np.full(vsum[rows].shape, np.nan)
        vals[found] = vsum[rows[found]] / wsum[rows[found], None]
        return vals, found

    def mean(rows: NDArray[np.intp]) -> tuple[NDArray[Any], NDArray[np.bool_]]:
        """Per query (leave-one-out), or one row for all."""
        fin = fallback.finalize()
        vals = fin[rows] if fin.shape[0] > 1 else np.broadcast_to(fin[0], (rows.size, fin.shape[1]))
        return vals, np.ones(rows.size, dtype=bool)

    fill_empty(out, rows, empty, nearest=nearest, mean=mean)
    return out[:, 0] if one_d else out
