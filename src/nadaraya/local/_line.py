"""The degree-1 local system in one feature in closed form, one query at a time in compiled code.

The rule of :mod:`nadaraya.local.solve`: the 2 x 2 system equilibrated to ``[[1, c], [c, 1]]``
(eigenvalues ``1 -+ c``), singular when ``(1 - c) / (1 + c)`` is below ``rcond``, then degree 0.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numpy.typing import NDArray

__all__ = ["line_rows"]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _rows(w, m1s, m2s, r0s, r1s, h, rcond, a, b, estimate, slope, used, inv00):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Queries ``a:b``; threads take disjoint ranges. Divisions by the weight, ``h`` and the
    determinant are multiplications by their reciprocals (four divisions a query, not twelve)."""
    p = r0s.shape[1]
    ih = 1.0 / h
    ih2 = ih * ih
    for i in range(a, b):
        wi = np.float64(w[i])
        if not wi > 0:
            for col in range(p):
                estimate[i, col] = np.nan
                slope[i, col] = np.nan
            inv00[i] = np.nan
            used[i] = -1
            continue
        iw = 1.0 / wi
        m1 = np.float64(m1s[i]) * iw * ih
        m2 = np.float64(m2s[i]) * iw * ih2
        c = abs(m1) / math.sqrt(m2) if m2 > 0 else np.nan
        if m2 > 0 and math.isfinite(m2) and (1.0 - c) >= rcond * (1.0 + c):
            idet = 1.0 / (m2 - m1 * m1)
            for col in range(p):
                r0 = np.float64(r0s[i, col]) * iw
                r1 = np.float64(r1s[i, col]) * iw * ih
                estimate[i, col] = (m2 * r0 - m1 * r1) * idet
                slope[i, col] = (r1 - m1 * r0) * idet * ih
            inv00[i] = m2 * idet
            used[i] = 1
        else:
            for col in range(p):
                estimate[i, col] = np.float64(r0s[i, col]) * iw
                slope[i, col] = np.nan
            inv00[i] = 1.0
            used[i] = 0


def line_rows(
    weight: NDArray[np.floating], m1: NDArray[np.floating], m2: NDArray[np.floating],
    r0: NDArray[np.floating], r1: NDArray[np.floating], h: float, rcond: float,
    estimate: NDArray[np.float64], slope: NDArray[np.float64], used: NDArray[np.int64],
    inv00: NDArray[np.float64],
) -> None:
    """Fill ``estimate`` (m, p), ``slope`` (m, p), ``used`` and ``inv00`` from the weight sums,
    the first two moments and the value sums ``r0``, ``r1`` (any float dtype, as the partials
    hold them); rows without positive weight get NaN and ``used`` -1.

    Examples
    --------
    >>> import numpy as np
    >>> est, slope = np.full((1, 1), np.nan), np.full((1, 1), np.nan)
    >>> used, inv00 = np.full(1, -1), np.full(1, np.nan)
    >>> line_rows(np.array([2.0]), np.array([0.0]), np.array([1.0]), np.array([[4.0]]),
    ...           np.array([[1.0]]), 1.0, 1e-10, est, slope, used, inv00)
    >>> est.tolist(), slope.tolist(), used.tolist()  # level 4 / 2, slope (sum w u y) / (sum w u^2)
    ([[2.0]], [[1.0]], [1])
    """
    from nadaraya._support.jit import run_ranges

    m = weight.shape[0]
    run_ranges(_rows, (weight, m1, m2, r0, r1, float(h), float(rcond)), m, (estimate, slope, used, inv00),
               work=40.0 * m)
