"""Checks of Dask arguments: dtypes and shapes at the call, values per chunk when computed, rows chunked."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import dask.array as da
import numpy as np
from numpy.typing import NDArray

from nadaraya._support.validation import as_points, as_sample_weight, check_some_weight, is_dask
from nadaraya.distributed.backend import auto_rows


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
    """The zero-weights check of :func:`nadaraya._support.validation.check_some_weight`, given whether
    some weight is positive (a lazy Dask scalar once computed)."""
    check_some_weight(np.array([bool(positive)]))


def _known_rows(name: str, a: Any) -> None:
    """Refuse a Dask array whose row count is unknown (before it is compared with another)."""
    if getattr(a, "ndim", 0) and math.isnan(a.shape[0]):
        raise ValueError(f"{name} has unknown chunk sizes; call .compute_chunk_sizes() on it first")


def _as_rows(
    name: str, a: Any, dtype: np.dtype, chunks: int | Sequence[int] | None, like: Any = None,
    kind: str = "points", keep_empty_chunks: bool = False,
) -> da.Array:
    """A validated 2-D Dask array chunked by rows only (the columns in one chunk).

    NumPy input must already be validated (by :mod:`nadaraya._support.validation`, so that its errors
    are the NumPy path's); Dask input is checked here: its dtype at once, its values lazily,
    chunk by chunk (:func:`_check_chunk` with ``kind``). Chunks of zero rows are dropped (an
    empty shard adds nothing) unless ``keep_empty_chunks`` (queries: one output chunk per
    query chunk); ``like`` gives the row chunks to follow (values and weights follow the keys).
    """
    if not is_dask(a):
        a = np.asarray(a)
        rows = like if like is not None else (chunks or auto_rows(max(1, a.shape[0] if a.ndim else 1)))
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


#: chunks of fewer rows than ``min(SMALL_CHUNK, ceil(rows / 8))`` are merged with their neighbours
SMALL_CHUNK = 1024


def coalesced(chunks: Sequence[int], rows: int | None = None) -> tuple[int, ...]:
    """Row chunks with small neighbours merged: adjacent chunks are joined until each has at
    least ``min(SMALL_CHUNK, ceil(rows / 8))`` rows (``rows`` the total by default; the last
    chunk joins the one before it when it falls short). Chunks already that large are kept as
    they are; so are arrays of at most 8 chunks. A call costs a task per pair of (query, key)
    chunks: a thousand chunks of one row are a million tasks for a million pairs.

    Examples
    --------
    >>> coalesced((1,) * 300)[:3], len(coalesced((1,) * 300))
    ((38, 38, 38), 7)
    >>> coalesced((45, 45, 45, 35))
    (45, 45, 45, 35)
    >>> coalesced((2000,) * 8 + (3, 2))
    (2000, 2000, 2000, 2000, 2000, 2000, 2000, 2005)
    """
    chunks = tuple(int(c) for c in chunks)
    total = sum(chunks) if rows is None else rows
    least = min(SMALL_CHUNK, -(-total // 8))
    if len(chunks) <= 8 or min(chunks) >= least:
        return chunks
    out: list[int] = []
    run = 0
    for c in chunks:
        run += c
        if run >= least:
            out.append(run)
            run = 0
    if run:
        if out:
            out[-1] += run
        else:
            out.append(run)
    return tuple(out)


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
