"""Input checks shared by the primitive, the estimator and the layers: clear errors, early."""

from __future__ import annotations

import os
import sys
import warnings
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


def _is_missing(item: Any) -> bool:
    """Whether one element of an object array is a missing value (None, pd.NA, pd.NaT)."""
    if item is None:
        return True
    return type(item).__name__ in ("NAType", "NaTType")


def as_real(name: str, a: Any) -> NDArray[Any]:
    """``a`` as a NumPy array of real numbers (bool, integer or float), without copying
    when it already is one; a ValueError naming ``name`` otherwise.

    Complex numbers are refused rather than truncated, dates and durations rather than
    read as counts of their unit, text and missing values (None, ``pd.NA``) rather than
    reported as a failed conversion.

    Examples
    --------
    >>> as_real("keys", [1, 2]).dtype.kind
    'i'
    >>> as_real("keys", [1 + 2j])
    Traceback (most recent call last):
    ...
    ValueError: keys must be real numbers; got complex128 values such as (1+2j) (Complex data not supported)
    """
    try:
        arr = np.asarray(a)
    except (TypeError, ValueError) as exc:  # ragged nested lists and the like
        raise ValueError(f"{name} must be a numeric array; got {_short(a)} ({exc})") from None
    kind = arr.dtype.kind
    if kind in "biuf":
        return arr
    if kind == "c":
        first = arr.flat[0].item() if arr.size else ""
        raise ValueError(
            f"{name} must be real numbers; got {arr.dtype} values such as {first!r} "
            "(Complex data not supported)"
        )
    if kind in "mM":
        raise ValueError(
            f"{name} must be real numbers; got {arr.dtype} ({'durations' if kind == 'm' else 'dates'}): "
            "convert them to numbers in the unit you mean first"
        )
    if kind == "O":
        flat = arr.ravel()
        missing = [i for i, item in enumerate(flat) if _is_missing(item)]
        if missing:
            where = np.unravel_index(missing[0], arr.shape) if arr.ndim > 1 else (missing[0],)
            raise ValueError(
                f"{name} contains missing values (None, pd.NA or NaT: {len(missing)} entries; the first "
                f"at index {tuple(int(i) for i in where)}); drop or impute them first"
            )
        bad = next((item for item in flat if isinstance(item, complex | np.complexfloating)), None)
        if bad is not None:
            raise ValueError(
                f"{name} must be real numbers; got the complex value {bad!r} (Complex data not supported)"
            )
    try:
        return arr.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numeric; got {_short(a)} of dtype {arr.dtype}") from None


def as_points(name: str, a: ArrayLike, dtype: np.dtype, d: int | None = None) -> NDArray[np.floating]:
    """A (n, d) float array; 1-D input means one feature. Real, finite and non-empty."""
    arr = as_real(name, a)
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


def is_dask(*arrays: object) -> bool:
    """Whether any argument is a Dask collection, checked without importing dask (so that
    ``import nadaraya`` stays light and NumPy callers never pay for it).

    Examples
    --------
    >>> import numpy as np
    >>> is_dask(np.ones(2), [1.0])
    False
    """
    return any(type(a).__module__.startswith("dask.") and hasattr(a, "__dask_graph__") for a in arrays)


def check_values_shape(shape: tuple[int, ...], n: int, *, name: str = "values", keys: str = "keys") -> bool:
    """Check the shape of the values of ``n`` keys, (n,) or (n, p) with p >= 1, for NumPy and
    Dask arrays alike; whether they are 1-D. ``name`` and ``keys`` name the arguments in errors.

    Examples
    --------
    >>> check_values_shape((3,), 3)
    True
    >>> check_values_shape((2, 1), 3)
    Traceback (most recent call last):
    ...
    ValueError: values has 2 rows, but keys has 3; they must match
    """
    if len(shape) not in (1, 2):
        raise ValueError(f"{name} must have shape (n,) or (n, p); got shape {shape}")
    if shape[0] != n:
        raise ValueError(f"{name} has {shape[0]} rows, but {keys} has {n}; they must match")
    if len(shape) == 2 and shape[1] == 0:
        raise ValueError(f"{name} has no columns (shape {shape}); at least one output is needed")
    return len(shape) == 1


def as_values(
    values: ArrayLike, n: int, dtype: np.dtype, *, name: str = "values", keys: str = "keys"
) -> tuple[NDArray[np.floating], bool]:
    """(n, p) finite values and whether the caller gave a 1-D array; ``name`` and ``keys`` name
    the arguments in errors (e.g. ``name="y", keys="X"``).

    Examples
    --------
    >>> v, one_d = as_values([1, 2], 2, np.dtype(np.float64))
    >>> v.shape, one_d
    ((2, 1), True)
    >>> as_values([1.0, np.nan], 2, np.dtype(np.float64), name="y", keys="X")
    Traceback (most recent call last):
    ...
    ValueError: y contains NaN or inf (1 entries; the first at row 1: np.float64(nan))
    """
    v = as_real(name, values)
    one_d = check_values_shape(v.shape, n, name=name, keys=keys)
    v = np.ascontiguousarray(v.reshape(n, -1), dtype=dtype)
    if not np.isfinite(v).all():
        bad = ~np.isfinite(v)
        row = int(np.argwhere(bad)[0, 0])
        raise ValueError(
            f"{name} contains NaN or inf ({int(bad.sum())} entries; the first at row {row}: "
            f"{v[bad].flat[0]!r})"
        )
    return v, one_d


def as_bandwidth(bandwidth: ArrayLike, d: int) -> NDArray[np.float64]:
    """A positive, finite bandwidth per feature, shape (d,)."""
    if isinstance(bandwidth, str):
        raise ValueError(
            f"bandwidth={bandwidth!r} is a string; pool() needs a positive number or one per "
            "feature (rule names such as 'scott' or 'cv' are for NadarayaWatson and "
            "nadaraya.select_bandwidth)"
        )
    h = as_real("bandwidth", bandwidth).astype(np.float64)
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


def as_sample_weight(
    sample_weight: ArrayLike | None, n: int, dtype: np.dtype, *, relative: bool = False
) -> NDArray[np.floating] | None:
    """Non-negative finite weights of shape (n,), or None.

    With ``relative=True`` (for callers in which only ratios of weights matter, such as the
    attention weights) they are multiplied by a power of two that brings the largest to
    [0.5, 1): exact, and it keeps sums of weights near 1e308 from overflowing and weights
    near the subnormal range from losing digits in their products with kernel terms.
    """
    if sample_weight is None:
        return None
    w = as_real("sample_weight", sample_weight).astype(np.float64)
    if w.ndim == 0:
        w = np.full(n, float(w))
    if w.shape != (n,):
        raise ValueError(f"sample_weight must have shape ({n},); got shape {w.shape}")
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError(f"sample_weight must be finite and non-negative; got {_short(w)}")
    check_some_weight(w)
    if relative:
        w = relative_weights(w, dtype)
    return np.ascontiguousarray(w, dtype=dtype)


def relative_weights(w: NDArray[np.floating], dtype: np.dtype) -> NDArray[np.floating]:
    """Valid weights multiplied by the power of two that brings the largest to [0.5, 1), in
    ``dtype`` (exact; see :func:`as_sample_weight`'s ``relative``).

    Examples
    --------
    >>> relative_weights(np.array([3.0, 1e-320, 0.0]), np.dtype(np.float32)).tolist()[0]
    0.75
    """
    positive = w > 0
    out = np.ldexp(w, -np.frexp(w.max())[1]).astype(dtype)
    # a weight more than the dtype's range below the largest stays a key (its terms are
    # negligible either way, but zero weight means "not a key")
    out[positive & (out == 0)] = np.finfo(dtype).smallest_subnormal
    return out


def check_some_weight(w: NDArray[np.floating]) -> None:
    """Refuse sample weights that are zero everywhere (then no key has any weight).

    Examples
    --------
    >>> check_some_weight(np.zeros(2))
    Traceback (most recent call last):
    ...
    ValueError: sample_weight is zero everywhere; at least one key needs a positive weight
    """
    if not (w > 0).any():
        raise ValueError("sample_weight is zero everywhere; at least one key needs a positive weight")


def as_tol(tol: Any) -> float | None:
    """``None`` (exact sums) or an allowed error in ``(0, 0.1]``.

    Examples
    --------
    >>> as_tol(1e-10), as_tol(None)
    (1e-10, None)
    >>> as_tol(0.5)
    Traceback (most recent call last):
    ...
    ValueError: tol must be None (exact) or a number in (0, 0.1], e.g. 1e-10; got 0.5
    """
    if tol is None:
        return None
    number = isinstance(tol, int | float | np.integer | np.floating) and not isinstance(tol, bool)
    if not (number and 0 < tol <= 0.1):
        raise ValueError(f"tol must be None (exact) or a number in (0, 0.1], e.g. 1e-10; got {tol!r}")
    return float(tol)


def as_empty(empty: str) -> str:
    if empty not in EMPTY_POLICIES:
        raise ValueError(
            f"empty={empty!r} is not valid; choose one of {', '.join(map(repr, EMPTY_POLICIES))}"
        )
    return empty


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # nadaraya/
#: the wrapper of scikit-learn's ``_fit_context`` around an estimator's ``fit`` (parameter validation)
_FIT_CONTEXT = (os.path.join("sklearn", "base.py"), "wrapper")


def warn_at_caller(message: str, category: type[Warning]) -> None:
    """Warn at the first frame outside nadaraya: the user's line, however deep in the library
    the warning is raised (a fixed ``stacklevel`` points into the library as soon as one more
    function stands between the public entry point and the warning). scikit-learn's wrapper
    that validates a ``fit``'s parameters counts as the library.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_at_caller("look", UserWarning)
    >>> caught[0].filename.endswith("_validation.py")
    False
    """
    frame: Any = sys._getframe(0)
    level = 1
    while frame is not None and (frame.f_code.co_filename.startswith(_PACKAGE) or (
            frame.f_code.co_filename.endswith(_FIT_CONTEXT[0]) and frame.f_code.co_name == _FIT_CONTEXT[1])):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)


def as_moments(moments: object) -> int:
    """The ``moments`` argument of a backend (a local polynomial degree) as an int, or a
    ValueError naming it. One check for every backend.

    Examples
    --------
    >>> as_moments(2)
    2
    >>> as_moments(1.0)
    Traceback (most recent call last):
    ...
    ValueError: moments must be a non-negative int (a polynomial degree); got 1.0
    """
    if isinstance(moments, bool) or not isinstance(moments, int | np.integer) or moments < 0:
        raise ValueError(f"moments must be a non-negative int (a polynomial degree); got {moments!r}")
    return int(moments)
