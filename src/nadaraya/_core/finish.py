"""The one policy for queries with no weight: report empty windows, fill them, finish a call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from nadaraya._core.call import Call, compute_partials
from nadaraya._core.nearest import FAR_LOG_WEIGHT, _far_weights, _nearest_values
from nadaraya._support.validation import warn_at_caller
from nadaraya.kernels import Kernel
from nadaraya.kernels import get as get_kernel
from nadaraya.partials import Partials


class EmptyWindowWarning(UserWarning):
    """Some queries had no key inside a compact kernel's window; see ``empty=``."""


def report_empty(
    count: int, m: int, empty: str, kernel: Kernel, bandwidth: NDArray[np.floating], *,
    where: str = "", warn: bool = True,
) -> None:
    """The ``empty=`` policy's report: raise (``"raise"``) or warn (``"nan"``, unless ``warn``
    is False, as for a lazy Dask result) that ``count`` of ``m`` queries have an empty window.

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> report_empty(1, 4, "raise", get("epanechnikov"), np.array([0.1]), where=" (chunk at row 8)")
    Traceback (most recent call last):
    ...
    ValueError: 1 of 4 queries (chunk at row 8) have no key with positive weight within the support \
of the 'epanechnikov' kernel (bandwidth [0.1]); pass empty='nan', 'nearest' or 'mean', or a larger bandwidth
    """
    what = (
        f"{count} of {m} queries{where} have no key with positive weight within the support "
        f"of the {kernel.name!r} kernel (bandwidth {np.array2string(bandwidth, threshold=4)})"
    )
    if empty == "raise":
        raise ValueError(f"{what}; pass empty='nan', 'nearest' or 'mean', or a larger bandwidth")
    if empty == "nan" and warn:
        warn_at_caller(f"{what}; their predictions are NaN (empty='nan')", EmptyWindowWarning)


def fill_empty(
    out: NDArray[Any], rows: NDArray[np.intp], empty: str, *, nearest: Fill, mean: Fill, nan: float = np.nan
) -> NDArray[np.intp]:
    """The ``empty=`` policy's fill of the ``rows`` of ``out`` whose window is empty: ``nan``
    (``"nan"``), or what ``nearest(rows)`` or ``mean(rows)`` gives (the rows' fill, and
    where there is one); ``"raise"`` leaves them (:func:`report_empty` raised before). Returns
    the rows left without a fill (no usable key at all). The caller says how to compute the
    fill: predictions from values (:func:`finish`, the Dask chunks) or rows of weights
    (:func:`attention_weights`).

    Examples
    --------
    >>> out = np.zeros((3, 1))
    >>> mean = lambda rows: (np.full((rows.size, 1), 7.0), np.ones(rows.size, bool))
    >>> fill_empty(out, np.array([1]), "mean", nearest=mean, mean=mean).tolist(), out[:, 0].tolist()
    ([], [0.0, 7.0, 0.0])
    """
    if rows.size == 0 or empty == "raise":
        return rows[:0]
    if empty == "nan":
        out[rows] = nan
        return rows[:0]
    vals, found = (nearest if empty == "nearest" else mean)(rows)
    out[rows[found]] = vals[found]
    return rows[~found]


def _report_alone(rows: NDArray[np.intp], m: int, empty: str) -> None:
    """Leave-one-out points with no other key of positive weight: NaN, whatever ``empty`` says."""
    what = f"{rows.size} of {m} points have no other key with positive weight to pool over"
    if empty == "raise":
        raise ValueError(f"{what} (leave-one-out)")
    warn_at_caller(f"{what}; their leave-one-out predictions are NaN", EmptyWindowWarning)


def _fill_far(
    out: NDArray[np.floating], parts: Partials, call: Call, empty: str, exclude: NDArray[np.integer] | None
) -> None:
    """Recompute the queries of a log-domain kernel that lie far from every key (their log
    weights below :data:`FAR_LOG_WEIGHT`, or overflowed), exactly, by :func:`_far_weights`."""
    rows = np.nonzero(~(parts.shift >= FAR_LOG_WEIGHT))[0]
    if rows.size == 0:
        return
    ok, w = _far_weights(call, rows, exclude)
    out[rows] = (w @ call.values[ok].astype(np.float64)).astype(out.dtype)
    alone = w.sum(axis=1) == 0
    if alone.any():
        out[rows[alone]] = np.nan
        _report_alone(rows[alone], out.shape[0], empty)


def _fill_empty(
    out: NDArray[np.floating], parts: Partials, call: Call, empty: str, exclude: NDArray[np.integer] | None
) -> None:
    if call.kernel.log_domain:
        _fill_far(out, parts, call, empty, exclude)
        return
    rows = np.nonzero(parts.empty)[0]
    if rows.size == 0:
        return
    m = out.shape[0]
    report_empty(rows.size, m, empty, call.kernel, call.bandwidth)

    def nearest(rows: NDArray[np.intp]) -> tuple[NDArray[Any], NDArray[np.bool_]]:
        return _nearest_values(call, rows, exclude, 2.0)

    def mean(rows: NDArray[np.intp]) -> tuple[NDArray[Any], NDArray[np.bool_]]:
        """Average pooling (the constant kernel) for these queries."""
        sub = Call(call.queries[rows], call.keys, call.values, call.one_d, get_kernel("constant"),
                   call.bandwidth, call.sample_weight)
        fallback, _ = compute_partials(sub, exclude=None if exclude is None else exclude[rows],
                                       backend="reference")
        return fallback.finalize(), ~fallback.empty

    alone = fill_empty(out, rows, empty, nearest=nearest, mean=mean)
    if alone.size:
        _report_alone(alone, m, empty)


def finish(
    parts: Partials, call: Call, empty: str, exclude: NDArray[np.integer] | None = None
) -> NDArray[np.floating]:
    """Predictions from partials, applying the ``empty=`` policy; (m,) or (m, p)."""
    out = parts.finalize()
    _fill_empty(out, parts, call, empty, exclude)
    if call.value_exp:
        out = np.ldexp(out, call.value_exp).astype(out.dtype, copy=False)
    return out[:, 0] if call.one_d else out


Fill = Callable[[NDArray[np.intp]], tuple[NDArray[Any], NDArray[np.bool_]]]


