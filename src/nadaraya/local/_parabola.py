"""The degree-1 and degree-2 local systems in one feature in closed form: equilibrated, LDL^T, condition.

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

from nadaraya._support.jit import run_ranges
from nadaraya.partials import Partials

__all__ = ["MARGIN", "line", "parabola"]

#: queries whose closed-form reciprocal condition is under this are decided by the general
#: solve (its eigenvalues, not these: the closed form's smallest is within about 1e-7 absolute)
MARGIN = 1e-5


@numba.njit(cache=True, nogil=True)
def _rows(w, mom, r0, r1, r2, h, floor, a0, a1, done, estimate, slope, inv00):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Each query's closed-form fit where it is certainly regular (``done``), queries ``a0 .. a1 - 1``.

    The reciprocal condition ``low / top`` of the scaled system ``I + A`` is first bounded below
    by Gershgorin's discs (``low >= 1 - g``, ``top <= 1 + g``, ``g`` the largest absolute row sum
    of ``A``): where that bound clears ``floor`` the true ratio does too, and the trigonometric
    roots are not needed."""
    p = r0.shape[1]
    h1 = 1.0 / h
    h2 = h1 * h1
    h3 = h2 * h1
    h4 = h2 * h2
    for i in range(a0, a1):
        done[i] = False
        if not w[i] > 0:
            continue
        s0 = w[i]
        inv0 = 1.0 / s0
        m1 = mom[0, i] * inv0 * h1
        m2 = mom[1, i] * inv0 * h2
        m3 = mom[2, i] * inv0 * h3
        m4 = mom[3, i] * inv0 * h4
        if not (m2 > 0 and m4 > 0 and math.isfinite(m2) and math.isfinite(m4)):
            continue
        s1 = 1.0 / math.sqrt(m2)
        s2 = 1.0 / math.sqrt(m4)
        a = m1 * s1
        b = m2 * s2
        c = m3 * s1 * s2
        g = max(abs(a) + abs(b), abs(a) + abs(c), abs(b) + abs(c))
        if not (g < 1.0 and (1.0 - g) / (1.0 + g) >= floor):
            pp = a * a + b * b + c * c
            root = math.sqrt(pp / 3.0)
            cos3 = (a * b * c) / (root**3) if root > 0 else 0.0
            cos3 = min(1.0, max(-1.0, cos3))
            phi = math.acos(cos3) / 3.0
            top = 1.0 + 2.0 * root * math.cos(phi)
            low = 1.0 + 2.0 * root * math.cos(phi + 2.0 * math.pi / 3.0)
            if not low / top >= floor:
                continue
        d1 = 1.0 - a * a
        if not d1 > 0:
            continue
        l21 = (c - a * b) / d1
        d2 = 1.0 - b * b - l21 * l21 * d1
        if not d2 > 0:
            continue
        done[i] = True
        for col in range(p + 1):  # the values, then e_0 for the inverse's corner
            if col < p:
                y0 = r0[i, col] * inv0
                y1 = r1[i, col] * inv0 * h1 * s1
                y2 = r2[i, col] * inv0 * h2 * s2
            else:
                y0, y1, y2 = 1.0, 0.0, 0.0
            y1 -= a * y0
            y2 -= b * y0 + l21 * y1
            x2 = y2 / d2
            x1 = y1 / d1 - l21 * x2
            x0 = y0 - a * x1 - b * x2
            if col < p:
                estimate[i, col] = x0
                slope[i, col] = x1 * s1 * h1
            else:
                inv00[i] = x0


@numba.njit(cache=True, nogil=True)
def _line_rows(w, m1s, m2s, r0, r1, h, floor, a0, a1, estimate, slope, used, inv00):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Degree 1 in closed form for the queries ``a0 .. a1 - 1``: the equilibrated system
    ``[[1, c], [c, 1]]`` (eigenvalues ``1 -+ c``) is regular where ``(1 - c) / (1 + c) >= floor``;
    the others with weight take degree 0 (``used``: 1, 0, or -1 without weight)."""
    p = r0.shape[1]
    for i in range(a0, a1):
        if not w[i] > 0:
            continue
        s0 = w[i]
        m1 = m1s[i] / s0 / h
        m2 = m2s[i] / s0 / h**2
        regular = False
        if m2 > 0 and math.isfinite(m2):
            c = abs(m1) / math.sqrt(m2)
            regular = (1.0 - c) / (1.0 + c) >= floor
        if not regular:
            for col in range(p):
                estimate[i, col] = r0[i, col] / s0
            inv00[i] = 1.0
            used[i] = 0
            continue
        det = m2 - m1 * m1
        for col in range(p):
            v0 = r0[i, col] / s0
            v1 = r1[i, col] / s0 / h
            estimate[i, col] = (m2 * v0 - m1 * v1) / det
            slope[i, col] = (v1 - m1 * v0) / det / h
        inv00[i] = m2 / det
        used[i] = 1


def line(parts: Partials, h: float, rcond: float, estimate: NDArray[np.float64], slope: NDArray[np.float64],
         used: NDArray[np.int64], inv00: NDArray[np.float64]) -> None:
    """Write the degree-1 fits in one feature into ``estimate``, ``slope`` (m, p), ``used`` and
    ``inv00`` (the rule of :func:`nadaraya.local.solve.solve`; rows without weight left as they are).

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.backends import reference
    >>> from nadaraya.kernels import get
    >>> x = np.linspace(0.0, 1.0, 11)[:, None]
    >>> parts = reference.partials(np.array([[0.5]]), x, 2 * x + 1, kernel=get("gaussian"),
    ...                            bandwidth=np.array([0.2]), moments=1)
    >>> est, slope = np.full((1, 1), np.nan), np.full((1, 1), np.nan)
    >>> used, inv00 = np.full(1, -1), np.full(1, np.nan)
    >>> line(parts, 0.2, 1e-10, est, slope, used, inv00)
    >>> round(float(est[0, 0]), 12), round(float(slope[0, 0]), 12), int(used[0])
    (2.0, 2.0, 1)
    """
    m, p = parts.value.shape
    f64 = np.float64
    w = np.ascontiguousarray(parts.weight, dtype=f64)
    m1 = np.ascontiguousarray(parts.moments[0].reshape(m, -1)[:, 0], dtype=f64)
    m2 = np.ascontiguousarray(parts.moments[1].reshape(m, -1)[:, 0], dtype=f64)
    r0 = np.ascontiguousarray(parts.value, dtype=f64)
    r1 = np.ascontiguousarray(parts.moments[2].reshape(m, p), dtype=f64)
    run_ranges(_line_rows, (w, m1, m2, r0, r1, float(h), float(rcond)), m, (estimate, slope, used, inv00),
               grain=4096, work=m * 4.0 * (1 + p))  # about 20 ns a row: serial below 5e5 rows


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
    mom = np.stack([parts.moments[j].reshape(m, -1)[:, 0].astype(f64) for j in range(4)])
    r0 = np.ascontiguousarray(parts.value, dtype=f64)
    r1 = np.ascontiguousarray(parts.moments[4].reshape(m, p), dtype=f64)
    r2 = np.ascontiguousarray(parts.moments[5].reshape(m, p), dtype=f64)
    done = np.zeros(m, dtype=np.bool_)
    estimate = np.full((m, p), np.nan)
    slope = np.full((m, p), np.nan)
    inv00 = np.full(m, np.nan)
    args = (np.ascontiguousarray(parts.weight, dtype=f64), mom, r0, r1, r2, float(h), max(MARGIN, rcond))
    run_ranges(_rows, args, m, (done, estimate, slope, inv00), grain=4096, work=m * 8.0 * (1 + p))
    return done, estimate, slope, inv00
