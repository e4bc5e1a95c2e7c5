"""The Dask backend: exact partial sums over row-chunked Dask arrays, on any Dask scheduler.

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

This module is only the backend: :func:`options`, the tasks (:func:`block`), the graph of
tasks per query chunk (:func:`query_partials`), the merge tree (:func:`tree_merge`) and the
backend protocol :func:`partials` (``backend="dask"`` on validated NumPy input, chunked as
:func:`options` says). Dask input to ``nadaraya.pool`` and ``loo_pool`` (a lazy result, the
``empty=`` policy per chunk, far queries) is handled by :mod:`nadaraya.distributed.pool`; the rules
of thumb with Dask reductions by :mod:`nadaraya.distributed.rules`.

Examples
--------
>>> import numpy as np, nadaraya
>>> x = np.linspace(0, 1, 10)
>>> with options(chunks=4):
...     out = nadaraya.pool(x, x, 2 * x, bandwidth=0.2, backend="dask")
>>> bool(np.allclose(out, nadaraya.pool(x, x, 2 * x, bandwidth=0.2), rtol=1e-12))
True
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import dask
import dask.array as da
import numpy as np
from numpy.typing import NDArray

from nadaraya import backends
from nadaraya.backends.reference import moment_shapes
from nadaraya.kernels import Kernel
from nadaraya.kernels import get as get_kernel
from nadaraya.partials import Partials, concat, merge_all
from nadaraya.partials import empty as empty_partials

__all__ = [
    "auto_rows",
    "block",
    "count_arrays",
    "delayed_chunks",
    "merge_parts",
    "options",
    "partials",
    "query_partials",
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


def merge_parts(*parts: Partials) -> Partials:
    """One merge task: left to right."""
    return merge_all(parts)


# --------------------------------------------------------------------------- tasks


def block(
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
) -> Partials:
    """Partials of one query chunk over one key chunk, on the worker that runs it.

    ``exclude``: ``"diagonal"`` (the query chunk is the key chunk: leave out row ``i`` for
    query ``i``), an index relative to the key chunk per query (-1 for none), or None.
    ``moments``: the degree of a local polynomial whose moment sums the partials carry
    (:func:`nadaraya.backends.reference.moment_shapes`). With ``engine="auto"`` the block
    takes what ``auto`` takes on one machine for its data (:func:`nadaraya.backends.choose_for_data`:
    the exact truncated sums, or within ``tol`` the Taylor series; never the binned sums, whose
    certificate is per prediction of the block and would not survive the merge). Every sum of a
    Taylor block
    is within ``eps`` times the block's weight times its largest ``|v|``, so the merged sums are
    within ``eps`` times the whole weight times the largest ``|v|``: the bound of one machine.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.linspace(0, 1, 5)[:, None]
    >>> p = block(x, x, x, None, "diagonal", kernel="gaussian", bandwidth=np.array([0.5]),
    ...           engine="reference")
    >>> p.finalize().shape
    (5, 1)
    """
    kern = get_kernel(kernel)
    m, p = q.shape[0], v.shape[1]
    if m == 0 or k.shape[0] == 0:  # an empty chunk contributes nothing
        shapes = moment_shapes(moments, q.shape[1], p) if moments else ()
        return empty_partials(m, p, np.result_type(q.dtype, v.dtype), kern.log_domain, shapes)
    q, k, v = (np.ascontiguousarray(a) for a in (q, k, v))
    if isinstance(exclude, str):
        exclude = np.arange(m)
    choice = None
    sw = None if sw is None else np.ascontiguousarray(sw)
    if engine == "auto":  # priced as the call would be in one process: with its weights' bands
        choice = backends.choose_for_data(kern, q, k, bandwidth, moments=moments, tol=tol,
                                          loo=exclude is not None, merged=True, sample_weight=sw)
    if choice is None:
        choice = backends.choose(kern, n=k.shape[0], m=m, d=k.shape[1], backend=engine, moments=moments,
                                 loo=exclude is not None, tol=tol)
    if choice.name in ("fused", "truncated", "taylor"):
        _share_cores_with_worker()
    return backends.compute(choice.name, q, k, v, kernel=kern, bandwidth=bandwidth,
                            sample_weight=sw, exclude=exclude, moments=moments, tol=tol)


def _share_cores_with_worker() -> None:
    """Inside a Dask worker, give numba's parallel loops as many threads as the worker has
    (``threads_per_worker``), so that workers sharing a machine do not oversubscribe it."""
    try:
        from distributed import get_worker

        nthreads = get_worker().state.nthreads
    except (ImportError, ValueError):  # not running on a distributed worker
        return
    import numba

    numba.set_num_threads(max(1, min(nthreads, numba.config.NUMBA_NUM_THREADS)))  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- dask.sizeof


def count_arrays(obj: Any) -> int:
    """The bytes of the arrays a dataclass holds (its ``dask.sizeof``)."""
    return int(sum(getattr(getattr(obj, f.name), "nbytes", 0) for f in dataclasses.fields(obj)))


def _register_sizes() -> None:
    """Let dask count a Partials by its arrays' bytes: without this, ``dask.sizeof`` sees a
    dataclass and counts about 56 bytes, so the scheduler's memory accounting and transfer
    logs miss what the partials weigh."""
    from dask.sizeof import sizeof

    sizeof.register(Partials)(count_arrays)


_register_sizes()


# --------------------------------------------------------------------------- graph building


def auto_rows(n: int) -> int:
    """The default rows per chunk of ``n`` rows: ``max(4096, ceil(n / 8))``, at most ``n``.

    Examples
    --------
    >>> auto_rows(100), auto_rows(100_000)
    (100, 12500)
    """
    return min(n, max(4096, -(-n // 8)))


def delayed_chunks(a: da.Array | None, count: int) -> list[Any]:
    """The row chunks of a 2-D (or 1-D) Dask array as delayed objects; ``count`` Nones for None."""
    return [None] * count if a is None else list(a.to_delayed().ravel())


def query_partials(
    queries: da.Array,
    keys: da.Array,
    values: da.Array,
    sample_weight: da.Array | None,
    *,
    kernel: str,
    bandwidth: NDArray[np.float64],
    loo: bool,
    split_every: int,
    engine: str,
    exclude: NDArray[np.integer] | None = None,
    task: Callable[..., Any] | None = None,
    combine: Callable[..., Any] | None = None,
    moments: int = 0,
    tol: float | None = None,
) -> list[Any]:
    """One delayed merged result per query chunk: ``task`` (default :func:`block`) per (query
    chunk, key chunk), merged by ``combine`` (default :func:`merge_parts`) in a fixed tree.

    The arrays are 2-D and chunked by rows only, the values and weights like the keys;
    ``loo``: the queries are the keys (the diagonal blocks leave each point out); ``exclude``
    (NumPy input): an index into the keys per query, made relative to each key chunk;
    ``moments``: passed on to each task when positive (the merges rescale the moment sums
    with the rest, :func:`nadaraya.partials.merge`); ``tol`` when given.
    """
    extra: dict[str, Any] = {"moments": moments} if moments else {}
    if tol is not None:
        extra["tol"] = tol
    q, k = delayed_chunks(queries, 0), delayed_chunks(keys, 0)
    v, sw = delayed_chunks(values, 0), delayed_chunks(sample_weight, len(k))
    run = dask.delayed(task or block, pure=True)
    merge_task = dask.delayed(combine or merge_parts, pure=True)
    qstarts = np.cumsum((0, *queries.chunks[0]))
    kstarts = np.cumsum((0, *keys.chunks[0]))
    out = []
    for i, qi in enumerate(q):
        row = []
        for j, kj in enumerate(k):
            ex: Any = "diagonal" if loo and i == j else None
            if exclude is not None:  # a general exclude (NumPy input): relative to the key chunk
                rel = exclude[qstarts[i] : qstarts[i + 1]] - kstarts[j]
                inside = (rel >= 0) & (rel < kstarts[j + 1] - kstarts[j])
                ex = np.where(inside, rel, -1) if inside.any() else None
            row.append(run(qi, kj, v[j], sw[j], ex, kernel=kernel, bandwidth=bandwidth, engine=engine,
                           **extra))
        out.append(tree_merge(row, merge_task, split_every))
    return out


# --------------------------------------------------------------------------- public entry points


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
    tol: float | None = None,
) -> Partials:
    """The backend protocol for ``backend="dask"`` on NumPy arrays: chunk, compute, merge.

    The arrays are chunked in rows as :func:`options` says and the tasks run on the current
    Dask scheduler (a ``distributed.Client`` when one is active). See
    :func:`nadaraya.backends.reference.partials` for the arguments; ``moments`` (a local
    polynomial degree) is computed by each task's engine and merged with the rest; ``tol``
    as for :func:`nadaraya.pool` (see :func:`block`).

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
    if isinstance(moments, bool) or not isinstance(moments, int | np.integer) or moments < 0:
        raise ValueError(f"moments must be a non-negative int (a polynomial degree); got {moments!r}")
    state = _opts()
    loo = exclude is not None and queries is keys and np.array_equal(exclude, np.arange(keys.shape[0]))
    rows = state["chunks"] or auto_rows(max(1, keys.shape[0]))
    k = da.from_array(keys, chunks=(rows, -1))
    q = k if loo else da.from_array(queries, chunks=(state["chunks"] or k.chunks[0][0], -1))
    v = da.from_array(values, chunks=(k.chunks[0], -1))
    sw = None if sample_weight is None else da.from_array(sample_weight, chunks=(k.chunks[0],))
    tasks = query_partials(q, k, v, sw, kernel=kernel.name,
                           bandwidth=np.asarray(bandwidth, dtype=np.float64), loo=loo,
                           split_every=state["split_every"], engine=state["engine"],
                           exclude=None if loo else exclude, moments=moments, tol=tol)
    (parts,) = dask.compute(tasks)
    return concat(parts)
