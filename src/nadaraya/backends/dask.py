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
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import dask
import dask.array as da
import numpy as np
from numpy.typing import ArrayLike, NDArray

from .. import backends
from .._validation import as_bandwidth, as_empty, as_points, as_values, pick_dtype
from ..kernels import Kernel
from ..kernels import get as get_kernel
from ..partials import Partials, concat, merge_all
from ..partials import empty as empty_partials
from ._dask_empty import _finish, _nearest_block, _nearest_merge
from ._dask_estimator import _weighted_quantiles as _weighted_quantiles  # re-exported (tests)
from ._dask_estimator import fit, predict, robust_scale, rule_of_thumb
from ._dask_far import _Far, _far_rows, _merge_all_far
from ._dask_inputs import _as_rows, _dask_weights, _known_rows, is_dask

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


# --------------------------------------------------------------------------- dask.sizeof


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


# --------------------------------------------------------------------------- graph building


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
