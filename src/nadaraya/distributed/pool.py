"""Attention pooling on Dask input: the lazy ``pool`` and ``loo_pool``, and the estimator's lazy data.

``nadaraya.pool`` and ``nadaraya.loo_pool`` route Dask input here; ``NadarayaWatson`` takes
its lazy training data from :func:`training_data`. The partial sums per (query chunk, key
chunk) and their fixed merge tree are the Dask backend's (:mod:`nadaraya.distributed.backend`); this
module builds the graph over them: validated inputs, far queries merged exactly
(:mod:`nadaraya.distributed.far`), and the ``empty=`` policy applied per query chunk
(:mod:`nadaraya.distributed.empty`).

Hostile input gets the single-machine path's errors: NumPy arguments are checked at the call
by :mod:`nadaraya._support.validation` itself; Dask arguments by dtype and shape at the call (complex,
dates, durations and text refused, naming the argument) and by value chunk by chunk when
computed (NaN, inf, negative weights, with the row in the whole array; weights zero
everywhere). Chunks of zero rows are dropped from the shards. A query far from every key of
a chunk (log weights below ``nadaraya._core.nearest.FAR_LOG_WEIGHT``, or overflowed) gets partials
relative to an anchor key of that chunk, through the kernel's ``log_ratio``; merges rebase
them exactly onto the anchor of larger weight, so far queries get the same limit as on one
machine.

Local polynomial fits (``degree``) and categorical columns (``var_types``) take the same
route as on one machine (:mod:`nadaraya.local.fit`): each task's partials carry the moment sums of
the degree (the far-query partials too) and merge exactly; with categorical columns each task
is :func:`nadaraya.local.fit.partials` of its block (keys grouped by category tuple, each group's
partials shifted by its categorical factor), so the merged partials of a query chunk are those
of one machine. Per query chunk the ``empty=`` policy fills the degree-0 predictions, then the
local system of each query is solved (:func:`nadaraya.local.solve.solve`) and replaces them where
it is regular, as :func:`nadaraya.local.fit.fitted` does. The number of distinct training values of
each categorical column (Aitchison-Aitken's ``c``, and the bounds of its lambda) is computed at
the call.

Examples
--------
>>> import numpy as np, dask.array as da, nadaraya
>>> x = da.from_array(np.linspace(0, 1, 10), chunks=4)
>>> out = nadaraya.pool(x, x, 2 * x, bandwidth=0.2)
>>> out.chunks
((4, 4, 2),)
>>> xs = x.compute()
>>> bool(np.allclose(out.compute(), nadaraya.pool(xs, xs, 2 * xs, bandwidth=0.2), rtol=1e-12))
True
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import dask
import dask.array as da
import numpy as np
from numpy.typing import ArrayLike, NDArray

from nadaraya import backends
from nadaraya._core.call import Call
from nadaraya._core.nearest import FAR_LOG_WEIGHT
from nadaraya._support.validation import (
    as_bandwidth,
    as_empty,
    as_points,
    as_tol,
    as_values,
    check_values_shape,
    is_dask,
    pick_dtype,
)
from nadaraya.backends.reference import moment_shapes
from nadaraya.distributed.backend import (
    _opts,
    _share_cores_with_worker,
    block,
    delayed_chunks,
    merge_parts,
    query_partials,
    tree_merge,
)
from nadaraya.distributed.empty import _finish, _nearest_block, _nearest_merge
from nadaraya.distributed.far import _merge_all_far, far_block
from nadaraya.distributed.inputs import _as_rows, _dask_weights, _known_rows, coalesced
from nadaraya.kernels import Kernel
from nadaraya.kernels import get as get_kernel
from nadaraya.local import fit as _fit
from nadaraya.local import job as _job
from nadaraya.local.mixed import Categorical, as_categorical_kernel, as_var_types
from nadaraya.partials import Partials
from nadaraya.partials import empty as empty_partials

__all__ = ["pool", "training_data"]


def _require() -> None:
    """The Dask backend's dependencies, named with the extra that installs them when missing."""
    backends.get("dask")


@dataclass(frozen=True)
class _Columns:
    """The categorical side of a mixed call, validated once at the call: which columns are
    continuous and which categorical (their kinds, lambdas and numbers of training values)."""

    kinds: str
    cont: NDArray[np.intp]
    cat: NDArray[np.intp]
    lambdas: NDArray[np.float64]
    levels: NDArray[np.int64]
    kernel: str  # the categorical kernel

    def job(
        self, q: NDArray[Any], k: NDArray[Any], v: NDArray[Any], sw: NDArray[Any] | None, kern: Kernel,
        h: NDArray[np.float64], degree: int,
    ) -> _job.Job:
        """The single-machine job of one (query chunk, key chunk) block."""
        call = Call(np.ascontiguousarray(q[:, self.cont]), np.ascontiguousarray(k[:, self.cont]),
                    np.ascontiguousarray(v), False, kern, h, None if sw is None else np.ascontiguousarray(sw))
        kc, qc = (np.asarray(a[:, self.cat], dtype=np.float64) for a in (k, q))
        cat = Categorical(self.kinds, kc, qc, self.lambdas, self.levels, self.kernel)
        return _job.Job(call, cat, degree, self.cont, self.cont.size + self.cat.size)


def _mixed_block(
    q: NDArray[Any], k: NDArray[Any], v: NDArray[Any], sw: NDArray[Any] | None,
    exclude: NDArray[np.integer] | str | None, *, kernel: str, bandwidth: NDArray[np.float64], engine: str,
    columns: _Columns, degree: int,
) -> Partials:
    """The task of a call with categorical columns: :func:`nadaraya.local.fit.partials` of the block
    (moments of ``degree`` on the continuous columns, keys grouped by category tuple), on the
    worker that runs it; ``exclude`` as for :func:`nadaraya.distributed.backend.block`."""
    kern = get_kernel(kernel)
    m, p = q.shape[0], v.shape[1]
    if m == 0 or k.shape[0] == 0:  # an empty chunk contributes nothing
        shapes = moment_shapes(degree, columns.cont.size, p)
        return empty_partials(m, p, np.result_type(q.dtype, v.dtype), kern.log_domain, shapes)
    if isinstance(exclude, str):
        exclude = np.arange(m)
    if engine in ("auto", "fused"):
        _share_cores_with_worker()
    return _fit.partials(columns.job(q, k, v, sw, kern, bandwidth, degree), exclude, engine)


def _cat_nearest_block(
    q: NDArray[Any], k: NDArray[Any], v: NDArray[Any], sw: NDArray[Any] | None,
    exclude: NDArray[np.integer] | str | None, *, columns: _Columns, **_: Any,
) -> tuple[Any, ...]:
    """For ``empty="nearest"`` without continuous columns: per query, this chunk's nearest
    usable keys under :func:`nadaraya.local.fills.categorical_distance` (ties included): ``(their
    distance (inf if none), the sample-weighted sum of their values, the sum of their weights,
    None, None)``, the shape of :func:`nadaraya.distributed.empty._nearest_block`'s candidates."""
    from nadaraya.local.fills import categorical_distance

    m, p = q.shape[0], v.shape[1]
    dist, vsum, wsum = np.full(m, np.inf), np.zeros((m, p)), np.zeros(m)
    if m == 0 or k.shape[0] == 0:
        return dist, vsum, wsum, None, None
    kc, qc = (np.asarray(a[:, columns.cat], dtype=np.float64) for a in (k, q))
    cat = Categorical(columns.kinds, kc, qc, columns.lambdas, columns.levels, columns.kernel)
    s = np.ones(k.shape[0]) if sw is None else np.asarray(sw, dtype=np.float64)
    D = np.where(s[None, :] > 0, categorical_distance(cat, qc, kc), np.inf)
    if exclude is not None:  # a diagonal block of leave-one-out: query i leaves key i out
        rows = np.arange(m) if isinstance(exclude, str) else np.asarray(exclude)
        mine = (rows >= 0) & (rows < k.shape[0])
        D[np.nonzero(mine)[0], rows[mine]] = np.inf
    best = D.min(axis=1)
    tie = np.equal(D, best[:, None]) & np.isfinite(best)[:, None]
    W = np.where(tie, s[None, :], 0.0)
    vsum, wsum = W @ np.asarray(v, dtype=np.float64), W.sum(axis=1)
    dist[wsum > 0] = best[wsum > 0]
    return dist, vsum, wsum, None, None


def _cat_nearest_merge(*cands: tuple[Any, ...]) -> tuple[Any, ...]:
    """The nearer of :func:`_cat_nearest_block`'s candidates; equally near ones pooled."""
    dist, vsum, wsum = (a.copy() for a in cands[0][:3])
    for d2, v2, w2, _, _ in cands[1:]:
        tie = np.isfinite(d2) & (d2 == dist)
        vsum[tie] += v2[tie]
        wsum[tie] += w2[tie]
        better = d2 < dist
        dist[better], vsum[better], wsum[better] = d2[better], v2[better], w2[better]
    return dist, vsum, wsum, None, None


def _plain_sums(v: NDArray[Any], sw: NDArray[Any] | None) -> tuple[NDArray[np.float64], float]:
    """The sample-weighted sum of a key chunk's values, and of its weights."""
    s = np.ones(v.shape[0]) if sw is None else np.asarray(sw, dtype=np.float64)
    return s @ np.asarray(v, dtype=np.float64), float(s.sum())


def _add_sums(*sums: tuple[NDArray[np.float64], float]) -> tuple[NDArray[np.float64], float]:
    return sum(a for a, _ in sums), sum(b for _, b in sums)  # type: ignore[return-value]


def _or_plain_mean(parts: Partials, sums: tuple[NDArray[np.float64], float]) -> Partials:
    """``empty="mean"`` with categorical columns: the constant-kernel partials with the
    categorical factors kept, and the plain weighted mean of y where those factors are all 0
    (a category never seen in training at lambda = 0), as :mod:`nadaraya.local.fills` fills."""
    rows = np.nonzero(parts.empty)[0]
    if rows.size == 0:
        return parts
    out = Partials(parts.shift.copy(), parts.weight.copy(), parts.value.copy(), parts.moments)
    out.shift[rows], out.weight[rows], out.value[rows] = 0.0, sums[1], sums[0]
    return out


def _local_finish(
    merged: Any, fallback: Any, positive: Any = True, *, degree: int, mixed: bool, empty: str, one_d: bool,
    start: int, kernel: str, bandwidth: NDArray[np.float64],
) -> NDArray[np.floating]:
    """Predictions of one query chunk of a local or mixed call: the degree-0 predictions with the
    ``empty=`` policy (:func:`nadaraya.distributed.empty._finish`), replaced where the local system is
    regular and the query not far (a plain continuous call of a log-domain kernel whose query is
    far from every key keeps the Nadaraya-Watson far limit), as in :func:`nadaraya.local.fit.fitted`;
    one :class:`~nadaraya.local.job.SingularFitWarning` per chunk where some query fell back."""
    parts, far = merged if isinstance(merged, tuple) else (merged, None)
    m, p = parts.value.shape
    if mixed and empty == "mean" and isinstance(fallback, tuple):
        fallback = _or_plain_mean(*fallback)
    if empty == "nearest" and fallback is None:  # no usable key
        fallback = (None, np.zeros((m, p)), np.zeros(m), None, None)
    out = _finish(merged, fallback, positive, empty=empty, one_d=False, start=start, kernel=kernel,
                  bandwidth=bandwidth)
    far_rows = np.zeros(m, dtype=bool)
    if not mixed and get_kernel(kernel).log_domain:
        far_rows = ~(parts.shift >= FAR_LOG_WEIGHT)
        if far is not None:  # partials relative to an anchor (see nadaraya.distributed.far)
            far_rows |= far.rows
    _fit.finish_local(parts, degree, bandwidth, out, far_rows, f" in the chunk starting at row {start}")
    return out[:, 0] if one_d else out


def _local_spec(
    keys: da.Array, bandwidth: ArrayLike, degree: Any, var_types: str | None, categorical_kernel: str
) -> tuple[int, NDArray[np.float64], _Columns | None]:
    """Validate the local and mixed arguments as :func:`nadaraya.local.job.prepare` does: the degree
    (0 without a continuous column), the continuous columns' bandwidths, and the categorical
    columns (None when there are none; their numbers of distinct training values computed now)."""
    deg = _job.as_degree(degree)
    ck = as_categorical_kernel(categorical_kernel)
    d = keys.shape[1]
    vt = as_var_types(var_types, d)
    h = _job._bandwidth(bandwidth, vt)
    cont = np.array([j for j, c in enumerate(vt) if c == "c"], dtype=np.intp)
    cat = np.array([j for j, c in enumerate(vt) if c != "c"], dtype=np.intp)
    if cat.size == 0:
        return deg, h, None
    kinds = "".join(vt[j] for j in cat)
    uniques = dask.compute(*[da.unique(keys[:, j]) for j in cat])
    levels = np.array([u.size for u in uniques], dtype=np.int64)
    none = np.zeros((0, cat.size))
    valid = Categorical.build(kinds, none, none, h[cat], ck, levels, cat)
    return (deg if cont.size else 0), h[cont], _Columns(kinds, cont, cat, valid.lambdas, levels, ck)


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
        degree: Any = 0,
        var_types: str | None = None,
        categorical_kernel: str = "classic",
    ) -> None:
        self.kernel = get_kernel(kernel)
        self.dtype = pick_dtype(keys, values, keys if queries is None else queries)
        if not is_dask(keys):
            keys = as_points("keys", keys, self.dtype)
        self.keys = _as_rows("keys", keys, self.dtype, chunks)
        # the caller's row chunks come back in the output; small ones are merged for the work
        # (a task per pair of chunks: chunks of one row cost a task per pair of points), after
        # their checks, so that errors still name the caller's rows
        self.out_chunks = self.keys.chunks[0]
        if chunks is None:
            self.keys = self.keys.rechunk({0: coalesced(self.keys.chunks[0])})
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
            self.out_chunks = self.queries.chunks[0]
            if chunks is None:
                self.queries = self.queries.rechunk({0: coalesced(self.queries.chunks[0])})
            if self.queries.shape[1] != d:
                raise ValueError(f"queries has {self.queries.shape[1]} features, but the keys have {d}")
        if is_dask(values):
            _known_rows("values", values)
            self.one_d = check_values_shape(values.shape, n)
        else:
            values, self.one_d = as_values(values, n, self.dtype)
        self.values = _as_rows("values", values, self.dtype, None, like=kchunks, kind="values")
        self.degree, self.columns = 0, None
        if degree != 0 or var_types is not None:
            self.degree, self.bandwidth, self.columns = _local_spec(self.keys, bandwidth, degree, var_types,
                                                                    categorical_kernel)
        else:
            self.bandwidth = as_bandwidth(bandwidth, d)
        self.sample_weight = None
        self.positive: Any = True  # whether some weight is positive (lazy for Dask weights)
        if sample_weight is not None:
            sw = _dask_weights(sample_weight, n, self.dtype)
            self.sample_weight = _as_rows("sample_weight", sw, self.dtype, None, like=kchunks,
                                          kind="weights")[:, 0]
            if is_dask(sample_weight):
                self.positive = (self.sample_weight > 0).any()
        self._widen()
        self._scale_extreme()

    def _widen(self) -> None:
        """A local fit on inputs narrower than float64 is summed, merged and solved in float64 and
        its predictions rounded once, as :func:`nadaraya.local.job.prepare` does on one machine
        (the tasks run on the CPU): the degree rule is float64's, and the result the NumPy path's.
        The widening is per chunk, in the tasks; the partials are queries x moments."""
        self.work = self.dtype
        if self.degree == 0 or self.dtype.itemsize >= 8:
            return
        self.work = np.dtype(np.float64)
        same = self.queries is self.keys
        self.keys, self.values = self.keys.astype(self.work), self.values.astype(self.work)
        self.queries = self.keys if same else self.queries.astype(self.work)
        if self.sample_weight is not None:
            self.sample_weight = self.sample_weight.astype(self.work)

    def _scale_extreme(self) -> None:
        """Continuous columns whose bandwidth is extreme in units of about it, exactly, as
        :func:`nadaraya.local.job.scaled` does (a local fit's moment sums then stay in range)."""
        if self.degree == 0:
            return
        cont = np.arange(self.keys.shape[1]) if self.columns is None else self.columns.cont
        empty = np.zeros((0, cont.size))
        _, _, h, x_exp = _job.scaled(empty, empty, self.bandwidth)
        if x_exp is None:
            return
        factor = np.ones(self.keys.shape[1], dtype=self.work)
        factor[cont] = np.ldexp(1.0, -x_exp)
        same = self.queries is self.keys
        self.keys = self.keys * factor
        self.queries = self.keys if same else self.queries * factor
        self.bandwidth = h

    def _tasks(self, split_every: int, engine: str, kernel: str | None = None, **kw: Any) -> list[Any]:
        """One delayed merge per query chunk of the backend's tasks (or those given in ``kw``)."""
        return query_partials(self.queries, self.keys, self.values, self.sample_weight,
                              kernel=kernel or self.kernel.name, bandwidth=self.bandwidth, loo=self.loo,
                              split_every=split_every, engine=engine, **kw)

    def _fallback(self, empty: str, split_every: int, engine: str) -> list[Any]:
        """Per query chunk, what ``empty=`` fills empty windows from: constant-kernel partials
        ("mean") or the nearest-key candidates ("nearest"); None otherwise."""
        nq = len(self.queries.chunks[0])
        if self.columns is not None:
            return self._mixed_fallback(empty, split_every, engine)
        if empty == "mean" and self.loo:
            # average pooling of the other points: each point's own term masked inside the sums
            # of its diagonal block, as loo_pool does on one machine (never subtracted afterwards)
            return self._tasks(split_every, engine, kernel="constant")
        if empty == "mean":  # the same for every query: one row per key chunk, merged once
            k, v = delayed_chunks(self.keys, 0), delayed_chunks(self.values, 0)
            sw = delayed_chunks(self.sample_weight, len(k))
            run = dask.delayed(block, pure=True)
            parts = [run(kj[:1], kj, v[j], sw[j], None, kernel="constant", bandwidth=self.bandwidth,
                         engine="reference") for j, kj in enumerate(k)]
            return [tree_merge(parts, dask.delayed(merge_parts, pure=True), split_every)] * nq
        if empty == "nearest":
            return self._tasks(split_every, engine, task=_nearest_block,
                               combine=functools.partial(_nearest_merge, bandwidth=self.bandwidth))
        return [None] * nq

    def _mixed_fallback(self, empty: str, split_every: int, engine: str) -> list[Any]:
        """The fallbacks with categorical columns, as :func:`nadaraya.local.fit._fill_mixed` fills:
        "mean" pools with the constant kernel on the continuous columns, the categorical
        factors kept (per query), with the plain weighted mean of y where those are all 0;
        "nearest" takes the nearest key in the continuous columns (without them, under the
        categorical distance)."""
        cols = self.columns
        assert cols is not None
        if empty == "mean":
            task = functools.partial(_mixed_block, columns=cols, degree=0)
            per_query = self._tasks(split_every, "reference", kernel="constant", task=task)
            if self.loo:
                return per_query
            v = delayed_chunks(self.values, 0)
            sw = delayed_chunks(self.sample_weight, len(v))
            run = dask.delayed(_plain_sums, pure=True)
            plain = tree_merge([run(v[j], sw[j]) for j in range(len(v))], dask.delayed(_add_sums, pure=True),
                               split_every)
            return [(part, plain) for part in per_query]
        if empty == "nearest" and not cols.cont.size:
            return self._tasks(split_every, engine, task=functools.partial(_cat_nearest_block, columns=cols),
                               combine=_cat_nearest_merge)
        if empty == "nearest" and cols.cont.size:
            return query_partials(
                self.queries[:, cols.cont], self.keys[:, cols.cont], self.values, self.sample_weight,
                kernel=self.kernel.name, bandwidth=self.bandwidth, loo=self.loo, split_every=split_every,
                engine=engine, task=_nearest_block,
                combine=functools.partial(_nearest_merge, bandwidth=self.bandwidth),
            )
        return [None] * len(self.queries.chunks[0])

    def predictions(self, empty: str, split_every: int, engine: str, tol: float | None = None) -> da.Array:
        """The lazy predictions, one chunk per query chunk (the tasks of plain and local polynomial
        fits choose within ``tol``; those with categorical columns are exact)."""
        if self.columns is not None:
            task = functools.partial(_mixed_block, columns=self.columns, degree=self.degree)
            merged = self._tasks(split_every, engine, task=task)
        else:
            far = functools.partial(_merge_all_far, kernel=self.kernel.name, bandwidth=self.bandwidth)
            merged = self._tasks(split_every, engine, task=far_block, combine=far, moments=self.degree,
                                 tol=tol)
        fallback = self._fallback(empty, split_every, engine)
        if self.columns is None and self.degree == 0:
            finish = dask.delayed(_finish, pure=True)
        else:
            finish = dask.delayed(functools.partial(_local_finish, degree=self.degree,
                                                    mixed=self.columns is not None), pure=True)
        p = self.values.shape[1]
        starts = np.cumsum((0, *self.queries.chunks[0]))
        pieces = []
        for i, size in enumerate(self.queries.chunks[0]):
            task = finish(merged[i], fallback[i], self.positive, empty=empty, one_d=self.one_d,
                          start=int(starts[i]), kernel=self.kernel.name, bandwidth=self.bandwidth)
            shape = (size,) if self.one_d else (size, p)
            pieces.append(da.from_delayed(task, shape=shape, dtype=self.work))
        out = da.concatenate(pieces, axis=0)
        if self.work != self.dtype:  # rounded once (see _widen)
            out = out.astype(self.dtype)
        return out if out.chunks[0] == self.out_chunks else out.rechunk({0: self.out_chunks})


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
    degree: int = 0,
    var_types: str | None = None,
    categorical_kernel: str = "classic",
    tol: float | None = None,
) -> da.Array:
    """Attention pooling on Dask arrays: a lazy Dask array, one chunk per query chunk.

    The same sums as :func:`nadaraya.pool` (equal to 1e-12 relative in float64), computed
    per (query chunk, key chunk) and merged in a fixed tree. ``queries=None`` gives the
    leave-one-out predictions of the keys (:func:`nadaraya.loo_pool`). NumPy arguments are
    chunked like the keys. ``nadaraya.pool`` and ``nadaraya.loo_pool`` call this for Dask input.
    Local polynomial fits and categorical columns as on one machine (see the module).

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
        Partials per merge task (default from :func:`nadaraya.distributed.backend.options`, 8).
    engine : str, optional
        Single-machine backend of each task (default ``"auto"``).
    tol : float, optional
        As for :func:`nadaraya.pool`: each task chooses within it (the merged sums keep the bound).
    degree, var_types, categorical_kernel
        As for :func:`nadaraya.pool`. A query chunk whose local systems were singular for
        some queries warns (:class:`~nadaraya.local.job.SingularFitWarning`) when it is computed,
        where it is computed (in the caller's process with the threaded and synchronous
        schedulers; in the worker's log on a ``distributed`` cluster).

    Returns
    -------
    dask.array.Array of shape (m,) or (m, p)

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> keys = da.from_array(np.array([1.0, 2.0, 3.0]), chunks=2)
    >>> pool(np.array([2.5]), keys, np.array([3.0, 5.0, 4.0])).compute().round(2)
    array([4.27])
    >>> x = np.linspace(0.0, 1.0, 9)
    >>> pool(np.array([0.5]), da.from_array(x, chunks=4), 3 * x + 1, bandwidth=0.3, degree=1).compute()
    array([2.5])
    """
    _require()
    empty = as_empty(empty)
    state = _opts()
    graph = _Graph(queries, keys, values, kernel=kernel, bandwidth=bandwidth, sample_weight=sample_weight,
                   chunks=state["chunks"] if not is_dask(keys) else None, degree=degree, var_types=var_types,
                   categorical_kernel=categorical_kernel)
    every = split_every or state["split_every"]
    return graph.predictions(empty, every, engine or state["engine"], as_tol(tol))


def training_data(X: Any, y: Any, sample_weight: Any = None) -> tuple[da.Array, da.Array, da.Array | None]:
    """The training data of ``NadarayaWatson.fit`` on Dask input, validated lazily as
    :func:`pool` validates its keys, values and weights: ``(X, y, sample_weight)`` as Dask
    arrays, ``X`` of shape (n, d) and ``y`` of the shape given, chunked like ``X``.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> X, y, sw = training_data(da.from_array(np.arange(6.0), chunks=4), np.arange(6.0))
    >>> X.shape, y.shape, X.chunks == ((4, 2), (1,)), sw is None
    ((6, 1), (6,), True, True)
    """
    _require()
    graph = _Graph(None, X, y, kernel="gaussian", bandwidth=1.0, sample_weight=sample_weight, chunks=None)
    return graph.keys, graph.values[:, 0] if graph.one_d else graph.values, graph.sample_weight
