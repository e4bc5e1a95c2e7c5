"""The degree-2 local system in one feature in closed form: equilibrated 3 x 3, LDL^T, and its condition.

The same rule as the general solve of :mod:`nadaraya.local.solve` (the system scaled to a unit
diagonal, singular below :data:`nadaraya.local.solve.RCOND` by its eigenvalues, then the
highest lower degree), one query at a time in compiled code: the eigenvalues of the scaled
system ``I + A`` (``A`` its off-diagonal part, a traceless symmetric 3 x 3) from the
trigonometric roots of ``det(lambda I - A) = lambda^3 - p lambda - q``; the solve by
``L D L^T`` without pivoting (the scaled system is positive definite wherever it is regular, so
the factorisation is backward stable). The trigonometric roots lose up to ``sqrt(eps)`` where
two eigenvalues nearly meet (a far query's system is nearly of rank one): a query whose
closed-form reciprocal condition is under :data:`MARGIN`, or whose system is not regular, is
left to the general solve, so every decision is the general one.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numpy.typing import NDArray

from nadaraya.partials import Partials

__all__ = ["MARGIN", "parabola"]

#: queries whose closed-form reciprocal condition is under this are decided by the general
#: solve (its eigenvalues, not these: the closed form's smallest is within about 1e-7 absolute)
MARGIN = 1e-5


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _rows(w, mom0, mom1, mom2, mom3, r0, r1, r2, h, floor, a0, b0, done, estimate, slope, inv00):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The closed-form fits of queries ``a0:b0`` where they are certainly regular (``done``);
    divisions by the weight, powers of ``h`` and the pivots are multiplications by reciprocals."""
    p = r0.shape[1]
    ih = 1.0 / h
    ih2 = ih * ih
    ih3 = ih2 * ih
    ih4 = ih2 * ih2
    for i in range(a0, b0):
        done[i] = False
        for col in range(p):  # NaN unless solved here (the arrays come unfilled)
            estimate[i, col] = np.nan
            slope[i, col] = np.nan
        inv00[i] = np.nan
        if not w[i] > 0:
            continue
        is0 = 1.0 / w[i]
        m1 = mom0[i] * is0 * ih
        m2 = mom1[i] * is0 * ih2
        m3 = mom2[i] * is0 * ih3
        m4 = mom3[i] * is0 * ih4
        if not (m2 > 0 and m4 > 0 and math.isfinite(m2) and math.isfinite(m4)):
            continue
        s1 = 1.0 / math.sqrt(m2)
        s2 = 1.0 / math.sqrt(m4)
        a = m1 * s1
        b = m2 * s2
        c = m3 * s1 * s2
        d1 = 1.0 - a * a
        # Gershgorin: the eigenvalues lie in [1 - g, 1 + g], so where (1 - g) / (1 + g) clears
        # the floor the system is certainly regular and the trigonometric roots are not needed
        g = max(abs(a) + abs(b), abs(a) + abs(c), abs(b) + abs(c))
        if not (g < 1.0 and 1.0 - g >= floor * (1.0 + g)):
            pp = a * a + b * b + c * c
            root = math.sqrt(pp / 3.0)
            cos3 = (a * b * c) / (root**3) if root > 0 else 0.0
            cos3 = min(1.0, max(-1.0, cos3))
            phi = math.acos(cos3) / 3.0
            top = 1.0 + 2.0 * root * math.cos(phi)
            low = 1.0 + 2.0 * root * math.cos(phi + 2.0 * math.pi / 3.0)
            if not low / top >= floor:
                continue
        if not d1 > 0:
            continue
        id1 = 1.0 / d1
        l21 = (c - a * b) * id1
        d2 = 1.0 - b * b - l21 * l21 * d1
        if not d2 > 0:
            continue
        id2 = 1.0 / d2
        done[i] = True
        g1 = is0 * ih * s1
        g2 = is0 * ih2 * s2
        for col in range(p + 1):  # the values, then e_0 for the inverse's corner
            if col < p:
                y0 = r0[i, col] * is0
                y1 = r1[i, col] * g1
                y2 = r2[i, col] * g2
            else:
                y0, y1, y2 = 1.0, 0.0, 0.0
            y1 -= a * y0
            y2 -= b * y0 + l21 * y1
            x2 = y2 * id2
            x1 = y1 * id1 - l21 * x2
            x0 = y0 - a * x1 - b * x2
            if col < p:
                estimate[i, col] = x0
                slope[i, col] = x1 * s1 * ih
            else:
                inv00[i] = x0


def parabola(
    parts: Partials, h: float, rcond: float
) -> tuple[NDArray[np.bool_], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """``(done, estimate, slope, inverse00)`` of the degree-2 fits in one feature; ``done``
    marks the queries solved here (the others are left to the general solve; their rows are NaN).

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.backends import reference
    >>> from nadaraya.kernels import get
    >>> x = np.linspace(0.0, 1.0, 21)[:, None]
    >>> parts = reference.partials(np.array([[0.5]]), x, 1 + x + x**2, kernel=get("gaussian"),
    ...                            bandwidth=np.array([0.2]), moments=2)
    >>> done, est, slope, inv00 = parabola(parts, 0.2, 1e-10)
    >>> bool(done[0]), round(float(est[0, 0]), 12), round(float(slope[0, 0]), 12)
    (True, 1.75, 2.0)
    """
    m, p = parts.value.shape
    f64 = np.float64
    # views where the partials hold float64 already, strided or not (no copies): the first
    # moments' columns
    mom = [np.asarray(parts.moments[j].reshape(m, -1)[:, 0], dtype=f64) for j in range(4)]
    r0 = np.asarray(parts.value, dtype=f64)
    r1 = np.asarray(parts.moments[4].reshape(m, p), dtype=f64)
    r2 = np.asarray(parts.moments[5].reshape(m, p), dtype=f64)
    done = np.empty(m, dtype=np.bool_)
    estimate, slope, inv00 = np.empty((m, p)), np.empty((m, p)), np.empty(m)
    from nadaraya._support.jit import run_ranges

    # a threshold above MARGIN (sums narrower than float64) is cleared by MARGIN more, the closed
    # form's error: the queries it decides are those the general solve would
    floor = MARGIN if rcond <= MARGIN else rcond + MARGIN
    args = (np.asarray(parts.weight, dtype=f64), *mom, r0, r1, r2, float(h), floor)
    run_ranges(_rows, args, m, (done, estimate, slope, inv00), work=100.0 * m)
    return done, estimate, slope, inv00
