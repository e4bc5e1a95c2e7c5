"""Partial sums from rows computed in float64: weight, values, then the moments of a local fit."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from nadaraya.partials import Partials

__all__ = ["assemble"]


def assemble(shift: NDArray[np.float64], out: NDArray[np.float64], dtype: np.dtype, m: int, p: int, r: int,
             d: int = 1) -> Partials:
    """Partials from the rows ``out`` (weight, ``p`` values, then the moments of a local fit of
    degree ``r`` in ``d`` features, each flattened, in the order of
    :func:`nadaraya.backends.reference.moment_shapes`: ``2 r`` and ``r p`` columns in 1-D) under
    ``shift``, rounded to ``dtype`` with the weight's binary exponent moved into
    the shift first (so that a float32 weight never underflows). The fields are views of one
    array of rows (``out`` itself where ``dtype`` is float64), in ``out``'s layout.

    Examples
    --------
    >>> import numpy as np
    >>> part = assemble(np.zeros(1), np.array([[2.0**-140, 2.0**-141]]), np.dtype(np.float32), 1, 1, 0)
    >>> part.finalize().tolist(), part.weight.tolist()
    ([[0.5]], [0.5])
    """
    weight, rest = out[:, 0], out[:, 1:]
    if dtype != np.float64:
        mant, expo = np.frexp(weight)
        shift = np.where(weight > 0, shift + expo * math.log(2.0), shift)
        with np.errstate(over="ignore"):  # a far query's shift may pass float32's range: -inf
            shift = shift.astype(dtype)
        # one array of the dtype's rows: the scaled sums rounded once, as astype rounds them
        rows = np.empty(out.shape, dtype=dtype)
        rows[:, 0] = mant
        np.ldexp(rest, -expo[:, None], out=rows[:, 1:], casting="same_kind")
        weight, rest = rows[:, 0], rows[:, 1:]
    value = rest[:, :p]
    shapes = [(d,) * j for j in range(1, 2 * r + 1)] + [(d,) * j + (p,) for j in range(1, r + 1)]
    extra, at = [], p
    for shape in shapes:
        size = math.prod(shape)
        extra.append(rest[:, at:at + size].reshape((m, *shape)))
        at += size
    # the fields are views of the rows (strided where ``out`` is row-major): no copy per field
    return Partials(np.ascontiguousarray(shift), weight, value, tuple(extra))
