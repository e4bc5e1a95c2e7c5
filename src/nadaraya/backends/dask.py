"""The Dask backend: exact attention pooling over row-chunked Dask arrays, on any Dask scheduler.

Keys and values are sharded in row chunks, queries too. Each (query chunk, key chunk) task
computes the :class:`~nadaraya.partials.Partials` of its queries over its keys with the
single-machine engine (``backend="auto"``, resolved on the worker); the partials of one query
chunk merge with :func:`nadaraya.partials.merge_all` in a tree of fixed shape
(``split_every`` partials per merge, always in key-chunk order), so the same inputs give
bit-identical results on every run, whatever the scheduler and the timing. Only partials
move between workers: ``m x (p + 2)`` floats per key chunk. Nothing gathers the training
data on one machine and no task builds an ``(m, n)`` block (each engine streams its block
within the working memory).

Leave-one-out masks each point's own term in the diagonal blocks only (queries are the keys,
in the same chunks; the exclude index is relative to the key chunk).

Hostile input gets the single-machine path's errors: NumPy arguments are checked at the call
by :mod:`nadaraya._validation` itself; Dask arguments by dtype and shape at the call (complex,
dates, durations and text refused, naming the argument) and by value chunk by chunk when
computed (NaN, inf, negative weights, with the row in the whole array; weights zero
everywhere). Chunks of zero rows are dropped from the shards. A query far from every key of
a chunk (log weights below ``nadaraya.pooling.FAR_LOG_WEIGHT``, or overflowed) gets partials
relative to an anchor key of that chunk, through the kernel's ``log_ratio``; merges rebase
them exactly onto the anchor of larger weight, so far queries get the same limit as on one
machine.

Entry points: :func:`pool` (Dask arrays in, a lazy Dask array out; ``nadaraya.pool`` and
``nadaraya.loo_pool`` route Dask input here), :func:`partials` (the backend protocol, used
by ``backend="dask"`` for NumPy input, chunked as :func:`options` says),
:func:`rule_of_thumb` (Scott/Silverman with Dask reductions, exact quartiles) and the
estimator hooks :func:`fit` and :func:`predict`.

Examples
--------
>>> import numpy as np, dask.array as da, nadaraya
>>> from nadaraya.backends import dask as nd
>>> x = da.from_array(np.linspace(0, 1, 10), chunks=4)
>>> out = nd.pool(x, x, 2 * x, bandwidth=0.2)
>>> out.chunks
((4, 4, 2),)
>>> xs = x.compute()
>>> bool(np.allclose(out.compute(), nadaraya.pool(xs, xs, 2 * xs, bandwidth=0.2), rtol=1e-12))
True
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeVar

import dask
import dask.array as da
import numpy as np
from numpy.typing import ArrayLike, NDArray

from .. import backends
from .._validation import as_bandwidth, as_empty, as_points, as_sample_weight, as_values, pick_dtype
from ..kernels import Kernel
from ..kernels import get as get_kernel
from ..partials import Partials, concat, merge, merge_all
from ..partials import empty as empty_partials

__all__ = [
    "fit",
    "is_dask",
    "options",
    "partials",
    "pool",
    "predict",
    "robust_scale",
    "rule_of_thumb",
    "supports",
    "tree_merge",
]

T = TypeVar("T")

_DEFAULTS: dict[str, Any] = {"chunks": None, "split_every": 8, "engine": "auto"}
_options = threading.local()


def _opts() -> dict[str, Any]:
    if not hasattr(_options, "value"):
        _options.value = dict(_DEFAULTS)
    return _options.value  # type: ignore[no-any-return]


@contextlib.contextmanager
def options(
    *, chunks: int | None = None, split_every: int | None = None, engine: str | None = None
) -> Iterator[dict[str, Any]]:
    """Settings of the Dask path inside a ``with`` block (this thread only).

    Parameters
    ----------
    chunks : int, optional
        Rows per chunk when NumPy input is sent through ``backend="dask"`` (Dask input keeps
        its own chunks). Default: ``max(4096, ceil(rows / 8))``.
    split_every : int, optional
        How many partials one merge task combines (default 8); the tree has
        ``ceil(log(key chunks) / log(split_every))`` levels.
    engine : str, optional
        The single-machine backend each task runs (default ``"auto"``, resolved on the
        worker).

    Examples
    --------
    >>> import numpy as np, nadaraya
    >>> from nadaraya.backends import dask as nd
    >>> x = np.linspace(0, 1, 50)
    >>> with nd.options(chunks=7, split_every=2):
    ...     f = nadaraya.pool(x, x, x, bandwidth=0.1, backend="dask")
    >>> bool(np.allclose(f, nadaraya.pool(x, x, x, bandwidth=0.1), rtol=1e-12))
    True
    """
    if chunks is not None and not (isinstance(chunks, int | np.integer) and chunks >= 1):
        raise ValueError(f"chunks must be a positive integer (rows per chunk); got {chunks!r}")
    if split_every is not None and not (isinstance(split_every, int | np.integer) and split_every >= 2):
        raise ValueError(f"split_every must be an integer of at least 2; got {split_every!r}")
    if engine is not None and (engine not in backends.NAMES or engine == "dask"):
        valid = ", ".join(n for n in backends.NAMES if n != "dask")
        raise ValueError(f"engine={engine!r} is not a single-machine backend; valid names are: {valid}")
    state = _opts()
    old = dict(state)
    state.update({k: v for k, v in (("chunks", chunks), ("split_every", split_every), ("engine", engine))
                  if v is not None})
    try:
        yield dict(state)
    finally:
        state.clear()
        state.update(old)


def supports(kernel: Kernel, d: int) -> bool:
    """Every kernel in any number of features (the tasks run a single-machine engine).

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> supports(get("tricube"), 3)
    True
    """
    return True


def is_dask(*arrays: Any) -> bool:
    """Whether any argument is a Dask collection.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> is_dask(np.ones(2), da.ones(2))
    True
    """
    return any(dask.is_dask_collection(a) for a in arrays)


# --------------------------------------------------------------------------- the merge tree


def tree_merge(items: Sequence[T], combine: Callable[..., T], split_every: int) -> T:
    """Reduce ``items`` with ``combine`` in a tree of fixed shape.

    Consecutive groups of ``split_every`` items are combined, level after level, always in
    the given order: the shape of the tree depends only on ``len(items)`` and
    ``split_every``, so a floating-point reduction gives the same bits on every run.

    Examples
    --------
    >>> tree_merge(list("abcde"), lambda *s: "(" + "".join(s) + ")", split_every=2)
    '(((ab)(cd))e)'
    """
    if not items:
        raise ValueError("tree_merge() needs at least one item")
    level = list(items)
    while len(level) > 1:
        level = [
            level[s] if len(level[s : s + split_every]) == 1 else combine(*level[s : s + split_every])
            for s in range(0, len(level), split_every)
        ]
    return level[0]


def _merge(*parts: Partials) -> Partials:
    """One merge task: left to right."""
    return merge_all(parts)


# --------------------------------------------------------------------------- tasks


def _dtype_error(name: str, dtype: np.dtype) -> ValueError:
    """The error for an array whose dtype is not real numbers (complex, dates, text...)."""
    if dtype.kind == "c":
        what = f"complex values (dtype {dtype}); pass their real part or modulus explicitly"
    elif dtype.kind in "mM":
        kind = "dates" if dtype.kind == "M" else "durations"
        what = f"{kind} (dtype {dtype}); convert them to numbers first (for example seconds since a start)"
    else:
        what = f"dtype {dtype}"
    return ValueError(f"{name} must be real numbers; got {what}. Allowed: bool, integer or float dtypes")


def _to_real(block: NDArray[Any], name: str) -> NDArray[np.float64]:
    """One chunk of an object-dtype Dask array as float64, or a clear error naming the argument."""
    try:
        return np.asarray(block, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name} must be real numbers; got an entry that is not ({exc}). Allowed: bool, integer or float"
        ) from exc


def _check_chunk(
    block: NDArray[Any], name: str, kind: str = "points", block_info: dict[Any, Any] | None = None
) -> NDArray[Any]:
    """Lazy validation of one chunk (run once per chunk, in the graph), with the same messages as
    the NumPy path and the row numbers of the whole array: ``kind`` is ``"points"`` (keys,
    queries: finite), ``"values"`` (finite) or ``"weights"`` (finite and non-negative)."""
    start = int(block_info[0]["array-location"][0][0]) if block_info else 0
    if kind == "weights":
        bad = ~(np.isfinite(block) & (block >= 0))
        if bad.any():
            row = int(np.argwhere(bad)[0, 0])
            raise ValueError(f"{name} must be finite and non-negative; got {float(block[row, 0])!r} "
                             f"at row {start + row}")
        return block
    bad = ~np.isfinite(block)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        where = f"row {start + row}" if kind == "values" else f"row {start + row}, column {col}"
        raise ValueError(
            f"{name} contains NaN or inf ({int(bad.sum())} entries in rows {start} to "
            f"{start + block.shape[0] - 1}; the first at {where}: {float(block[row, col])!r})"
        )
    return block


def _zero_weights(positive: Any) -> None:
    if not bool(positive):
        raise ValueError("sample_weight is zero everywhere; at least one key needs a positive weight")


def _block(
    q: NDArray[np.floating],
    k: NDArray[np.floating],
    v: NDArray[np.floating],
    sw: NDArray[np.floating] | None,
    exclude: NDArray[np.integer] | str | None,
    *,
    kernel: str,
    bandwidth: NDArray[np.float64],
    engine: str,
    far: bool = False,
) -> Any:
    """Partials of one query chunk over one key chunk, on the worker that runs it.

    ``exclude``: ``"diagonal"`` (the query chunk is the key chunk: leave out row ``i`` for
    query ``i``), an index relative to the key chunk per query (-1 for none), or None.
    With ``far=True`` (predictions) the result is ``(Partials, _Far or None)``: the queries
    of a log-domain kernel that are far from every key of this chunk hold partials relative
    to an anchor key (see :class:`_Far`), so that chunks far from a query still merge exactly.
    """
    kern = get_kernel(kernel)
    m, p = q.shape[0], v.shape[1]
    if m == 0 or k.shape[0] == 0:  # an empty chunk contributes nothing
        nothing = empty_partials(m, p, np.result_type(q.dtype, v.dtype), kern.log_domain)
        return (nothing, None) if far else nothing
    q, k, v = (np.ascontiguousarray(a) for a in (q, k, v))
    if isinstance(exclude, str):
        exclude = np.arange(m)
    choice = backends.choose(kern, n=k.shape[0], m=m, d=k.shape[1], bandwidth=bandwidth,
                             backend=engine)
    if choice.name == "fused":
        _share_cores_with_worker()
    sw = None if sw is None else np.ascontiguousarray(sw)
    parts = backends.compute(choice.name, q, k, v, kernel=kern, bandwidth=bandwidth,
                             sample_weight=sw, exclude=exclude)
    if not far:
        return parts
    return _far_rows(parts, q, k, v, sw, exclude, kern, bandwidth)


def _share_cores_with_worker() -> None:
    """Inside a Dask worker, give numba's parallel loops as many threads as the worker has
    (``threads_per_worker``), so that workers sharing a machine do not oversubscribe it."""
    try:
        from distributed import get_worker

        nthreads = get_worker().state.nthreads
    except (ImportError, ValueError):  # not running on a distributed worker
        return
    import numba

    numba.set_num_threads(max(1, min(nthreads, numba.config.NUMBA_NUM_THREADS)))


# --------------------------------------------------------------------------- far queries


def _far_limit() -> float:
    """The log weight below which the single-machine path recomputes a query relative to its
    nearest key (``nadaraya.pooling.FAR_LOG_WEIGHT``); the Dask path uses the same."""
    from .. import pooling

    return float(getattr(pooling, "FAR_LOG_WEIGHT", -1024.0))


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


def _register_sizes() -> None:
    """Let dask count a Partials (and a far-query record) by its arrays' bytes: without this,
    ``dask.sizeof`` sees a dataclass and counts about 56 bytes, so the scheduler's memory
    accounting and transfer logs miss what the partials weigh."""
    from dask.sizeof import sizeof

    def arrays(obj: Any) -> int:
        return int(sum(getattr(getattr(obj, f.name), "nbytes", 0) for f in dataclasses.fields(obj)))

    sizeof.register(Partials)(arrays)
    sizeof.register(_Far)(arrays)


_register_sizes()


def _unit(q: NDArray[np.float64], k: NDArray[np.float64], h: NDArray[np.float64]) -> tuple[Any, Any]:
    """Queries and keys in ``x / h`` coordinates times one factor that brings the largest to
    magnitude one (distances compare as in ``x / h`` and never overflow)."""
    with np.errstate(divide="ignore"):
        reach = np.log2(np.maximum(np.abs(q).max(axis=0), np.abs(k).max(axis=0))) - np.log2(h)
    top = float(reach[np.isfinite(reach)].max()) if np.isfinite(reach).any() else 0.0
    factor = np.exp2(-np.log2(h) - top)
    return q * factor, k * factor


def _log_ratio(kern: Kernel, q: Any, a: Any, b: Any, h: Any) -> Any:
    """``log K(key b) - log K(key a)`` for queries ``q`` (rows), summed over features, by the
    kernel's ``log_ratio``; where that overflows (``(q - a) / h`` beyond the float range), from
    the far-field form of the kernel in log magnitudes (:func:`_far_log_ratio`)."""
    with np.errstate(all="ignore"):
        lr = kern.log_ratio((q - a) / h, (a - b) / h).sum(axis=-1)  # type: ignore[attr-defined]
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
) -> tuple[Partials, NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Partials of queries over one chunk's keys relative to an anchor key per query (the
    nearest in the kernel's ``far_power`` distance, moved to the largest weight), as
    :func:`nadaraya.pooling` recomputes far queries; with the anchors and their log weights.
    Rows with no usable key get ``shift = -inf``."""
    m, p = q.shape[0], v.shape[1]
    n, d = k.shape
    ok = np.arange(n) if sw is None else np.nonzero(sw > 0)[0]
    keys = k[ok].astype(np.float64)
    vals = v[ok].astype(np.float64)
    h = np.asarray(bandwidth, dtype=np.float64)
    lsw = np.zeros(ok.size) if sw is None else np.log(sw[ok].astype(np.float64))
    shift, weight, value = np.full(m, -np.inf), np.zeros(m), np.zeros((m, p))
    anchor_idx = np.zeros(m, dtype=np.intp)
    if ok.size == 0:
        return Partials(shift, weight, value), np.full((m, d), np.nan), np.zeros(m), np.full(m, -np.inf)
    qq = q.astype(np.float64)
    zq, zk = _unit(qq, keys, h)
    power = float(getattr(kern, "far_power", 2.0))
    step = max(1, (32 * 2**20) // (8 * 4 * max(d, 1) * ok.size))
    with np.errstate(all="ignore"):
        for r0 in range(0, m, step):
            r = slice(r0, min(m, r0 + step))
            dist = (np.abs(zq[r, None, :] - zk[None, :, :]) ** power).sum(axis=2)
            if exclude is not None:
                own = np.searchsorted(ok, exclude[r])
                mine = (own < ok.size) & (ok[np.minimum(own, ok.size - 1)] == exclude[r])
                dist[np.nonzero(mine)[0], own[mine]] = np.inf
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
        a = keys[anchor_idx]
        alog = kern.log_profile((qq - a) / h).sum(axis=1) + lsw[anchor_idx]  # type: ignore[misc]
    alog[np.isnan(alog)] = -np.inf
    return Partials(shift, weight, value), a, lsw[anchor_idx], alog


def _far_rows(
    parts: Partials,
    q: NDArray[np.floating],
    k: NDArray[np.floating],
    v: NDArray[np.floating],
    sw: NDArray[np.floating] | None,
    exclude: NDArray[np.integer] | None,
    kern: Kernel,
    bandwidth: NDArray[np.floating],
) -> tuple[Partials, _Far | None]:
    """Replace the partials of the queries far from every key of this chunk (largest log
    weight below the single-machine path's limit, or overflowed) by partials relative to an
    anchor key, marked in a :class:`_Far`; None where there are none."""
    if not kern.log_domain or getattr(kern, "log_ratio", None) is None:
        return parts, None
    with np.errstate(invalid="ignore"):
        rows = np.nonzero(~(parts.shift >= _far_limit()) | ~(parts.weight > 0))[0]
    if rows.size == 0:
        return parts, None
    rel, anchor, alsw, alog = _far_partials(q[rows], k, v, sw, None if exclude is None else exclude[rows],
                                            kern, bandwidth)
    found = np.isfinite(rel.shift)  # rows with no usable key stay empty
    rows, idx = rows[found], np.nonzero(found)[0]
    if rows.size == 0:
        return parts, None
    m, d = q.shape
    out = Partials(parts.shift.copy(), parts.weight.copy(), parts.value.copy())
    out.shift[rows], out.weight[rows], out.value[rows] = rel.shift[idx], rel.weight[idx], rel.value[idx]
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
    merged = merge(Partials(sa, pa.weight, pa.value), Partials(sb, pb.weight, pb.value))
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


# --------------------------------------------------------------------------- empty="nearest"


def _log_dist(q: NDArray[Any], k: NDArray[Any], h: NDArray[Any], power: float = 2.0) -> NDArray[np.float64]:
    """``log sum_j |(q_j - k_j) / h_j| ** power`` per row (the log squared distance by
    default), without overflow."""
    q, k, h = (np.asarray(a, dtype=np.float64) for a in (q, k, h))
    with np.errstate(divide="ignore", invalid="ignore"):
        lu = power * (np.log(np.abs(0.5 * q - 0.5 * k)) + math.log(2.0) - np.log(h))
        top = lu.max(axis=-1)
        safe = np.where(np.isfinite(top), top, 0.0)
        return np.where(np.isfinite(top), safe + np.log(np.exp(lu - safe[..., None]).sum(axis=-1)), top)


def _exact_sqdist(q: NDArray[Any], k: NDArray[Any], h: NDArray[Any]) -> Fraction:
    """The squared distance of ``(q - k) / h`` in exact rational arithmetic (for ties)."""
    return sum((((Fraction(float(a)) - Fraction(float(b))) / Fraction(float(c))) ** 2
                for a, b, c in zip(q, k, h)), Fraction(0))


def _nearest_block(
    q: NDArray[np.floating],
    k: NDArray[np.floating],
    v: NDArray[np.floating],
    sw: NDArray[np.floating] | None,
    exclude: str | None,
    *,
    bandwidth: NDArray[np.float64],
) -> tuple[NDArray[Any], ...]:
    """For ``empty="nearest"``: per query, the nearest usable keys of this chunk (ties
    included, as on one machine): ``(log squared distance (inf if none), sample-weighted sum
    of their values, sum of their weights, one of them, the query)``."""
    from ..pooling import Call, _nearest

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
        near = np.abs(d2 - logd) <= 1e-9 * np.maximum(1.0, np.abs(logd))
        close = np.isfinite(d2) & np.isfinite(logd) & near
        better = (d2 < logd) & ~close
        for i in np.nonzero(close)[0]:
            mine, theirs = _exact_sqdist(qq[i], rep[i], bandwidth), _exact_sqdist(qq[i], r2[i], bandwidth)
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
) -> NDArray[np.floating]:
    """Predictions of one query chunk, with the ``empty=`` policy; ``fallback`` is the
    constant-kernel Partials ("mean": one row for all queries, or one per query for
    leave-one-out) or the nearest candidates ("nearest"); ``positive`` whether some sample
    weight is positive (a ValueError as on one machine where none is)."""
    _zero_weights(positive)
    parts: Partials = merged[0] if isinstance(merged, tuple) else merged
    out = parts.finalize()
    rows = np.nonzero(parts.empty)[0]
    if rows.size:
        if empty == "raise":
            raise ValueError(
                f"{rows.size} of the {out.shape[0]} queries starting at row {start} have no key with "
                "positive weight within the kernel's support; pass empty='nan', 'nearest' or 'mean', "
                "or a larger bandwidth"
            )
        if empty == "nearest":
            _, vsum, wsum, _, _ = fallback
            good = rows[wsum[rows] > 0]
            out[good] = vsum[good] / wsum[good, None]
        elif empty == "mean":  # per query (leave-one-out) or one row for all
            mean: Partials = fallback
            out[rows] = mean.finalize()[rows if mean.weight.shape[0] > 1 else 0]
    return out[:, 0] if one_d else out


# --------------------------------------------------------------------------- graph building


def _auto_rows(n: int) -> int:
    return min(n, max(4096, -(-n // 8)))


def _known_rows(name: str, a: Any) -> None:
    """Refuse a Dask array whose row count is unknown (before it is compared with another)."""
    if getattr(a, "ndim", 0) and math.isnan(a.shape[0]):
        raise ValueError(f"{name} has unknown chunk sizes; call .compute_chunk_sizes() on it first")


def _as_rows(
    name: str, a: Any, dtype: np.dtype, chunks: int | Sequence[int] | None, like: Any = None,
    kind: str = "points", keep_empty_chunks: bool = False,
) -> da.Array:
    """A validated 2-D Dask array chunked by rows only (the columns in one chunk).

    NumPy input must already be validated (by :mod:`nadaraya._validation`, so that its errors
    are the NumPy path's); Dask input is checked here: its dtype at once, its values lazily,
    chunk by chunk (:func:`_check_chunk` with ``kind``). Chunks of zero rows are dropped (an
    empty shard adds nothing) unless ``keep_empty_chunks`` (queries: one output chunk per
    query chunk); ``like`` gives the row chunks to follow (values and weights follow the keys).
    """
    if not dask.is_dask_collection(a):
        a = np.asarray(a)
        rows = like if like is not None else (chunks or _auto_rows(max(1, a.shape[0] if a.ndim else 1)))
        a = da.from_array(a, chunks=(rows, *a.shape[1:]) if a.ndim else ())
    elif a.dtype.kind == "O":
        a = a.map_blocks(_to_real, name, dtype=np.float64)
    elif a.dtype.kind not in "biuf":
        raise _dtype_error(name, a.dtype)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise ValueError(f"{name} must be a 1-D or 2-D array; got shape {a.shape}")
    if any(math.isnan(s) for s in a.shape):
        raise ValueError(f"{name} has unknown chunk sizes; call .compute_chunk_sizes() on it first")
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {a.shape}); at least one row and one feature are needed")
    if like is not None:
        rows = tuple(like)
    elif keep_empty_chunks:
        rows = a.chunks[0]
    else:
        rows = tuple(c for c in a.chunks[0] if c)
    check = np.dtype(np.float64) if kind == "weights" else dtype  # weights are checked before a cast
    a = a.astype(check).rechunk({0: rows, 1: -1}).map_blocks(_check_chunk, name, kind, dtype=check)
    return a.astype(dtype)


def _points_rows(name: str, X: Any) -> da.Array:
    """A float64 Dask array of points, rows chunked (for the rules of thumb)."""
    f64 = np.dtype(np.float64)
    return _as_rows(name, X if is_dask(X) else as_points(name, X, f64), f64, None)


def _dask_weights(sample_weight: Any, n: int, dtype: np.dtype) -> Any:
    """Sample weights of shape (n,): NumPy ones checked at once by the NumPy path's own check
    (zero everywhere included), Dask ones checked for shape here and by value when computed."""
    if not is_dask(sample_weight):
        return as_sample_weight(sample_weight, n, dtype)
    sw = sample_weight
    _known_rows("sample_weight", sw)
    if sw.ndim == 0:
        sw = da.broadcast_to(sw, (n,))
    if sw.shape != (n,):
        raise ValueError(f"sample_weight must have shape ({n},); got shape {sw.shape}")
    return sw


class _Graph:
    """Validated Dask inputs of one call and the delayed tasks over them.

    NumPy arguments are validated eagerly by the NumPy path's own checks (same errors);
    Dask arguments by dtype and shape at once, by value when their chunks are computed.
    """

    def __init__(
        self,
        queries: Any,
        keys: Any,
        values: Any,
        *,
        kernel: str | Kernel,
        bandwidth: ArrayLike,
        sample_weight: Any,
        chunks: int | None,
    ) -> None:
        self.kernel = get_kernel(kernel)
        self.dtype = pick_dtype(keys, values, keys if queries is None else queries)
        if not is_dask(keys):
            keys = as_points("keys", keys, self.dtype)
        self.keys = _as_rows("keys", keys, self.dtype, chunks)
        n, d = self.keys.shape
        kchunks = self.keys.chunks[0]
        self.loo = queries is None
        if self.loo:
            self.queries = self.keys
        else:
            if not is_dask(queries):
                queries = as_points("queries", queries, self.dtype, d=d)
            self.queries = _as_rows("queries", queries, self.dtype, chunks or kchunks[0],
                                    keep_empty_chunks=True)
            if self.queries.shape[1] != d:
                raise ValueError(f"queries has {self.queries.shape[1]} features, but the keys have {d}")
        if is_dask(values):
            _known_rows("values", values)
            if values.ndim not in (1, 2):
                raise ValueError(f"values must have shape (n,) or (n, p); got shape {values.shape}")
            if values.shape[0] != n:
                raise ValueError(f"values has {values.shape[0]} rows, but keys has {n}; they must match")
            self.one_d = values.ndim == 1
        else:
            values, self.one_d = as_values(values, n, self.dtype)
        self.values = _as_rows("values", values, self.dtype, None, like=kchunks, kind="values")
        self.bandwidth = as_bandwidth(bandwidth, d)
        self.sample_weight = None
        self.positive: Any = True  # whether some weight is positive (lazy for Dask weights)
        if sample_weight is not None:
            sw = _dask_weights(sample_weight, n, self.dtype)
            self.sample_weight = _as_rows("sample_weight", sw, self.dtype, None, like=kchunks,
                                          kind="weights")[:, 0]
            if is_dask(sample_weight):
                self.positive = (self.sample_weight > 0).any()

    def _chunks(self) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
        q = list(self.queries.to_delayed().ravel())
        k = list(self.keys.to_delayed().ravel())
        v = list(self.values.to_delayed().ravel())
        sw = [None] * len(k) if self.sample_weight is None else list(self.sample_weight.to_delayed().ravel())
        return q, k, v, sw

    def partials(
        self, split_every: int, engine: str, exclude: NDArray[np.integer] | None = None, far: bool = False
    ) -> list[Any]:
        """One delayed merged Partials per query chunk (``far=True``: ``(Partials, _Far)``)."""
        q, k, v, sw = self._chunks()
        block = dask.delayed(_block, pure=True)
        if far:
            combine = dask.delayed(functools.partial(_merge_all_far, kernel=self.kernel.name,
                                                     bandwidth=self.bandwidth), pure=True)
        else:
            combine = dask.delayed(_merge, pure=True)
        qstarts = np.cumsum((0, *self.queries.chunks[0]))
        kstarts = np.cumsum((0, *self.keys.chunks[0]))
        out = []
        for i, qi in enumerate(q):
            row = []
            for j, kj in enumerate(k):
                ex: Any = "diagonal" if self.loo and i == j else None
                if exclude is not None:  # a general exclude (NumPy input): relative to the key chunk
                    rel = exclude[qstarts[i] : qstarts[i + 1]] - kstarts[j]
                    inside = (rel >= 0) & (rel < kstarts[j + 1] - kstarts[j])
                    ex = np.where(inside, rel, -1) if inside.any() else None
                row.append(block(qi, kj, v[j], sw[j], ex, kernel=self.kernel.name, bandwidth=self.bandwidth,
                                 engine=engine, far=far))
            out.append(tree_merge(row, combine, split_every))
        return out

    def predictions(self, empty: str, split_every: int, engine: str) -> da.Array:
        """The lazy predictions, one chunk per query chunk."""
        q, k, v, sw = self._chunks()
        merged = self.partials(split_every, engine, far=True)
        fallback: list[Any] = [None] * len(q)
        if empty == "mean" and self.loo:
            # average pooling of the other points: each point's own term masked inside the sums
            # of its diagonal block, as loo_pool does on one machine (never subtracted afterwards)
            block = dask.delayed(_block, pure=True)
            fallback = [
                tree_merge(
                    [block(qi, k[j], v[j], sw[j], "diagonal" if i == j else None, kernel="constant",
                           bandwidth=self.bandwidth, engine=engine) for j in range(len(k))],
                    dask.delayed(_merge, pure=True),
                    split_every,
                )
                for i, qi in enumerate(q)
            ]
        elif empty == "mean":  # the same for every query: one row per key chunk, merged once
            first = [kj[:1] for kj in k]
            block = dask.delayed(_block, pure=True)
            parts = [block(first[j], k[j], v[j], sw[j], None, kernel="constant", bandwidth=self.bandwidth,
                           engine="reference") for j in range(len(k))]
            fallback = [tree_merge(parts, dask.delayed(_merge, pure=True), split_every)] * len(q)
        elif empty == "nearest":
            near = dask.delayed(_nearest_block, pure=True)
            combine = dask.delayed(functools.partial(_nearest_merge, bandwidth=self.bandwidth), pure=True)
            fallback = [
                tree_merge(
                    [near(qi, k[j], v[j], sw[j], "diagonal" if self.loo and i == j else None,
                          bandwidth=self.bandwidth) for j in range(len(k))],
                    combine,
                    split_every,
                )
                for i, qi in enumerate(q)
            ]
        finish = dask.delayed(_finish, pure=True)
        p = self.values.shape[1]
        starts = np.cumsum((0, *self.queries.chunks[0]))
        pieces = []
        for i, size in enumerate(self.queries.chunks[0]):
            task = finish(merged[i], fallback[i], self.positive, empty=empty, one_d=self.one_d,
                          start=int(starts[i]))
            shape = (size,) if self.one_d else (size, p)
            pieces.append(da.from_delayed(task, shape=shape, dtype=self.dtype))
        return da.concatenate(pieces, axis=0)


# --------------------------------------------------------------------------- public entry points


def pool(
    queries: Any,
    keys: Any,
    values: Any,
    *,
    kernel: str | Kernel = "gaussian",
    bandwidth: ArrayLike = 1.0,
    empty: str = "nan",
    sample_weight: Any = None,
    split_every: int | None = None,
    engine: str | None = None,
) -> da.Array:
    """Attention pooling on Dask arrays: a lazy Dask array, one chunk per query chunk.

    The same sums as :func:`nadaraya.pool` (equal to 1e-12 relative in float64), computed
    per (query chunk, key chunk) and merged in a fixed tree. ``queries=None`` gives the
    leave-one-out predictions of the keys (:func:`nadaraya.loo_pool`). NumPy arguments are
    chunked like the keys.

    Parameters
    ----------
    queries : dask or NumPy array of shape (m, d) or (m,), or None
    keys : dask or NumPy array of shape (n, d) or (n,)
        Chunked by rows; each key chunk is one shard of the training data.
    values : array of shape (n,) or (n, p)
        Rechunked to the keys' row chunks.
    kernel, bandwidth, sample_weight
        As for :func:`nadaraya.pool`.
    empty : {"nan", "nearest", "mean", "raise"}
        As for :func:`nadaraya.pool`, applied per query chunk when it is computed. The
        result is lazy, so ``"nan"`` cannot warn at call time and does not warn; ``"raise"``
        raises when the chunk is computed. Leave-one-out with ``"mean"`` masks each point's
        own term inside the constant-kernel sums of its diagonal block, as on one machine.
    split_every : int, optional
        Partials per merge task (default from :func:`options`, 8).
    engine : str, optional
        Single-machine backend of each task (default ``"auto"``).

    Returns
    -------
    dask.array.Array of shape (m,) or (m, p)

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> keys = da.from_array(np.array([1.0, 2.0, 3.0]), chunks=2)
    >>> pool(np.array([2.5]), keys, np.array([3.0, 5.0, 4.0])).compute().round(2)
    array([4.27])
    """
    empty = as_empty(empty)
    state = _opts()
    graph = _Graph(queries, keys, values, kernel=kernel, bandwidth=bandwidth, sample_weight=sample_weight,
                   chunks=state["chunks"] if not is_dask(keys) else None)
    return graph.predictions(empty, split_every or state["split_every"], engine or state["engine"])


def partials(
    queries: NDArray[np.floating],
    keys: NDArray[np.floating],
    values: NDArray[np.floating],
    *,
    kernel: Kernel,
    bandwidth: NDArray[np.floating],
    sample_weight: NDArray[np.floating] | None = None,
    exclude: NDArray[np.integer] | None = None,
) -> Partials:
    """The backend protocol for ``backend="dask"`` on NumPy arrays: chunk, compute, merge.

    The arrays are chunked in rows as :func:`options` says and the tasks run on the current
    Dask scheduler (a ``distributed.Client`` when one is active). See
    :func:`nadaraya.backends.reference.partials` for the arguments.

    Examples
    --------
    >>> import numpy as np, nadaraya
    >>> from nadaraya.kernels import get
    >>> x = np.linspace(0, 1, 30)[:, None]
    >>> with options(chunks=8):
    ...     p = partials(x, x, x, kernel=get("gaussian"), bandwidth=np.array([0.1]))
    >>> bool(np.allclose(p.finalize(), nadaraya.pool(x, x, x, bandwidth=0.1), rtol=1e-12))
    True
    """
    state = _opts()
    loo = exclude is not None and queries is keys and np.array_equal(exclude, np.arange(keys.shape[0]))
    graph = _Graph(None if loo else queries, keys, values, kernel=kernel, bandwidth=bandwidth,
                   sample_weight=sample_weight, chunks=state["chunks"])
    tasks = graph.partials(state["split_every"], state["engine"], None if loo else exclude)
    (parts,) = dask.compute(tasks)
    return concat(parts)


# --------------------------------------------------------------------------- rules of thumb


def _weighted_quantiles(
    x: da.Array,
    w: da.Array | None,
    probs: Sequence[float],
    total: float,
    bounds: tuple[NDArray[np.floating], NDArray[np.floating]],
    limit: int = 65536,
    bins: int = 1024,
) -> NDArray[np.float64]:
    """Exact weighted quantiles (inverted CDF, as ``np.quantile(..., method="inverted_cdf")``),
    per feature, by narrowing a bracket with Dask histograms until few points are left in it.

    ``bounds`` are the per-feature minimum and maximum. Each pass is one Dask reduction over
    the data: per bracket, the weight, count, smallest and largest value in each of ``bins``
    bins; the bracket shrinks to the data inside the bin where the target weight is reached,
    so ties end the search at once. Only the points inside the final brackets (at most
    ``limit`` each) are gathered. Returns an array of shape (len(probs), d).
    """
    n, d = x.shape
    ww = da.ones(n, chunks=x.chunks[0], dtype=np.float64) if w is None else w.astype(np.float64)
    targets = np.asarray(probs, dtype=np.float64) * total
    shape = (len(probs), d)
    lo = np.broadcast_to(bounds[0], shape).astype(np.float64)
    hi = np.broadcast_to(bounds[1], shape).astype(np.float64)
    below = np.zeros(shape)  # weight of the points < lo
    count = np.full(shape, n)  # points in [lo, hi]
    result = np.where(lo == hi, lo, np.nan)
    while (todo := np.isnan(result) & (count > limit)).any():
        edges = lo[..., None] + (hi - lo)[..., None] * np.linspace(0.0, 1.0, bins + 1)

        def hist(xb: NDArray[Any], wb: NDArray[Any], edges: NDArray[Any] = edges) -> NDArray[Any]:
            out = np.zeros((1, 4, *shape, bins))
            out[0, 2], out[0, 3] = np.inf, -np.inf
            for a, j in np.ndindex(*shape):
                col = xb[:, j]
                inside = (col >= lo[a, j]) & (col <= hi[a, j])
                idx = np.clip(np.searchsorted(edges[a, j], col[inside], side="right") - 1, 0, bins - 1)
                out[0, 0, a, j] = np.bincount(idx, weights=wb[inside, 0], minlength=bins)
                out[0, 1, a, j] = np.bincount(idx, minlength=bins)
                np.minimum.at(out[0, 2, a, j], idx, col[inside])
                np.maximum.at(out[0, 3, a, j], idx, col[inside])
            return out

        per_chunk = da.map_blocks(hist, x, ww[:, None], new_axis=[2, 3, 4], dtype=np.float64,
                                  chunks=((1,) * x.numblocks[0], (4,), (shape[0],), (d,), (bins,)))
        sums, mins, maxs = dask.compute(per_chunk[:, :2].sum(axis=0), per_chunk[:, 2].min(axis=0),
                                        per_chunk[:, 3].max(axis=0))
        for a, j in zip(*np.nonzero(todo)):
            cum = below[a, j] + np.cumsum(sums[0, a, j])
            b = int(np.argmax(cum >= targets[a])) if cum[-1] >= targets[a] else bins - 1
            below[a, j] = cum[b] - sums[0, a, j, b]
            count[a, j] = int(sums[1, a, j, b])
            lo[a, j], hi[a, j] = mins[a, j, b], maxs[a, j, b]
            if lo[a, j] == hi[a, j]:
                result[a, j] = lo[a, j]
    pending = list(zip(*np.nonzero(np.isnan(result))))
    inside = [(x[:, j] >= lo[a, j]) & (x[:, j] <= hi[a, j]) for a, j in pending]
    (gathered,) = dask.compute([(x[:, j][sel], ww[sel]) for (a, j), sel in zip(pending, inside)])
    for (a, j), (vals, wts) in zip(pending, gathered):
        order = np.argsort(vals, kind="stable")
        cum = below[a, j] + np.cumsum(wts[order])
        result[a, j] = vals[order][min(int(np.argmax(cum >= targets[a])), vals.size - 1)]
    return result


def robust_scale(X: Any, sample_weight: Any = None) -> NDArray[np.float64]:
    """Per-feature ``min(std, IQR / 1.349)`` of a Dask array, as :func:`nadaraya.bandwidth.robust_scale`.

    The mean and variance are Dask reductions; the quartiles are exact (inverted CDF,
    weights as frequencies), found by narrowing brackets with Dask histograms, so only a few
    thousand points per quartile are ever gathered.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from nadaraya.bandwidth import robust_scale as plain
    >>> x = np.random.default_rng(0).normal(size=(1000, 2))
    >>> bool(np.allclose(robust_scale(da.from_array(x, chunks=300)), plain(x), rtol=1e-12))
    True
    """
    x = _points_rows("X", X)
    n = x.shape[0]
    w = None
    if sample_weight is not None:
        sw = _dask_weights(sample_weight, n, np.dtype(np.float64))
        w = _as_rows("sample_weight", sw, np.dtype(np.float64), None, like=x.chunks[0], kind="weights")[:, 0]
    ww = da.ones(n, chunks=x.chunks[0]) if w is None else w
    total, wx, bounds = dask.compute(ww.sum(), (ww[:, None] * x).sum(axis=0), (x.min(axis=0), x.max(axis=0)))
    _zero_weights(total > 0)
    mean = wx / total
    denom = total - 1.0
    var = (ww[:, None] * (x - mean) ** 2).sum(axis=0).compute() / denom if denom > 0 else np.zeros(x.shape[1])
    std = np.sqrt(np.maximum(var, 0.0))
    q75, q25 = _weighted_quantiles(x, w, (0.75, 0.25), float(total), bounds)
    iqr = (q75 - q25) / 1.349
    return np.where(iqr > 0, np.minimum(std, iqr), std)  # type: ignore[no-any-return]


def rule_of_thumb(
    X: Any, method: str = "scott", *, kernel: str | Kernel = "gaussian", sample_weight: Any = None
) -> NDArray[np.float64]:
    """:func:`nadaraya.bandwidth.rule_of_thumb` on a Dask array, with Dask reductions.

    The scale comes from :func:`robust_scale` (Dask reductions, exact quartiles); the factor
    from :func:`nadaraya.bandwidth.rule_factor`, the one place its formula lives.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from nadaraya.bandwidth import rule_of_thumb as plain
    >>> x = np.random.default_rng(1).normal(size=500)
    >>> bool(np.allclose(rule_of_thumb(da.from_array(x, chunks=100)), plain(x), rtol=1e-12))
    True
    """
    from ..bandwidth import check_rule_input, rule_factor

    x = _points_rows("X", X)
    n_rows, d = x.shape
    check_rule_input(method, n_rows)
    scale = robust_scale(x, sample_weight)
    check_rule_input(method, n_rows, scale)
    n = float(n_rows if sample_weight is None else da.asarray(sample_weight).sum().compute())
    return np.asarray(scale * rule_factor(method, n, d, kernel), dtype=np.float64)


# --------------------------------------------------------------------------- the estimator on Dask


def fit(estimator: Any, X: Any, y: Any, sample_weight: Any = None) -> Any:
    """``NadarayaWatson.fit`` for Dask input: keep the arrays lazy, resolve the bandwidth.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from nadaraya import NadarayaWatson
    >>> X = da.from_array(np.linspace(0, 1, 20)[:, None], chunks=(8, 1))
    >>> model = NadarayaWatson(bandwidth=0.2).fit(X, 2 * X[:, 0])
    >>> type(model.predict(X)).__name__
    'Array'
    """
    from ..bandwidth import RULES

    graph = _Graph(None, X, y, kernel=estimator.kernel, bandwidth=1.0, sample_weight=sample_weight,
                   chunks=None)
    d = graph.keys.shape[1]
    estimator.n_features_in_ = d
    bw = estimator.bandwidth
    if isinstance(bw, str) and bw in RULES:
        estimator.bandwidth_ = rule_of_thumb(graph.keys, bw, kernel=estimator.kernel,
                                             sample_weight=graph.sample_weight)
    elif isinstance(bw, str):
        # Selectors ("cv", "aicc") search over exact leave-one-out passes of the single-machine
        # engine: the training data are gathered to this process for the search (they must fit
        # in its memory), then the model keeps the lazy Dask arrays.
        Xn, yn, swn = dask.compute(graph.keys, graph.values, graph.sample_weight)
        estimator.bandwidth_ = estimator._resolve_bandwidth(Xn, swn, yn[:, 0] if graph.one_d else yn)
    else:
        estimator.bandwidth_ = as_bandwidth(bw, d)
    estimator.X_fit_ = graph.keys
    estimator.y_fit_ = graph.values[:, 0] if graph.one_d else graph.values
    estimator.sample_weight_ = graph.sample_weight
    estimator.backend_, estimator.backend_reason_ = "dask", "the training data are Dask arrays"
    return estimator


def predict(estimator: Any, X: Any) -> da.Array:
    """``NadarayaWatson.predict`` when the model or ``X`` is on Dask: a lazy Dask array.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from nadaraya import NadarayaWatson
    >>> model = NadarayaWatson(bandwidth=0.5).fit(np.arange(4.0)[:, None], np.arange(4.0))
    >>> out = model.predict(da.from_array(np.array([[1.5]])))
    >>> float(out.compute()[0])
    1.5
    """
    d = estimator.n_features_in_
    X = X if is_dask(X) else np.asarray(X)
    if X.ndim != 2 or X.shape[1] != d:
        raise ValueError(f"X has shape {X.shape}, but this NadarayaWatson was fitted with {d} features")
    return pool(X, estimator.X_fit_, estimator.y_fit_, kernel=estimator.kernel,
                bandwidth=estimator.bandwidth_, empty=estimator.empty,
                sample_weight=estimator.sample_weight_)

