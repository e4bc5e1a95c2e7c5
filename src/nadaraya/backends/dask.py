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
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import dask
import dask.array as da
import numpy as np
from numpy.typing import ArrayLike, NDArray

from .. import backends
from .._validation import as_bandwidth, as_empty, pick_dtype
from ..kernels import Kernel
from ..kernels import get as get_kernel
from ..partials import Partials, concat, merge_all

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


def _check_chunk(block: NDArray[Any], name: str, nonneg: bool = False) -> NDArray[Any]:
    """Lazy validation of one chunk (run once per chunk, in the graph): finite, and >= 0."""
    bad = ~np.isfinite(block)
    if bad.any():
        raise ValueError(f"{name} contains NaN or inf ({int(bad.sum())} entries in one chunk)")
    if nonneg and (block < 0).any():
        raise ValueError(f"{name} must be non-negative; got {float(block.min())!r} in one chunk")
    return block


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
) -> Partials:
    """Partials of one query chunk over one key chunk, on the worker that runs it.

    ``exclude``: ``"diagonal"`` (the query chunk is the key chunk: leave out row ``i`` for
    query ``i``), an index relative to the key chunk per query (-1 for none), or None.
    """
    kern = get_kernel(kernel)
    q, k, v = (np.ascontiguousarray(a) for a in (q, k, v))
    if isinstance(exclude, str):
        exclude = np.arange(q.shape[0])
    choice = backends.choose(kern, n=k.shape[0], m=q.shape[0], d=k.shape[1], bandwidth=bandwidth,
                             backend=engine)
    if choice.name == "fused":
        _share_cores_with_worker()
    return backends.compute(choice.name, q, k, v, kernel=kern, bandwidth=bandwidth,
                            sample_weight=None if sw is None else np.ascontiguousarray(sw), exclude=exclude)


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


def _nearest_block(
    q: NDArray[np.floating],
    k: NDArray[np.floating],
    v: NDArray[np.floating],
    sw: NDArray[np.floating] | None,
    exclude: str | None,
    *,
    bandwidth: NDArray[np.float64],
) -> tuple[NDArray[np.floating], NDArray[np.floating]]:
    """For ``empty="nearest"``: per query, the squared scaled distance to the nearest usable key
    of this chunk (inf if none) and that key's values."""
    from ..pooling import Call, _nearest

    if sw is not None and not (sw > 0).any():
        return np.full(q.shape[0], np.inf), np.zeros((q.shape[0], v.shape[1]), v.dtype)
    call = Call(q, k, v, False, get_kernel("constant"), bandwidth, sw)
    rows = np.arange(q.shape[0])
    idx = _nearest(call, rows, None if exclude is None else rows)
    ok = idx >= 0
    dist = np.full(q.shape[0], np.inf)
    dist[ok] = ((((q[ok] - k[idx[ok]]) / bandwidth)) ** 2).sum(axis=1)
    return dist, np.where(ok[:, None], v[np.maximum(idx, 0)], 0.0)


def _nearest_merge(
    *cands: tuple[NDArray[np.floating], NDArray[np.floating]],
) -> tuple[NDArray[np.floating], NDArray[np.floating]]:
    """The nearer of candidates, the earlier key chunk on ties."""
    dist, val = cands[0]
    dist, val = dist.copy(), val.copy()
    for d2, v2 in cands[1:]:
        better = d2 < dist
        dist[better] = d2[better]
        val[better] = v2[better]
    return dist, val


def _finish(
    parts: Partials,
    fallback: Any,
    *,
    empty: str,
    one_d: bool,
    start: int,
) -> NDArray[np.floating]:
    """Predictions of one query chunk, with the ``empty=`` policy; ``fallback`` is the
    constant-kernel Partials ("mean": one row for all queries, or one per query for
    leave-one-out) or the nearest candidates ("nearest")."""
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
            dist, val = fallback
            good = rows[np.isfinite(dist[rows])]
            out[good] = val[good]
        elif empty == "mean":  # per query (leave-one-out) or one row for all
            mean: Partials = fallback
            out[rows] = mean.finalize()[rows if mean.weight.shape[0] > 1 else 0]
    return out[:, 0] if one_d else out


# --------------------------------------------------------------------------- graph building


def _auto_rows(n: int) -> int:
    return min(n, max(4096, -(-n // 8)))


def _as_rows(name: str, a: Any, dtype: np.dtype, chunks: int | None, like: Any = None) -> da.Array:
    """A 2-D Dask array chunked by rows only (the columns in one chunk)."""
    if not dask.is_dask_collection(a):
        a = np.asarray(a)
        if a.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be numeric; got dtype {a.dtype}")
        rows = like if like is not None else (chunks or _auto_rows(max(1, a.shape[0] if a.ndim else 1)))
        a = da.from_array(a, chunks=(rows, *a.shape[1:]) if a.ndim else ())
    if a.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be numeric; got dtype {a.dtype}")
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise ValueError(f"{name} must be a 1-D or 2-D array; got shape {a.shape}")
    if any(math.isnan(s) for s in a.shape):
        raise ValueError(f"{name} has unknown chunk sizes; call .compute_chunk_sizes() on it first")
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {a.shape}); at least one row and one feature are needed")
    a = a.astype(dtype).rechunk({1: -1})
    if like is not None:
        a = a.rechunk({0: like})
    return a.map_blocks(_check_chunk, name, dtype=dtype)


class _Graph:
    """Validated Dask inputs of one call and the delayed tasks over them."""

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
        self.keys = _as_rows("keys", keys, self.dtype, chunks)
        n, d = self.keys.shape
        kchunks = self.keys.chunks[0]
        vv = values if dask.is_dask_collection(values) else np.asarray(values)
        if vv.ndim not in (1, 2):
            raise ValueError(f"values must have shape (n,) or (n, p); got shape {vv.shape}")
        if vv.shape[0] != n:
            raise ValueError(f"values has {vv.shape[0]} rows, but keys has {n}; they must match")
        self.one_d = vv.ndim == 1
        self.values = _as_rows("values", vv, self.dtype, None, like=kchunks)
        self.loo = queries is None
        if self.loo:
            self.queries = self.keys
        else:
            self.queries = _as_rows("queries", queries, self.dtype, chunks or kchunks[0])
            if self.queries.shape[1] != d:
                raise ValueError(f"queries has {self.queries.shape[1]} features, but the keys have {d}")
        self.bandwidth = as_bandwidth(bandwidth, d)
        self.sample_weight = None
        if sample_weight is not None:
            sw = sample_weight if dask.is_dask_collection(sample_weight) else np.asarray(sample_weight, float)
            if sw.ndim == 0:
                sw = np.full(n, float(sw))
            if sw.shape != (n,):
                raise ValueError(f"sample_weight must have shape ({n},); got shape {sw.shape}")
            self.sample_weight = _as_rows("sample_weight", sw, self.dtype, None, like=kchunks)[:, 0]
            self.sample_weight = self.sample_weight.map_blocks(_check_chunk, "sample_weight", True,
                                                               dtype=self.dtype)

    def _chunks(self) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
        q = list(self.queries.to_delayed().ravel())
        k = list(self.keys.to_delayed().ravel())
        v = list(self.values.to_delayed().ravel())
        sw = [None] * len(k) if self.sample_weight is None else list(self.sample_weight.to_delayed().ravel())
        return q, k, v, sw

    def partials(
        self, split_every: int, engine: str, exclude: NDArray[np.integer] | None = None
    ) -> list[Any]:
        """One delayed merged Partials per query chunk."""
        q, k, v, sw = self._chunks()
        block = dask.delayed(_block, pure=True)
        merge = dask.delayed(_merge, pure=True)
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
                                 engine=engine))
            out.append(tree_merge(row, merge, split_every))
        return out

    def predictions(self, empty: str, split_every: int, engine: str) -> da.Array:
        """The lazy predictions, one chunk per query chunk."""
        q, k, v, sw = self._chunks()
        merged = self.partials(split_every, engine)
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
            combine = dask.delayed(_nearest_merge, pure=True)
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
            task = finish(merged[i], fallback[i], empty=empty, one_d=self.one_d, start=int(starts[i]))
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
    x = _as_rows("X", X, np.dtype(np.float64), None)
    n = x.shape[0]
    w = None
    if sample_weight is not None:
        sw = sample_weight if is_dask(sample_weight) else np.asarray(sample_weight, float)
        if sw.shape != (n,):
            raise ValueError(f"sample_weight must have shape ({n},); got shape {sw.shape}")
        w = _as_rows("sample_weight", sw, np.dtype(np.float64), None, like=x.chunks[0])[:, 0]
        w = w.map_blocks(_check_chunk, "sample_weight", True, dtype=np.float64)
    ww = da.ones(n, chunks=x.chunks[0]) if w is None else w
    total, wx, bounds = dask.compute(ww.sum(), (ww[:, None] * x).sum(axis=0), (x.min(axis=0), x.max(axis=0)))
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

    x = _as_rows("X", X, np.dtype(np.float64), None)
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

