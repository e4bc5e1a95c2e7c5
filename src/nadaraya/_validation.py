"""Input checks shared by the primitive, the estimator and the layers: clear errors, early."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

EmptyPolicy = Literal["nan", "nearest", "mean", "raise"]
EMPTY_POLICIES: tuple[str, ...] = ("nan", "nearest", "mean", "raise")


def _short(value: Any) -> str:
    """A short text of a value received, for error messages."""
    if isinstance(value, str):
        return repr(value)
    try:
        arr = np.asarray(value)
    except Exception:
        return repr(value)[:80]
    if arr.ndim == 0:
        return repr(arr.item())
    text = np.array2string(arr, threshold=6, edgeitems=2, separator=", ")
    return text if len(text) < 80 else text[:77] + "..."


def pick_dtype(*arrays: Any) -> np.dtype:
    """float32 when every given array already is float32, else float64."""
    if all(getattr(a, "dtype", None) == np.float32 for a in arrays):
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def as_points(name: str, a: ArrayLike, dtype: np.dtype, d: int | None = None) -> NDArray[np.floating]:
    """A (n, d) float array; 1-D input means one feature. Finite and non-empty."""
    try:
        arr = np.asarray(a)
        if arr.dtype.kind not in "biuf":
            arr = arr.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric; got {_short(a)}") from exc
    if arr.ndim == 0:
        raise ValueError(f"{name} must be a 1-D or 2-D array; got the scalar {arr.item()!r}")
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 1-D or 2-D array; got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape}); at least one row is needed")
    if arr.shape[1] == 0:
        raise ValueError(f"{name} has no features (shape {arr.shape})")
    arr = np.ascontiguousarray(arr, dtype=dtype)
    bad = ~np.isfinite(arr)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise ValueError(
            f"{name} contains NaN or inf ({int(bad.sum())} entries; the first at row {row}, "
            f"column {col}: {arr[row, col]!r})"
        )
    if d is not None and arr.shape[1] != d:
        raise ValueError(f"{name} has {arr.shape[1]} features, but the keys have {d}")
    return arr


def as_values(values: ArrayLike, n: int, dtype: np.dtype) -> tuple[NDArray[np.floating], bool]:
    """(n, p) values and whether the caller gave a 1-D array."""
    v = np.asarray(values)
    if v.dtype.kind not in "biuf":
        try:
            v = v.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"values must be numeric; got {_short(values)}") from exc
    if v.ndim not in (1, 2):
        raise ValueError(f"values must have shape (n,) or (n, p); got shape {v.shape}")
    if v.shape[0] != n:
        raise ValueError(f"values has {v.shape[0]} rows, but keys has {n}; they must match")
    one_d = v.ndim == 1
    v = np.ascontiguousarray(v.reshape(n, -1), dtype=dtype)
    if not np.isfinite(v).all():
        row = int(np.argwhere(~np.isfinite(v))[0, 0])
        raise ValueError(f"values contains NaN or inf (the first at row {row})")
    return v, one_d


def as_bandwidth(bandwidth: ArrayLike, d: int) -> NDArray[np.float64]:
    """A positive, finite bandwidth per feature, shape (d,)."""
    if isinstance(bandwidth, str):
        raise ValueError(
            f"bandwidth={bandwidth!r} is a rule name; pool() needs numbers (use "
            "nadaraya.bandwidth.rule_of_thumb or NadarayaWatson for rules)"
        )
    try:
        h = np.asarray(bandwidth, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"bandwidth must be a positive number or one per feature; got {_short(bandwidth)}"
        ) from exc
    if h.ndim == 0:
        h = np.full(d, float(h))
    elif h.ndim != 1 or h.shape[0] != d:
        raise ValueError(
            f"bandwidth must be a scalar or have one entry per feature ({d}); "
            f"got shape {h.shape}: {_short(bandwidth)}"
        )
    if not (np.isfinite(h).all() and (h > 0).all()):
        raise ValueError(f"bandwidth must be positive and finite; got {_short(bandwidth)}")
    return h


def as_sample_weight(sample_weight: ArrayLike | None, n: int, dtype: np.dtype) -> NDArray[np.floating] | None:
    """Non-negative finite weights of shape (n,), or None."""
    if sample_weight is None:
        return None
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.ndim == 0:
        w = np.full(n, float(w))
    if w.shape != (n,):
        raise ValueError(f"sample_weight must have shape ({n},); got shape {w.shape}")
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError(f"sample_weight must be finite and non-negative; got {_short(w)}")
    if not (w > 0).any():
        raise ValueError("sample_weight is zero everywhere; at least one key needs a positive weight")
    return np.ascontiguousarray(w, dtype=dtype)


def as_empty(empty: str) -> str:
    if empty not in EMPTY_POLICIES:
        raise ValueError(
            f"empty={empty!r} is not valid; choose one of {', '.join(map(repr, EMPTY_POLICIES))}"
        )
    return empty
